"""Shape rules (result shapes and argument validity, spec chapter 4) of the 119 NNEF standard operations.

Importing this module registers every rule in the op table (`nnef_torch.ops.registry`). The rules live in modules
split by idea; each registers its own rules with `@shape_rule`:

- `shapes_elementwise`: unary, binary and ternary ops, activations, quantization ops
- `shapes_tensor`: external / variable / constant / update, reshaping and the other tensor shape ops, matmul, linear
- `shapes_reduce`: reductions, moments, softmax, l1 / l2 and batch normalization
- `shapes_window`: conv, deconv, box, sampling and pooling ops, separable convolutions
- `shapes_sampling`: up- and down-sampling, local normalizations, region-of-interest ops
- `shapes_lightnet`: the LightNet front end's fragments kept whole (print, fprint, the sorts)
"""
from __future__ import annotations

from nnef_torch.ops import (  # noqa: F401  (imported to register their rules)
    shapes_elementwise,
    shapes_lightnet,
    shapes_reduce,
    shapes_sampling,
    shapes_sorting,
    shapes_tensor,
    shapes_window,
)
from nnef_torch.ops.shapes_common import Shape, broadcast

__all__ = ["Shape", "broadcast"]
