"""Quantization-aware training that reads and writes NNEF quantization (spec chapter 7).

- `FakeQuantize`: one NNEF quantization op as a module (bit-exact forward, straight-through and LSQ gradients).
- `fake_quantize`: the same as one torch op, `torch.ops.nnef_torch.fake_quantize`.
- `prepare(module, config)`: fake quantizers with observers on a model's weights, activations and inputs;
  `calibrate(module, batches)` sets their ranges. Observers: min/max, moving average, percentile.
- `prepare_q4_0(model)`: tract's Q4_0 block quantization (blocks of 32, a float16 scale each) of a model's linear
  weights, trainable (`Q4_0FakeQuantize`, straight-through and LSQ); `q4_0_codes` the codes to write, `remove_q4_0`
  the dequantized weights.
- `QuantExport`: how `nnef_torch.export` / `save(quantization=...)` write fake quantization (graph.quant entries or
  inline ops, the op form, weights as float, integer codes or the seed layout).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nnef_torch.quant.functional import fake_quantize
from nnef_torch.quant.groupwise import Q4_0FakeQuantize, q4_0_quantize
from nnef_torch.quant.groupwise_prepare import prepare_q4_0, q4_0_codes, remove_q4_0
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
__all__ += ["Q4_0FakeQuantize", "prepare_q4_0", "q4_0_codes", "q4_0_quantize", "remove_q4_0"]
__all__ += ["QuantExport"]


def __getattr__(name: str) -> Any:
    """`QuantExport` lives with the exporter, which imports this package: it is looked up on first use."""
    if name == "QuantExport":
        from nnef_torch.exporter.quantization import QuantExport  # cycle: exporter.quantization imports quant
        return QuantExport
    raise AttributeError(f"module 'nnef_torch.quant' has no attribute {name!r}")
