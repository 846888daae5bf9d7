"""Benchmark models for the export benchmark: plain torch modules (no torchvision), in eval mode, with seeded
random weights and a realistic batch-1 input.

    module, inputs = build("resnet50")      # -> (nn.Module in eval mode, (torch.randn(1, 3, 224, 224),))

| name        | what                                                        | input          |
| ----------- | ----------------------------------------------------------- | -------------- |
| mlp         | 1024 -> 2048 -> 2048 -> 1000 with ReLU                       | 1 x 1024       |
| resnet18    | ResNet-18 (basic blocks, batch norm), 1000 classes            | 1 x 3 x 224^2  |
| resnet50    | ResNet-50 (bottleneck blocks, batch norm), 1000 classes       | 1 x 3 x 224^2  |
| mobilenetv2 | MobileNetV2 (inverted residuals, depthwise convs, ReLU6)      | 1 x 3 x 224^2  |
| transformer | nn.TransformerEncoder, 6 layers, d=512, 8 heads, ffn 2048     | 1 x 128 x 512  |
| vit_small   | ViT-S/16: patch conv, class token, 12 blocks of d=384, 6 heads | 1 x 3 x 224^2  |
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

# -- MLP --


class MLP(nn.Module):
    def __init__(self, sizes=(1024, 2048, 2048, 1000)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return x


# -- ResNet --


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        self.a = _conv_bn(cin, width, 3, stride)
        self.b = _conv_bn(width, width, 3)
        self.down = _conv_bn(cin, width, 1, stride) if stride != 1 or cin != width else None

    def forward(self, x):
        skip = x if self.down is None else self.down(x)
        return F.relu(self.b(F.relu(self.a(x))) + skip)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * 4
        self.a = _conv_bn(cin, width, 1)
        self.b = _conv_bn(width, width, 3, stride)
        self.c = _conv_bn(width, cout, 1)
        self.down = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        skip = x if self.down is None else self.down(x)
        return F.relu(self.c(F.relu(self.b(F.relu(self.a(x))))) + skip)


class ResNet(nn.Module):
    def __init__(self, block: type, depths: tuple[int, ...], classes: int = 1000):
        super().__init__()
        self.stem = _conv_bn(3, 64, 7, 2)
        stages, cin = [], 64
        for i, depth in enumerate(depths):
            width = 64 << i
            for j in range(depth):
                stages.append(block(cin, width, 2 if j == 0 and i > 0 else 1))
                cin = width * block.expansion
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.stem(x)), 3, 2, 1)
        x = self.stages(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# -- MobileNetV2 --


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [_conv_bn(cin, hidden, 1), nn.ReLU6()]
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(), _conv_bn(hidden, cout, 1)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))  # expansion, channels, repeats, first stride

    def __init__(self, classes: int = 1000):
        super().__init__()
        layers, cin = [_conv_bn(3, 32, 3, 2), nn.ReLU6()], 32
        for expand, cout, repeats, stride in self.SETTINGS:
            for i in range(repeats):
                layers.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                cin = cout
        layers += [_conv_bn(cin, 1280, 1), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# -- transformers --


class Encoder(nn.Module):
    """nn.TransformerEncoder as users write it (post-norm layers, ReLU feed-forward, batch first)."""

    def __init__(self, d: int = 512, heads: int = 8, ffn: int = 2048, depth: int = 6):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        for parameter in self.encoder.parameters():  # the layers are deep copies of one: give each its own weights
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)
            else:
                nn.init.normal_(parameter, 0.0, 0.02)

    def forward(self, x):
        return self.encoder(x)


class ViTBlock(nn.Module):
    def __init__(self, d: int, heads: int, hidden: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attention = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    """ViT-S/16 with explicit attention (matmul, softmax), as timm-style code writes it."""

    def __init__(self, d: int = 384, depth: int = 12, heads: int = 6, patch: int = 16, image: int = 224,
                 classes: int = 1000):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d).normal_(std=0.02))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, d).normal_(std=0.02))
        self.blocks = nn.Sequential(*(ViTBlock(d, heads, 4 * d) for _ in range(depth)))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


# -- the zoo --

MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "mlp": (MLP, (1, 1024)),
    "resnet18": (lambda: ResNet(BasicBlock, (2, 2, 2, 2)), (1, 3, 224, 224)),
    "resnet50": (lambda: ResNet(Bottleneck, (3, 4, 6, 3)), (1, 3, 224, 224)),
    "mobilenetv2": (MobileNetV2, (1, 3, 224, 224)),
    "transformer": (Encoder, (1, 128, 512)),
    "vit_small": (ViT, (1, 3, 224, 224)),
}
QUICK = ("mlp", "resnet18")


def _randomize_norms(module: nn.Module, generator: torch.Generator) -> None:
    """Non-trivial batch-norm statistics, so that exported graphs cannot fold them away as identities."""
    for child in module.modules():
        if isinstance(child, nn.BatchNorm2d):
            child.running_mean.normal_(0.0, 0.1, generator=generator)
            child.running_var.uniform_(0.5, 1.5, generator=generator)
            child.weight.data.uniform_(0.5, 1.5, generator=generator)
            child.bias.data.normal_(0.0, 0.1, generator=generator)


def build(name: str, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The module `name` in eval mode (seeded weights) and its example inputs."""
    factory, shape = MODELS[name]
    torch.manual_seed(seed)
    module = factory().eval()
    generator = torch.Generator().manual_seed(seed)
    _randomize_norms(module, generator)
    return module, (torch.randn(shape, generator=generator),)


def parameter_bytes(module: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in list(module.parameters()) + list(module.buffers()))
