"""Export rules: ATen operations -> NNEF operations, registered in the op table with `@export_rule`.

- `common`: broadcasting alignment and argument helpers shared by the rules
- `elementwise`: arithmetic, comparisons, logic, activations
- `reduce`: reductions, softmax, normalizations
- `tensor`: shape ops (view, permute, cat, slice, pad, gather...), constants and casts
- `nn`: linear, convolutions, pooling, up-sampling, attention
"""
from nnef_torch.exporter.rules import elementwise, nn, reduce, tensor  # noqa: F401
