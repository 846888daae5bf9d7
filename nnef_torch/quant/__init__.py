"""Quantization-aware training that reads and writes NNEF quantization (spec chapter 7).

- `FakeQuantize`: one NNEF quantization op as a module (bit-exact forward, straight-through and LSQ gradients).
- `fake_quantize`: the same as one torch op, `torch.ops.nnef_torch.fake_quantize`.
- `prepare(module, config)`: fake quantizers with observers on a model's weights, activations and inputs;
  `calibrate(module, batches)` sets their ranges. Observers: min/max, moving average, percentile.
- `QuantExport`: how `nnef_torch.export` / `save(quantization=...)` write fake quantization (graph.quant entries or
  inline ops, the op form, weights as float, integer codes or the seed layout).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nnef_torch.quant.functional import fake_quantize
from nnef_torch.quant.modules import FakeQuantize
from nnef_torch.quant.observers import MinMaxObserver, MovingAverageObserver, PercentileObserver, make_observer
from nnef_torch.quant.prepare import (
    QuantConfig,
    QuantScheme,
    calibrate,
    prepare,
    quantizers,
    set_enabled,
    set_observing,
)

if TYPE_CHECKING:  # what `__getattr__` imports on first use, visible to type checkers
    from nnef_torch.exporter.quantization import QuantExport

__all__ = ["FakeQuantize", "fake_quantize"]
__all__ += ["MinMaxObserver", "MovingAverageObserver", "PercentileObserver", "QuantConfig", "QuantScheme",
            "calibrate", "make_observer", "prepare", "quantizers", "set_enabled", "set_observing"]
__all__ += ["QuantExport"]


def __getattr__(name: str) -> Any:
    """`QuantExport` lives with the exporter, which imports this package: it is looked up on first use."""
    if name == "QuantExport":
        from nnef_torch.exporter.quantization import QuantExport  # cycle: exporter.quantization imports quant
        return QuantExport
    raise AttributeError(f"module 'nnef_torch.quant' has no attribute {name!r}")
