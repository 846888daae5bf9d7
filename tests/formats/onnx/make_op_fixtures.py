"""Write the per-operator ONNX fixtures of tests/formats/onnx/fixtures/ops/: small seeded torch modules exported by
torch.onnx legacy (dynamo=False) at opsets 13 and 17 (`<name>13.onnx`, `<name>17.onnx`), a small CNN and a small
transformer-like block exported by the dynamo exporter (opset 18+, `dynamo_*.onnx`), and graphs written by hand
with onnx.helper for what torch does not write (`hand_*.onnx`: If and Loop decided while converting, CumSum's
attributes, Resize's opset-18/19 forms, Reduce and Split at opset 18, and models that must be refused:
`refused_*.onnx`). onnxruntime, run on the same files, is the tests' reference. Run from the repository root:
`python tests/formats/onnx/make_op_fixtures.py`."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch import nn

FIXTURES = Path(__file__).parent / "fixtures" / "ops"
FLOAT = TensorProto.FLOAT


class Fn(nn.Module):
    """A module whose forward is `fn`, with optional parameters."""

    def __init__(self, fn, **params: torch.Tensor):
        super().__init__()
        self.fn = fn
        for key, value in params.items():
            self.register_parameter(key, nn.Parameter(value))

    def forward(self, *xs: torch.Tensor):
        return self.fn(self, *xs)


def torch_cases() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    img, seq = torch.randn(1, 2, 5, 6), torch.randn(2, 5, 4)
    index = torch.tensor([[2, 0, 1, 3], [4, 4, 0, 1]])
    return {
        # Resize in the forms torch.onnx writes for F.interpolate
        "resize_nearest_x2": (Fn(lambda m, x: F.interpolate(x, scale_factor=2, mode="nearest")), (img,)),
        "resize_nearest_size": (Fn(lambda m, x: F.interpolate(x, size=(7, 4), mode="nearest")), (img,)),
        "resize_bilinear_x2": (Fn(lambda m, x: F.interpolate(x, scale_factor=2, mode="bilinear")), (img,)),
        "resize_bilinear_aligned": (Fn(lambda m, x: F.interpolate(x, scale_factor=2, mode="bilinear",
                                                                   align_corners=True)), (img,)),
        "resize_bilinear_size": (Fn(lambda m, x: F.interpolate(x, size=(8, 3), mode="bilinear")), (img,)),
        "resize_bilinear_size_aligned": (Fn(lambda m, x: F.interpolate(x, size=(3, 9), mode="bilinear",
                                                                        align_corners=True)), (img,)),
        "resize_bicubic": (Fn(lambda m, x: F.interpolate(x, size=(9, 7), mode="bicubic")), (img,)),
        "resize_bicubic_aligned": (Fn(lambda m, x: F.interpolate(x, scale_factor=2, mode="bicubic",
                                                                  align_corners=True)), (img,)),
        "resize_linear_1d": (Fn(lambda m, x: F.interpolate(x, scale_factor=3, mode="linear")), (seq,)),
        "resize_trilinear": (Fn(lambda m, x: F.interpolate(x, scale_factor=2, mode="trilinear")),
                             (torch.randn(1, 1, 2, 3, 2),)),
        # CumSum, GatherElements
        "cumsum": (Fn(lambda m, x: torch.cumsum(x, 1) + torch.cumsum(x, -1)), (seq,)),
        "gather_elements_const": (Fn(lambda m, x: torch.gather(x, 0, index)), (torch.randn(5, 4),)),
        "gather_elements_topk": (Fn(lambda m, x, y: torch.gather(y, 1, torch.topk(x, 3, dim=1).indices)),
                                 (torch.randn(3, 6), torch.randn(3, 6))),
        # rules without tests so far
        "conv_transpose": (nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                                              dilation=1), (torch.randn(1, 4, 4, 5),)),
        "conv_transpose_dilated": (nn.ConvTranspose1d(2, 3, 3, stride=3, padding=2, dilation=2), (seq[:, :2],)),
        "pad_constant": (Fn(lambda m, x: F.pad(x, (1, 2, 0, 1), value=0.5)), (img,)),
        "pad_reflect": (Fn(lambda m, x: F.pad(x, (2, 1, 1, 2), mode="reflect")), (img,)),
        "pad_edge": (Fn(lambda m, x: F.pad(x, (0, 3, 2, 0), mode="replicate")), (img,)),
        "expand": (Fn(lambda m, x: x[:, :1].expand(2, 3, 4) * 2), (seq,)),
        "tile": (Fn(lambda m, x: x.repeat(1, 2, 3)), (seq,)),
        "where": (Fn(lambda m, x, y: torch.where(x > y, x, y * 2)), (seq, torch.randn(5, 4))),
        "compare": (Fn(lambda m, x, y: (x < y).float() + (x > 0.3).float() * 2 + (x == x.round()).float() * 4 +
                       (x <= y).float() * 8 + (x >= 0).float() * 16), (seq, torch.randn(5, 4))),
        "reduce": (Fn(lambda m, x: x.sum(1, keepdim=True) + x.mean((1, 2), keepdim=True) + x.amax(2, keepdim=True)
                      + x.amin(1).unsqueeze(1)), (seq,)),
        "clip": (Fn(lambda m, x: torch.clamp(x, -0.5, 0.7) + torch.clamp(x, min=0.1) + torch.clamp(x, max=-0.2)),
                 (seq,)),
        "split": (Fn(lambda m, x: tuple(t * (i + 1) for i, t in enumerate(torch.split(x, [1, 3], dim=2)))),
                  (seq,)),
        "softmax_axis": (Fn(lambda m, x: torch.softmax(x * m.w, 1) + torch.log_softmax(x, 0),
                            w=torch.randn(5, 4)), (seq,)),
    }


class ScriptedLoop(nn.Module):
    """A loop over the first extent and an if on the second: torch.jit.script keeps them as Loop and If when the
    extents are symbolic (dynamic_axes); static input shapes decide both while converting."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x[0]
        for i in range(x.shape[0]):
            y = y * 0.5 + x[i]
        if x.shape[1] > 2:
            z = y + 1
        else:
            z = y - 1
        return y, z


def dynamo_cases() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    class Block(nn.Module):
        def __init__(self, width: int = 8):
            super().__init__()
            self.qkv, self.o, self.norm = nn.Linear(width, 3 * width), nn.Linear(width, width), nn.LayerNorm(width)
            self.ff = nn.Sequential(nn.Linear(width, 16), nn.GELU(), nn.Linear(16, width))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            y = torch.softmax(q @ k.transpose(-2, -1) / 8 ** 0.5, dim=-1) @ v
            x = self.norm(x + self.o(y))
            return x + self.ff(x).mean(-1, keepdim=True)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.up = nn.ConvTranspose2d(4, 2, 2, stride=2)
            self.head = nn.Linear(2, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
            y = F.interpolate(y, scale_factor=2, mode="bilinear") + F.pad(y, (0, 0, 0, 0)).repeat(1, 1, 2, 2)
            y = self.up(y).sum((2, 3)).clamp(-3, 3)
            return torch.softmax(self.head(y), -1)

    return {"dynamo_cnn": (Net(), (torch.randn(1, 3, 8, 8),)),
            "dynamo_block": (Block(), (torch.randn(1, 4, 8),))}


# --- graphs by hand -----------------------------------------------------------------------------------------------
def _model(nodes, inputs, outputs, opset: int, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _info(name: str, shape, elem=FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _const(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def _body_step() -> onnx.GraphProto:
    """Loop body: (i, cond, y) -> (cond, y * 0.5 + x[i], y as a scan output): reads x from the outer graph."""
    nodes = [helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
             _const("half", np.float32(0.5)),
             helper.make_node("Mul", ["y_in", "half"], ["scaled"]),
             helper.make_node("Add", ["scaled", "row"], ["y_out"]),
             helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Mul", ["y_out", "y_out"], ["squared"])]
    return helper.make_graph(nodes, "body", [_info("i", [], TensorProto.INT64), _info("cond_in", [], TensorProto.BOOL),
                                             _info("y_in", [4])],
                             [_info("cond_out", [], TensorProto.BOOL), _info("y_out", [4]), _info("squared", [4])])


def _branch(name: str, op: str, value: float) -> onnx.GraphProto:
    return helper.make_graph([_const(f"{name}_c", np.float32(value)), helper.make_node(op, ["x", f"{name}_c"],
                                                                                        [f"{name}_y"])],
                             name, [], [_info(f"{name}_y", [3, 4])])


def hand_cases() -> dict[str, onnx.ModelProto]:
    x34 = [_info("x", [3, 4])]
    cases = {}
    # If on a constant, and If on a condition folded from the static shape (Shape -> Gather -> Greater)
    cases["hand_if_const"] = _model([_const("c", np.array(False)),
                                     helper.make_node("If", ["c"], ["y"], then_branch=_branch("t", "Add", 1.0),
                                                      else_branch=_branch("e", "Mul", 3.0))], x34, [_info("y", [3, 4])],
                                    13)
    cases["hand_if_shape"] = _model([helper.make_node("Shape", ["x"], ["s"]), _const("one", np.int64(1)),
                                     helper.make_node("Gather", ["s", "one"], ["w"], axis=0),
                                     _const("three", np.int64(3)), helper.make_node("Greater", ["w", "three"], ["c"]),
                                     helper.make_node("If", ["c"], ["y"], then_branch=_branch("t", "Add", 1.0),
                                                      else_branch=_branch("e", "Mul", 3.0))], x34, [_info("y", [3, 4])],
                                    17)
    # Loop with a constant trip count: a loop-carried value and a scan output
    loop = [_const("m", np.int64(3)), _const("cond", np.array(True)), _const("y0", np.zeros(4, np.float32)),
            helper.make_node("Loop", ["m", "cond", "y0"], ["y", "scan"], body=_body_step())]
    cases["hand_loop_scan"] = _model(loop, x34, [_info("y", [4]), _info("scan", [3, 4])], 13)
    # Loop without a trip count: the body computes its condition from the iteration number (i < 2), a constant
    body = _body_step()
    body.node.remove(body.node[4])
    body.node.extend([_const("two", np.int64(2)), helper.make_node("Less", ["i", "two"], ["cond_out"])])
    cases["hand_loop_cond"] = _model([_const("cond", np.array(True)), _const("y0", np.ones(4, np.float32)),
                                      helper.make_node("Loop", ["", "cond", "y0"], ["y", "scan"], body=body)],
                                     x34, [_info("y", [4]), _info("scan", [3, 4])], 17)
    # a Loop whose body holds an If on the iteration number, the then_branch with an initializer of its own
    then = helper.make_graph([helper.make_node("Mul", ["y_in", "three"], ["t_y"])], "then", [], [_info("t_y", [4])],
                             initializer=[numpy_helper.from_array(np.full(4, 3, np.float32), "three")])
    nested = _body_step()
    nested.node.insert(0, _const("one", np.int64(1)))
    nested.node.insert(1, helper.make_node("Equal", ["i", "one"], ["is_one"]))
    otherwise = helper.make_graph([helper.make_node("Neg", ["y_in"], ["e_y"])], "else", [], [_info("e_y", [4])])
    nested.node.insert(2, helper.make_node("If", ["is_one"], ["y_mid"], then_branch=then, else_branch=otherwise))
    for node in nested.node[3:]:
        node.input[:] = ["y_mid" if name == "y_in" else name for name in node.input]
    cases["hand_loop_nested_if"] = _model([_const("m", np.int64(3)), _const("cond", np.array(True)),
                                           _const("y0", np.ones(4, np.float32)),
                                           helper.make_node("Loop", ["m", "cond", "y0"], ["y", "scan"], body=nested)],
                                          x34, [_info("y", [4]), _info("scan", [3, 4])], 13)
    # Slice with negative steps on a tensor computed from the input
    cases["hand_slice_negative"] = _model([_const("starts", np.array([-1, 3])), _const("ends", np.array([-100, 0])),
                                           _const("axes", np.array([1, 2])), _const("steps", np.array([-1, -2])),
                                           helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
                                          [_info("x", [2, 5, 4])], [_info("y", [2, 5, 2])], 13)
    # If on a condition computed from the input: both branches, the output selected
    data_if = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), _const("zero", np.float32(0)),
               helper.make_node("Greater", ["s", "zero"], ["c"]),
               helper.make_node("If", ["c"], ["y"], then_branch=_branch("t", "Add", 1.0),
                                else_branch=_branch("e", "Mul", 3.0))]
    cases["hand_if_data"] = _model(data_if, x34, [_info("y", [3, 4])], 13)
    # refused: an If on the input whose branches' shapes differ, a trip count computed from the input, and too many
    # iterations
    narrow = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["n_y"], keepdims=0)], "n", [],
                               [_info("n_y", [])])
    cases["refused_if_shapes"] = _model(data_if[:3] + [helper.make_node("If", ["c"], ["y"],
                                                                         then_branch=_branch("t", "Add", 1.0),
                                                                         else_branch=narrow)],
                                        x34, [_info("y", [3, 4])], 13)
    data_loop = [helper.make_node("ReduceMax", ["x"], ["s"], keepdims=0),
                 helper.make_node("Cast", ["s"], ["m"], to=TensorProto.INT64), _const("cond", np.array(True)),
                 _const("y0", np.zeros(4, np.float32)),
                 helper.make_node("Loop", ["m", "cond", "y0"], ["y", "scan"], body=_body_step())]
    cases["refused_loop_data"] = _model(data_loop, x34, [_info("y", [4]), _info("scan", ["n", 4])], 13)
    data_cond = _body_step()
    data_cond.node.remove(data_cond.node[4])
    data_cond.node.extend([helper.make_node("ReduceSum", ["y_out"], ["total"], keepdims=0),
                           _const("zero", np.float32(0)), helper.make_node("Greater", ["total", "zero"], ["cond_out"])])
    cases["refused_loop_body_cond"] = _model([_const("m", np.int64(3))] + loop[1:3] +
                                             [helper.make_node("Loop", ["m", "cond", "y0"], ["y", "scan"],
                                                               body=data_cond)],
                                             x34, [_info("y", [4]), _info("scan", [3, 4])], 13)
    count = helper.make_graph([helper.make_node("Add", ["y_in", "x"], ["y_out"]),
                               helper.make_node("Identity", ["cond_in"], ["cond_out"])], "count",
                              [_info("i", [], TensorProto.INT64), _info("cond_in", [], TensorProto.BOOL),
                               _info("y_in", [3, 4])], [_info("cond_out", [], TensorProto.BOOL), _info("y_out", [3, 4])])
    long_loop = [_const("m", np.int64(100000)), _const("cond", np.array(True)),
                 helper.make_node("Loop", ["m", "cond", "x"], ["y"], body=count)]
    cases["refused_loop_long"] = _model(long_loop, x34, [_info("y", [3, 4])], 13)
    # CumSum's attributes, with the axis as a 1-D and a 0-D input
    x254 = [_info("x", [2, 5, 4])]
    for exclusive in (0, 1):
        for reverse in (0, 1):
            cases[f"hand_cumsum_e{exclusive}r{reverse}"] = _model(
                [_const("axis", np.array([1])), _const("axis0", np.int64(-1)),
                 helper.make_node("CumSum", ["x", "axis"], ["a"], exclusive=exclusive, reverse=reverse),
                 helper.make_node("CumSum", ["x", "axis0"], ["b"], exclusive=exclusive, reverse=reverse),
                 helper.make_node("Add", ["a", "b"], ["y"])], x254, [_info("y", [2, 5, 4])], 14)
    # GatherElements with negative constant indices, on axis 1, and indices narrower than the data
    cases["hand_gather_elements_neg"] = _model(
        [_const("idx", np.array([[[-1, 0], [2, -4], [1, 1]]] * 2, np.int64)),
         helper.make_node("GatherElements", ["x", "idx"], ["y"], axis=1)], x254, [_info("y", [2, 3, 2])], 13)
    # Resize at opsets 18 and 19: axes, half_pixel_symmetric, cubic with exclude_outside, nearest roundings
    img = [_info("x", [1, 2, 5, 6])]

    def resize(name, opset, out_shape, scales=None, sizes=None, **attrs):
        inputs = ["x", "", "scales" if scales is not None else "", "sizes" if sizes is not None else ""]
        consts = ([_const("scales", np.array(scales, np.float32))] if scales is not None else []) + \
                 ([_const("sizes", np.array(sizes, np.int64))] if sizes is not None else [])
        cases[name] = _model(consts + [helper.make_node("Resize", inputs, ["y"], **attrs)], img,
                             [_info("y", out_shape)], opset)

    resize("hand_resize_axes18", 18, [1, 2, 10, 4], sizes=[10, 4], axes=[2, 3], mode="linear")
    resize("hand_resize_symmetric19", 19, [1, 2, 7, 15], scales=[1.5, 2.5], axes=[-2, -1], mode="linear",
           coordinate_transformation_mode="half_pixel_symmetric")
    resize("hand_resize_cubic_exclude", 13, [1, 2, 8, 9], sizes=[1, 2, 8, 9], mode="cubic", exclude_outside=1,
           cubic_coeff_a=-0.5)
    resize("hand_resize_cubic_down", 18, [1, 2, 3, 4], sizes=[3, 4], axes=[2, 3], mode="cubic",
           coordinate_transformation_mode="asymmetric")
    resize("hand_resize_nearest_ceil", 13, [1, 2, 8, 9], scales=[1, 1, 1.6, 1.5], mode="nearest",
           nearest_mode="round_prefer_ceil", coordinate_transformation_mode="half_pixel")
    resize("hand_resize_nearest_down", 13, [1, 2, 2, 4], sizes=[1, 2, 2, 4], mode="nearest",
           nearest_mode="round_prefer_floor", coordinate_transformation_mode="align_corners")
    resize("hand_resize_linear_asym", 13, [1, 2, 10, 18], scales=[1, 1, 2, 3], mode="linear",
           coordinate_transformation_mode="asymmetric")
    resize("hand_resize_pytorch_half", 13, [1, 2, 1, 9], sizes=[1, 2, 1, 9], mode="linear",
           coordinate_transformation_mode="pytorch_half_pixel")
    resize("refused_resize_antialias", 18, [1, 2, 2, 3], scales=[0.5, 0.5], axes=[2, 3], mode="linear", antialias=1)
    resize("refused_resize_policy", 18, [1, 2, 4, 5], sizes=[5, 5], axes=[2, 3], mode="linear",
           keep_aspect_ratio_policy="not_larger")
    # Reduce* and Split at opset 18: axes and sizes as inputs, num_outputs
    reduce_nodes = [_const("axes", np.array([1], np.int64)), _const("axes2", np.array([-1, 0], np.int64))]
    for op, out in (("ReduceSum", "s"), ("ReduceMean", "m"), ("ReduceMax", "a"), ("ReduceMin", "b")):
        reduce_nodes.append(helper.make_node(op, ["x", "axes"], [out + "1"], keepdims=1))
        reduce_nodes.append(helper.make_node(op, ["x", "axes2"], [out + "2"], keepdims=0))
    cases["hand_reduce18"] = _model(reduce_nodes, x254, [_info(f"{o}{k}", [2, 1, 4] if k == "1" else [5]) for o in "smab" for k in "12"], 18)
    cases["hand_reduce13"] = _model([helper.make_node("ReduceMean", ["x"], ["m"], axes=[0, 2], keepdims=0),
                                     helper.make_node("ReduceMax", ["x"], ["a"], axes=[-1]),
                                     helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0)],
                                    x254, [_info("m", [5]), _info("a", [2, 5, 1]), _info("s", [])], 13)
    cases["hand_split18"] = _model([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3),
                                    _const("sizes", np.array([1, 3], np.int64)),
                                    helper.make_node("Split", ["x", "sizes"], ["d", "e"], axis=-1)],
                                   x254, [_info(n, [2, e, 4] if n in "abc" else [2, 5, e])
                                           for n, e in zip("abcde", (2, 2, 1, 1, 3))], 18)
    cases["hand_clip13"] = _model([_const("lo", np.float32(-0.3)), _const("hi", np.float32(0.4)),
                                   helper.make_node("Clip", ["x", "lo", "hi"], ["a"]),
                                   helper.make_node("Clip", ["x", "", "hi"], ["b"]),
                                   helper.make_node("Clip", ["x"], ["c"])],
                                  x254, [_info(n, [2, 5, 4]) for n in "abc"], 13)
    return cases


def main() -> None:
    torch.manual_seed(0)
    np.random.seed(0)
    FIXTURES.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore")
    for name, (module, args) in torch_cases().items():
        module.eval()
        for opset in (13, 17):
            torch.onnx.export(module, args, str(FIXTURES / f"{name}{opset}.onnx"), opset_version=opset, dynamo=False)
    for opset in (13, 17):
        torch.onnx.export(torch.jit.script(ScriptedLoop()), (torch.randn(3, 4),),
                          str(FIXTURES / f"scripted_loop{opset}.onnx"), opset_version=opset, dynamo=False,
                          input_names=["x"], dynamic_axes={"x": {0: "n", 1: "w"}})
    for name, (module, args) in dynamo_cases().items():
        module.eval()
        program = torch.onnx.export(module, args, dynamo=True)
        program.save(str(FIXTURES / f"{name}.onnx"))
    for name, model in hand_cases().items():
        onnx.save(model, str(FIXTURES / f"{name}.onnx"))


if __name__ == "__main__":
    main()
