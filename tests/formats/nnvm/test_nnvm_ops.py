"""Every operator of NNVM's core set (dmlc/nnvm `src/top` and its TVM successor `nnvm/src/top`), one row per
operator and attribute setting: a one-node NNVM graph as `SaveJSON` writes it, read by nnef_torch, must give the
output of a twin written by hand in torch or numpy from NNVM's documented meaning; saved as NNEF, it must pass the
Khronos parser and give the same output in the Khronos executor (`nnef.Session`), except where a row records why
the executor cannot (the test asserts that it still fails, so a stale entry is noticed). Operators nnef_torch refuses
have rows of their own, each asserting a message that says why.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from exporter.consumers import close, close_all, khronos_parse

import nnef_torch
from formats.khronos_session import check_session
from formats.nnvm.nnvm_op_rows import NNVM_OPERATORS, REFUSED, ROWS, Refused, Row

DTYPE_FLAGS = {np.dtype("float32"): 0, np.dtype("int32"): 4, np.dtype("bool"): 7}


def graph_json(row: Row) -> dict[str, Any]:
    """The graph as NNVM's SaveJSON writes it: the arguments (inputs, then parameters), the operator node reading
    `args` (and a copy of the first input where `keep`); node_row_ptr is the running sum of the output counts."""
    names = [name for name, _ in row.inputs] + list(row.params)
    nodes: list[dict[str, Any]] = []
    for name, value in row.inputs:
        node: dict[str, Any] = {"op": "null", "name": name, "inputs": []}
        if value.dtype != np.float32:
            node["attrs"] = {"__dtype__": str(DTYPE_FLAGS[value.dtype])}
        nodes.append(node)
    nodes += [{"op": "null", "name": name, "inputs": []} for name in row.params]
    op_node: dict[str, Any] = {"op": row.op, "name": "y", "inputs": [[names.index(a), 0, 0] for a in row.arguments]}
    if row.attrs:
        op_node["attrs"] = dict(row.attrs)
    nodes.append(op_node)
    heads = [[len(names), i, 0] for i in row.heads]
    counts = [1] * len(names) + [row.outputs]
    if row.keep:  # the first input, read by nothing else, stays an input of the graph
        nodes.append({"op": "copy", "name": "kept", "inputs": [[0, 0, 0]]})
        heads.append([len(nodes) - 1, 0, 0])
        counts.append(1)
    pointers = [0]
    for count in counts:
        pointers.append(pointers[-1] + count)
    return {"nodes": nodes, "arg_nodes": list(range(len(names))), "heads": heads, "node_row_ptr": pointers}


def write_graph(row: Row, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.json"
    path.write_text(json.dumps(graph_json(row)))
    return path


def expected_outputs(row: Row) -> list[np.ndarray]:
    values = {**dict(row.inputs), **row.params}
    found = row.twin(*[values[name] for name in row.arguments])
    found = list(found) if isinstance(found, (tuple, list)) else [found]
    found = [np.asarray(value.detach().numpy() if isinstance(value, torch.Tensor) else value) for value in found]
    if row.keep:
        found.append(row.inputs[0][1])
    return found


def run_nnef_torch(module: torch.nn.Module, inputs: list[np.ndarray]) -> list[np.ndarray]:
    with torch.no_grad():
        outputs = module(*[torch.from_numpy(np.ascontiguousarray(x)) for x in inputs])
    outputs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    return [output.numpy() for output in outputs]


def test_rows_are_named_once() -> None:
    names = [row.name for row in ROWS] + [refused.name for refused in REFUSED]
    assert len(names) == len(set(names)), sorted(name for name in names if names.count(name) > 1)


def test_every_nnvm_operator_has_a_row() -> None:
    """Each operator NNVM registered in src/top (dmlc/nnvm, and TVM's nnvm until its removal) is read or refused,
    and has a row here."""
    from nnef_torch.formats.nnvm import rules  # noqa: F401
    from nnef_torch.ops.registry import import_refusals, import_rules
    table = {**import_rules("nnvm"), **import_refusals("nnvm")}
    assert not [op for op in NNVM_OPERATORS if op not in table]
    covered = {row.op for row in ROWS} | {refused.row.op for refused in REFUSED}
    assert not sorted(set(NNVM_OPERATORS) - covered)


@pytest.mark.parametrize("row", [pytest.param(row, marks=pytest.mark.xfail(reason=row.bug, strict=True))
                                 if row.bug else row for row in ROWS], ids=lambda row: row.name)
def test_nnvm_op(row: Row, tmp_path: Path) -> None:
    path = write_graph(row, tmp_path / "graph")
    shapes = {name: list(value.shape) for name, value in row.inputs}
    module = nnef_torch.load(path, params=dict(row.params), input_shapes=shapes).eval()
    folder = tmp_path / "nnef"
    module.save(folder)
    inputs = [value for name, value in row.inputs if name in graph_inputs(folder)]
    expected = expected_outputs(row)
    close_all(run_nnef_torch(module, inputs), expected, row.rtol, "nnef_torch")
    khronos_parse(folder)
    check_session(folder, inputs, expected, row.rtol, fails=row.session, crashes=row.crashes)


def graph_inputs(folder: Path) -> list[str]:
    """The inputs of the saved graph: an input read only for its shape (zeros_like) is none."""
    match = re.search(r"^graph \w+\(([^)]*)\)", (folder / "graph.nnef").read_text(), flags=re.M)
    assert match is not None
    return [name.strip() for name in match.group(1).split(",") if name.strip()]


@pytest.mark.parametrize("refused", REFUSED, ids=lambda refused: refused.name)
def test_nnvm_op_refused(refused: Refused, tmp_path: Path) -> None:
    path = write_graph(refused.row, tmp_path / "graph")
    shapes = {name: list(value.shape) for name, value in refused.row.inputs}
    with pytest.raises(refused.error, match=refused.message):
        nnef_torch.load(path, params=dict(refused.row.params), input_shapes=shapes)


def test_assign_updates_its_variable(tmp_path: Path) -> None:
    """_assign gives the value of its second input and writes it into the variable it names."""
    row = next(row for row in ROWS if row.op == "_assign")
    module = nnef_torch.load(write_graph(row, tmp_path / "graph"), params=dict(row.params),
                             input_shapes={name: list(value.shape) for name, value in row.inputs})
    x = row.inputs[0][1]
    with torch.no_grad():
        module(torch.from_numpy(x))
    state = {**dict(module.named_buffers()), **dict(module.named_parameters())}
    assert any(np.array_equal(value.numpy(), x) for value in state.values())


def test_assign_refuses_a_computed_target(tmp_path: Path) -> None:
    """_assign writes a variable: a computed first input has nowhere to be written."""
    document = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                          {"op": "copy", "name": "target", "inputs": [[0, 0, 0]]},
                          {"op": "_assign", "name": "y", "inputs": [[1, 0, 0], [0, 0, 0]]}],
                "arg_nodes": [0], "heads": [[2, 0, 0]], "node_row_ptr": [0, 1, 2, 3]}
    path = tmp_path / "assign.json"
    path.write_text(json.dumps(document))
    with pytest.raises(nnef_torch.NNEFUnsupportedError, match="must be a variable"):
        nnef_torch.load(path, input_shapes={"x": [2, 3]})


def test_take_axis_differs_between_nnvm_and_mxnet(tmp_path: Path) -> None:
    """NNVM's take has no axis by default (it takes from the flattened data); MXNet's takes along axis 0."""
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    index = np.array([5, 1], dtype=np.int32)
    document = graph_json(Row("take", "take", {}, [("a", data), ("i", index)], lambda a, i: a))
    shapes = {"a": [3, 4], "i": [2]}
    path = tmp_path / "nnvm.json"
    path.write_text(json.dumps(document))
    close(run_nnef_torch(nnef_torch.load(path, input_shapes=shapes), [data, index])[0], data.reshape(-1)[index])
    document["attrs"] = {"mxnet_version": ["int", 10901]}
    path.write_text(json.dumps(document))
    close(run_nnef_torch(nnef_torch.load(path, input_shapes=shapes), [data, index])[0], data[np.minimum(index, 2)])
