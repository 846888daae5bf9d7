"""Write the ONNX sequence fixtures of tests/formats/onnx/fixtures/sequences/: torch.jit.script modules that collect
tensors in a Python list inside a loop, exported by torch.onnx legacy (dynamo=False) at opset 17 (`scripted_*.onnx`:
SequenceEmpty/SequenceConstruct, SequenceInsert and SequenceAt in a Loop body, ConcatFromSequence, SequenceLength),
and graphs written by hand with onnx.helper for the sequence operators torch does not write (`hand_*.onnx`), and one
that must be refused (`refused_*.onnx`). onnxruntime, run on the same files, is the tests' reference. Run from the
repository root: `python tests/formats/onnx/make_sequence_fixtures.py`."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

FIXTURES = Path(__file__).parent / "fixtures" / "sequences"
FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64
SHAPE = [3, 4]  # the input of every fixture here (the scripted ones declare its first extent symbolic)


class ScriptedStack(nn.Module):
    """A list appended to in a loop, then stacked: SequenceEmpty, a Loop carrying the list, ConcatFromSequence with
    new_axis 1. The loop runs over the input's first extent: torch.onnx unrolls a constant `range(3)` itself, and
    writes no sequence operator then."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs: list[torch.Tensor] = []
        for i in range(x.shape[0]):
            outs.append(x * i)
        return torch.stack(outs)


class ScriptedCat(nn.Module):
    """As ScriptedStack, joined with torch.cat (ConcatFromSequence, new_axis 0)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs: list[torch.Tensor] = []
        for i in range(x.shape[0]):
            outs.append(x * i)
        return torch.cat(outs)


class ScriptedChain(nn.Module):
    """A list started with the input (SequenceConstruct), each item made from the last one (SequenceAt -1), stacked
    on axis 1 and scaled by its length (SequenceLength; `float(len(outs))` would be exported as an int64 factor,
    which onnxruntime refuses)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = [x]
        for i in range(x.shape[0]):
            outs.append(outs[-1] * 0.5 + x * i)
        return torch.stack(outs, 1) * torch.tensor(len(outs), dtype=torch.float32)


SCRIPTED = {"scripted_stack": ScriptedStack, "scripted_cat": ScriptedCat, "scripted_chain": ScriptedChain}


def _model(nodes: list, outputs: list, name: str, inits: tuple = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", FLOAT, SHAPE)], outputs,
                              initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _out(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, FLOAT, shape)


def _int(name: str, value: int | list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, np.int64), name)


def hand_cases() -> dict[str, onnx.ModelProto]:
    make = helper.make_node
    return {
        # columns as a sequence (keepdims 0): the last one, the first one after erasing it, the count as a scale
        "hand_split_at_length": _model([
            make("SplitToSequence", ["x"], ["cols"], axis=1, keepdims=0),
            make("SequenceAt", ["cols", "minus1"], ["last"]),
            make("SequenceErase", ["cols", "zero"], ["rest"]),
            make("SequenceAt", ["rest", "zero"], ["second"]),
            make("SequenceLength", ["rest"], ["count"]),
            make("Cast", ["count"], ["countf"], to=FLOAT),
            make("Mul", ["last", "countf"], ["scaled"]),
            make("Add", ["scaled", "second"], ["y"])],
            [_out("y", [3])], "split_at_length", (_int("minus1", -1), _int("zero", 0))),
        # split sizes [1, 3] on axis 1, the last erased (default position), joined on axis 0
        "hand_split_sizes": _model([
            make("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),
            make("SequenceInsert", ["parts", "x"], ["more"]),
            make("SequenceErase", ["more"], ["back"]),
            make("SequenceAt", ["back", "one"], ["wide"]),
            make("SequenceAt", ["back", "zero"], ["narrow"]),
            make("Add", ["wide", "narrow"], ["y"])],
            [_out("y", [3, 3])], "split_sizes", (_int("sizes", [1, 3]), _int("one", 1), _int("zero", 0))),
        # a scalar split: chunks of 3 rows of 4 columns -> [3, 1] columns; rows one per item with keepdims 1
        "hand_split_chunk": _model([
            make("SplitToSequence", ["x", "three"], ["chunks"], axis=-1),
            make("SequenceAt", ["chunks", "one"], ["tail"]),
            make("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=1),
            make("ConcatFromSequence", ["rows"], ["stacked"], axis=-1, new_axis=1),
            make("ReduceSum", ["stacked", "axes"], ["summed"], keepdims=0),
            make("Mul", ["tail", "summed"], ["y"])],
            [_out("y", [3, 4])], "split_chunk",
            (_int("three", 3), _int("one", 1), _int("axes", [0, 2]))),
        # SequenceConstruct and SequenceInsert at a negative position, mixing the input with a constant
        "hand_construct_insert": _model([
            make("Constant", [], ["c"], value=numpy_helper.from_array(np.full(SHAPE, 0.25, np.float32))),
            make("Neg", ["x"], ["n"]),
            make("SequenceConstruct", ["x", "n"], ["pair"]),
            make("SequenceInsert", ["pair", "c", "minus1"], ["three"]),
            make("ConcatFromSequence", ["three"], ["y"], axis=0)],
            [_out("y", [9, 4])], "construct_insert", (_int("minus1", -1),)),
        # a sequence as a graph output: no NNEF tensor
        "refused_sequence_output": _model([
            make("SplitToSequence", ["x"], ["rows"], axis=0)],
            [helper.make_tensor_sequence_value_info("rows", FLOAT, [1, 4])], "sequence_output"),
    }


def main() -> None:
    torch.manual_seed(0)
    FIXTURES.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore")
    for name, cls in SCRIPTED.items():
        torch.onnx.export(torch.jit.script(cls()), (torch.randn(*SHAPE),), str(FIXTURES / f"{name}17.onnx"),
                          opset_version=17, dynamo=False, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "n"}})
    for name, model in hand_cases().items():
        onnx.save(model, str(FIXTURES / f"{name}.onnx"))


if __name__ == "__main__":
    main()
