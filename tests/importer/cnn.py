"""A small NNEF CNN written for the tests, its hand-written torch twin, and a synthetic learnable task."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from importer.model_files import write_model

TEXT = """version 1.0;
extension KHR_enable_operator_expressions;
graph cnn( image ) -> ( logits )
{
    image = external<scalar>(shape = [1, 2, 12, 12]);
    conv1_filter = variable<scalar>(shape = [8, 2, 3, 3], label = 'conv1/filter');
    conv1_bias = variable<scalar>(shape = [1, 8], label = 'conv1/bias');
    conv1 = relu(conv(image, conv1_filter, conv1_bias, padding = [(1, 1), (1, 1)]));
    pool1 = max_pool(conv1, size = [1, 1, 2, 2], stride = [1, 1, 2, 2], border = 'ignore');
    conv2_filter = variable<scalar>(shape = [8, 8, 3, 3], label = 'conv2/filter');
    conv2_bias = variable<scalar>(shape = [1, 8], label = 'conv2/bias');
    conv2 = relu(conv(pool1, conv2_filter, conv2_bias, padding = [(1, 1), (1, 1)], stride = [2, 2]));
    pooled = mean_reduce(conv2, axes = [2, 3]);
    flat = reshape(pooled, shape = [0, -1]);
    fc_weight = variable<scalar>(shape = [2, 8], label = 'fc/weight');
    fc_bias = variable<scalar>(shape = [1, 2], label = 'fc/bias');
    logits = linear(flat, fc_weight, fc_bias);
}
"""

SHAPES = {"conv1/filter": (8, 2, 3, 3), "conv1/bias": (1, 8), "conv2/filter": (8, 8, 3, 3), "conv2/bias": (1, 8),
          "fc/weight": (2, 8), "fc/bias": (1, 2)}


def write_cnn(folder: Path, seed: int = 0) -> dict[str, np.ndarray]:
    generator = np.random.default_rng(seed)
    arrays = {label: (generator.standard_normal(shape) * 0.3).astype(np.float32) for label, shape in SHAPES.items()}
    write_model(folder, TEXT, arrays)
    return arrays


class Twin(torch.nn.Module):
    """The same network written by hand."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(2, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, stride=2)
        self.fc = torch.nn.Linear(8, 2)
        with torch.no_grad():
            for name in ("conv1", "conv2", "fc"):
                layer = getattr(self, name)
                layer.weight.copy_(torch.from_numpy(arrays[f"{name}/{'weight' if name == 'fc' else 'filter'}"]))
                layer.bias.copy_(torch.from_numpy(arrays[f"{name}/bias"]).reshape(-1))

    def forward(self, image):
        x = F.max_pool2d(F.relu(self.conv1(image)), 2)
        x = F.relu(self.conv2(x)).mean(dim=(2, 3))
        return self.fc(x)

    def nnef_grads(self) -> dict[str, torch.Tensor]:
        """Gradients keyed like the imported module's parameters (biases reshaped to NNEF's [1, C])."""
        return {"conv1.filter": self.conv1.weight.grad, "conv1.bias": self.conv1.bias.grad[None],
                "conv2.filter": self.conv2.weight.grad, "conv2.bias": self.conv2.bias.grad[None],
                "fc.weight": self.fc.weight.grad, "fc.bias": self.fc.bias.grad[None]}


def batch(generator: torch.Generator, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Label 1 when the first channel is brighter on the left half than on the right half."""
    images = torch.rand(size, 2, 12, 12, generator=generator)
    labels = (images[:, 0, :, :6].mean(dim=(1, 2)) > images[:, 0, :, 6:].mean(dim=(1, 2))).long()
    images[:, 0, :, :6] += labels[:, None, None] * 0.3
    return images, labels
