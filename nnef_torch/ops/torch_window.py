"""The sliding-window operations (spec 4.3) and their compounds (4.9.2-4.9.3): importing this module registers
the torch implementations of all of them and of `pad`.

- `torch_border`: border modes, automatic padding, `pad`
- `torch_conv`: conv, deconv, separable_conv, separable_deconv
- `torch_pool`: box, debox, argmax_pool, sample, desample, max_pool_with_index, max_pool, avg_pool, rms_pool
"""
from __future__ import annotations

from nnef_torch.ops import torch_border, torch_conv, torch_pool  # noqa: F401  (imported to register the ops)
