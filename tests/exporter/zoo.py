"""A small model zoo for the exporter tests, written in plain torch (no torchvision).

Each model keeps its architecture's real structure (block types, depth, skip connections, attention) at reduced
widths and input sizes, so that exporting and running it in every consumer stays cheap. `ZOO` lists them with
their example inputs; `make(name)` builds one with a fixed seed.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


# ----------------------------------------------------------------------------------------------------- MLP
class MLP(nn.Module):
    def __init__(self, sizes=(16, 32, 32, 10), dropout: float = 0.1):
        super().__init__()
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers += [nn.ReLU(), nn.Dropout(dropout)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


# ----------------------------------------------------------------------------------------------------- ResNet
def conv3x3(a: int, b: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(a, b, 3, stride, 1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, a: int, width: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1, self.bn1 = conv3x3(a, width, stride), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = conv3x3(width, width), nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, a: int, width: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(a, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = conv3x3(width, width, stride), nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet(nn.Module):
    """torchvision's ResNet layout: 7x7 stem, max pool, four stages of blocks, global average pool, classifier."""

    def __init__(self, block: type, layers: list[int], width: int = 64, classes: int = 10):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._stage(block, width, layers[0], 1)
        self.layer2 = self._stage(block, width * 2, layers[1], 2)
        self.layer3 = self._stage(block, width * 4, layers[2], 2)
        self.layer4 = self._stage(block, width * 8, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, classes)

    def _stage(self, block: type, width: int, count: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != width * block.expansion:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, width * block.expansion, 1, stride, bias=False),
                                       nn.BatchNorm2d(width * block.expansion))
        blocks = [block(self.inplanes, width, stride, downsample)]
        self.inplanes = width * block.expansion
        blocks += [block(self.inplanes, width) for _ in range(1, count)]
        return nn.Sequential(*blocks)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(width: int = 64) -> ResNet:
    return ResNet(BasicBlock, [2, 2, 2, 2], width)


def resnet50(width: int = 64) -> ResNet:
    return ResNet(Bottleneck, [3, 4, 6, 3], width)


# ----------------------------------------------------------------------------------------------------- MobileNetV2
def conv_bn_relu6(a: int, b: int, kernel: int = 3, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(a, b, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(b), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    def __init__(self, a: int, b: int, stride: int, expand: int):
        super().__init__()
        hidden = a * expand
        layers: list[nn.Module] = [conv_bn_relu6(a, hidden, 1)] if expand != 1 else []
        layers += [conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),  # depthwise
                   nn.Conv2d(hidden, b, 1, bias=False), nn.BatchNorm2d(b)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and a == b

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]  # expansion, channels, repeats, first stride

    def __init__(self, width_mult: float = 1.0, classes: int = 10, dropout: float = 0.2):
        super().__init__()

        def scaled(c: int) -> int:
            return max(8, int(c * width_mult + 4) // 8 * 8)
        a, last = scaled(32), scaled(1280)
        layers: list[nn.Module] = [conv_bn_relu6(3, a, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(a, scaled(c), s if i == 0 else 1, t))
                a = scaled(c)
        layers.append(conv_bn_relu6(a, last, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(last, classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# ----------------------------------------------------------------------------------------------------- VGG
class VGG(nn.Module):
    """VGG-11 with batch norm: 3x3 conv stacks between max pools, then a dropout MLP classifier."""

    CONFIG = [1, "M", 2, "M", 4, 4, "M", 8, 8, "M", 8, 8, "M"]  # channel multiples of `width`

    def __init__(self, width: int = 64, classes: int = 10, dropout: float = 0.5):
        super().__init__()
        layers: list[nn.Module] = []
        a = 3
        for item in self.CONFIG:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(a, item * width, 3, padding=1), nn.BatchNorm2d(item * width), nn.ReLU(True)]
                a = item * width
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(nn.Linear(a * 4, 16 * width // 8), nn.ReLU(True), nn.Dropout(dropout),
                                        nn.Linear(16 * width // 8, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


# ----------------------------------------------------------------------------------------------------- U-Net
class DoubleConv(nn.Sequential):
    def __init__(self, a: int, b: int):
        super().__init__(nn.Conv2d(a, b, 3, padding=1, bias=False), nn.BatchNorm2d(b), nn.ReLU(inplace=True),
                         nn.Conv2d(b, b, 3, padding=1, bias=False), nn.BatchNorm2d(b), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """Three levels down, three up; the two deeper up-steps use transposed convolutions, the last bilinear
    interpolation, each followed by concatenation with the matching encoder features."""

    def __init__(self, channels: int = 3, classes: int = 2, width: int = 8):
        super().__init__()
        w = width
        self.inc = DoubleConv(channels, w)
        self.down1, self.down2, self.down3 = DoubleConv(w, 2 * w), DoubleConv(2 * w, 4 * w), DoubleConv(4 * w, 8 * w)
        self.up3 = nn.ConvTranspose2d(8 * w, 4 * w, 2, stride=2)
        self.dec3 = DoubleConv(8 * w, 4 * w)
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
        self.dec2 = DoubleConv(4 * w, 2 * w)
        self.dec1 = DoubleConv(3 * w, w)
        self.out = nn.Conv2d(w, classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(F.max_pool2d(x1, 2))
        x3 = self.down2(F.max_pool2d(x2, 2))
        x4 = self.down3(F.max_pool2d(x3, 2))
        y = self.dec3(torch.cat([x3, self.up3(x4)], 1))
        y = self.dec2(torch.cat([x2, self.up2(y)], 1))
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        y = self.dec1(torch.cat([x1, y], 1))
        return self.out(y)


# ----------------------------------------------------------------------------------------------------- RNNs
class Recurrent(nn.Module):
    """A multi-layer bidirectional batch-first LSTM or GRU, followed by a linear head on every step."""

    def __init__(self, kind: str, inputs: int = 6, hidden: int = 8, layers: int = 2, classes: int = 3):
        super().__init__()
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]
        self.rnn = rnn(inputs, hidden, num_layers=layers, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


# ----------------------------------------------------------------------------------------------------- Transformers
class Encoder(nn.Module):
    def __init__(self, d: int = 16, heads: int = 2, dropout: float = 0.1):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=dropout, batch_first=True)

    def forward(self, x):
        return self.layer(x)


class MLPBlock(nn.Sequential):
    def __init__(self, d: int, hidden: int, dropout: float):
        super().__init__(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d), nn.Dropout(dropout))


class SelfAttention(nn.Module):
    """Multi-head self-attention from one qkv projection; `causal` picks how the causal mask is applied:
    None (no mask), "sdpa" (scaled_dot_product_attention(is_causal=True)) or "masked" (explicit masked softmax)."""

    def __init__(self, d: int, heads: int, causal: str | None = None, length: int = 16, dropout: float = 0.0):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(length, length, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.causal == "masked":
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
            scores = scores.masked_fill(~self.mask[:n, :n], float("-inf"))
            y = self.drop(scores.softmax(-1)) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal == "sdpa")
        return self.drop(self.proj(y.transpose(1, 2).reshape(b, n, d)))


class Block(nn.Module):
    """A pre-norm transformer block, as in ViT and GPT-2."""

    def __init__(self, d: int, heads: int, causal: str | None = None, length: int = 16, dropout: float = 0.0):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = SelfAttention(d, heads, causal, length, dropout)
        self.mlp = MLPBlock(d, 4 * d, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    def __init__(self, image: int = 16, patch: int = 4, d: int = 16, heads: int = 2, depth: int = 2,
                 classes: int = 10, dropout: float = 0.1):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, d) * 0.02)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*[Block(d, heads, dropout=dropout) for _ in range(depth)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1)
        x = self.blocks(self.drop(x + self.pos))
        return self.head(self.norm(x[:, 0]))


class GPT2(nn.Module):
    """Token and position embeddings, causal pre-norm blocks, final LayerNorm and a language-model head."""

    def __init__(self, vocab: int = 32, length: int = 8, d: int = 16, heads: int = 2, depth: int = 1,
                 causal: str = "sdpa", dropout: float = 0.1):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(length, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*[Block(d, heads, causal, length, dropout) for _ in range(depth)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.drop(self.wte(tokens) + self.wpe(positions))
        return self.lm_head(self.ln_f(self.blocks(x)))


# ----------------------------------------------------------------------------------------------------- the zoo
@dataclass(frozen=True)
class Entry:
    build: Callable[[float], nn.Module]  # dropout probability -> module
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    has_batch_norm: bool = False
    train_differs: bool = True  # batch norm or dropout: training mode traces to a different graph


def _image(size: int = 32, batch: int = 2) -> Callable[[], tuple[torch.Tensor, ...]]:
    return lambda: (torch.randn(batch, 3, size, size),)


def _tokens() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, 32, (2, 8), dtype=torch.int32),)  # int32: the Khronos executor's integer type


# ResNets and MobileNetV2 see 64x64 images: at 32x32 their last stages are 1x1, and training-mode batch norm over
# two values per channel is so ill-conditioned that torch's own float32 result is off by up to 1e-1.
ZOO: dict[str, Entry] = {
    "mlp": Entry(lambda p: MLP(dropout=p), lambda: (torch.randn(4, 16),)),
    "resnet18": Entry(lambda p: resnet18(width=8), _image(64), has_batch_norm=True),
    "resnet50": Entry(lambda p: resnet50(width=4), _image(64), has_batch_norm=True),
    "mobilenet_v2": Entry(lambda p: MobileNetV2(0.25, dropout=p), _image(64), has_batch_norm=True),
    "vgg": Entry(lambda p: VGG(width=4, dropout=p), _image(), has_batch_norm=True),
    "unet": Entry(lambda p: UNet(width=4), _image(16), has_batch_norm=True),
    "lstm": Entry(lambda p: Recurrent("lstm"), lambda: (torch.randn(2, 5, 6),), train_differs=False),
    "gru": Entry(lambda p: Recurrent("gru"), lambda: (torch.randn(2, 5, 6),), train_differs=False),
    "transformer_encoder": Entry(lambda p: Encoder(dropout=p), lambda: (torch.randn(2, 6, 16),)),
    "vit": Entry(lambda p: ViT(dropout=p), _image(16)),
    "gpt2_sdpa": Entry(lambda p: GPT2(causal="sdpa", dropout=p), _tokens),
    "gpt2_masked": Entry(lambda p: GPT2(causal="masked", dropout=p), _tokens),
}


def make(name: str, mode: str, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Model `name` in `mode` ('eval' or 'train'; in training mode every dropout probability is 0, so the
    module stays deterministic) with its example inputs."""
    entry = ZOO[name]
    torch.manual_seed(seed)
    module = entry.build(0.1 if mode == "eval" else 0.0)
    trained_look(module)
    module.train(mode == "train")
    return module, entry.inputs()


def trained_look(module: nn.Module) -> None:
    """Batch norms as after training (statistics and affine parameters away from 0 and 1), so that an export
    mixing them up cannot pass, and no activation sits exactly on a ReLU6 kink by construction."""
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, nn.BatchNorm2d):
                layer.running_mean.normal_(0.0, 0.1)
                layer.running_var.uniform_(0.5, 1.5)
                layer.weight.uniform_(0.5, 1.5)
                layer.bias.normal_(0.0, 0.1)
