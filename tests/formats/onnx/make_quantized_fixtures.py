"""Write the quantized ONNX fixtures: a small seeded CNN and MLP exported by torch.onnx legacy (dynamo=False) at
opsets 13 and 17, then statically quantized by onnxruntime (`quantize_static`, a seeded calibration reader of
random batches) as
- QDQ (QuantizeLinear / DequantizeLinear pairs): per tensor and per channel, activations uint8 / weights int8
  (`qdq_u8s8`) and int8 / int8 (`qdq_s8s8`);
- QOperator (QLinearConv, QLinearMatMul between QuantizeLinear and DequantizeLinear), uint8 / int8.
QOperator quantizes only Conv and MatMul (Gemm and Add it would write in its own domain, as QGemm and QLinearAdd);
QDQ quantizes Gemm too. The MLP reads a [batch, steps, features] input so that its linear layers export as MatMul +
Add (pre-processing runs without graph optimization, which would fuse them into Gemm). Weights use reduce_range
(7 bits): onnxruntime's u8s8 kernels on x86 add pairs of products in int16 and saturate with full-range weights,
which puts their results tens of codes away from the QDQ arithmetic; with reduce_range they compute it exactly.
Run from the repository root: `python tests/formats/onnx/make_quantized_fixtures.py`."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process
from torch import nn

FIXTURES = Path(__file__).parent / "fixtures" / "quantized"
FORMATS = {  # name -> quantize_static keywords
    "qdq_u8s8": {"quant_format": QuantFormat.QDQ, "activation_type": QuantType.QUInt8,
                 "weight_type": QuantType.QInt8, "op_types_to_quantize": ["Conv", "MatMul", "Gemm"]},
    "qdq_s8s8": {"quant_format": QuantFormat.QDQ, "activation_type": QuantType.QInt8,
                 "weight_type": QuantType.QInt8, "op_types_to_quantize": ["Conv", "MatMul", "Gemm"]},
    "qop_u8s8": {"quant_format": QuantFormat.QOperator, "activation_type": QuantType.QUInt8,
                 "weight_type": QuantType.QInt8, "op_types_to_quantize": ["Conv", "MatMul"]},
}


class Batches(CalibrationDataReader):
    """A few seeded random batches for the input `name`."""

    def __init__(self, name: str, shape: tuple[int, ...], count: int = 8, seed: int = 0):
        rng = np.random.RandomState(seed)
        self.batches = iter([{name: rng.randn(*shape).astype(np.float32)} for _ in range(count)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.batches, None)


def models() -> dict[str, tuple[nn.Module, torch.Tensor]]:
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, stride=2), nn.ReLU(),
                        nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    return {"cnn": (cnn.eval(), torch.randn(1, 3, 10, 10)), "mlp": (mlp.eval(), torch.randn(2, 3, 8))}


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for name, (module, x) in models().items():
            for opset in (13, 17):
                plain, prepared = Path(scratch) / f"{name}{opset}.onnx", Path(scratch) / f"{name}{opset}_pre.onnx"
                torch.onnx.export(module, (x,), str(plain), opset_version=opset, dynamo=False,
                                  input_names=["input"], output_names=["output"])
                quant_pre_process(str(plain), str(prepared), skip_optimization=True, skip_symbolic_shape=True)
                for kind, keywords in FORMATS.items():
                    for per_channel in (False, True):
                        suffix = "_pc" if per_channel else ""
                        quantize_static(str(prepared), str(FIXTURES / f"{name}{opset}_{kind}{suffix}.onnx"),
                                        Batches("input", tuple(x.shape)), per_channel=per_channel, reduce_range=True,
                                        **keywords)


if __name__ == "__main__":
    main()
