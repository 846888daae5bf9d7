"""Torch implementations of the NNEF standard operations; importing this module registers them in the op table.

Split by idea, each module registering its own functions with `@torch_op`:

- `torch_elementwise`: unary, binary and ternary ops, activations, quantization ops
- `torch_reduce`: reductions, moments, softmax, l1 / l2 and batch normalization
- `torch_tensor`: constant, reshaping and the other tensor shape ops, matmul, linear
- `torch_border`, `torch_window`: border modes; conv, deconv, box, sampling and pooling ops, `pad`
- `torch_sampling`: up- and down-sampling, local normalizations, region-of-interest ops
"""
from __future__ import annotations

import importlib

_MODULES = ("torch_elementwise", "torch_reduce", "torch_tensor", "torch_border", "torch_window", "torch_sampling")

for _name in _MODULES:  # TODO(lead): plain imports once every module exists
    try:
        importlib.import_module(f"nnef_torch.ops.{_name}")
    except ModuleNotFoundError as _error:
        if _error.name != f"nnef_torch.ops.{_name}":
            raise
