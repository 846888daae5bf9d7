"""Torch implementations of the NNEF standard operations; importing this module registers them in the op table.

Split by idea, each module registering its own functions with `@torch_op`:

- `torch_elementwise`: unary, binary and ternary ops, activations, quantization ops
- `torch_reduce`: reductions, moments, softmax, l1 / l2 and batch normalization
- `torch_tensor`: constant, reshaping and the other tensor shape ops, matmul, linear
- `torch_window` (`torch_border`, `torch_conv`, `torch_pool`): border modes and `pad`; conv, deconv, box,
  sampling and pooling ops
- `torch_sampling`: up- and down-sampling, local normalizations, region-of-interest ops
- `torch_training`: submodules for ops that follow the training mode (moving batch statistics, dropout)
- `torch_lightnet`: the LightNet front end's print ops (side-effecting submodules) and sorts
- `torch_fused`: the operations the importer's fusion passes write (layer norm, tanh GELU)
"""
from __future__ import annotations

from nnef_torch.ops import (  # noqa: F401  (imported to register the implementations)
    torch_elementwise,
    torch_fused,
    torch_lightnet,
    torch_reduce,
    torch_sampling,
    torch_sorting,
    torch_tensor,
    torch_training,
    torch_window,
)
