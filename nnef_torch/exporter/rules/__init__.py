"""Export rules: ATen operations -> NNEF operations, registered in the op table with `@export_rule` (the table's
`aten` facet: `nnef_torch.ops.registry.FACETS` lists these modules).

- `common`: broadcasting alignment and argument helpers shared by the rules
- `elementwise`: arithmetic, comparisons, logic, activations
- `reduce`: reductions, softmax, normalizations
- `tensor`: shape ops (view, permute, cat, slice, pad, gather...), constants and casts
- `nn`: linear, convolutions, pooling, up-sampling, attention
- `indexing`: gather along a dimension, sort and top-k
- `patches`: unfold and fold (im2col, col2im)
- `sampling`: bicubic up-sampling and grid sampling
"""
