"""Control-flow ONNX operators, resolved while converting: an If whose condition is known (a constant, or folded
from static shapes) becomes its chosen branch, converted inline, and one whose condition is computed from the
inputs computes both branches and selects each output (their shapes must agree); a Loop whose trip count is known
becomes its body converted once per iteration, the loop-carried values threaded from one copy to the next and the
scan outputs stacked on a new first axis; a Scan is unrolled the same way over its static scan length. Bodies
read the enclosing graph's names (their value table starts as a copy of the outer one); their initializers are
arrays known while converting.

A trip count or loop condition computed from the graph's inputs is refused: NNEF has no control flow, and tract's
scan, the one loop its dialects write, is not written for ONNX loops."""
from __future__ import annotations

from typing import Any

import numpy as np

from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Ref
from nnef_torch.ops.registry import import_rule, import_rules

ONNX = "onnx"
MAX_UNROLL = 4096  # body copies one Loop may unroll into
DATA_DEPENDENT = ("nnef_torch converts control flow only when it is decided while converting; NNEF has no control "
                  "flow, and tract's scan is not written for ONNX loops")


def _flag(node: OnnxNode, position: int, what: str) -> bool:
    """Input `position`, a one-item boolean known while converting."""
    if not node.known(position):
        raise node.fail(f"{what} (input {position}) is computed from the graph's inputs: {DATA_DEPENDENT}")
    value = node.const(position)
    if value.size != 1:
        raise node.fail(f"{what} (input {position}) has {value.size} items; expected one")
    return bool(value.reshape(-1)[0])


def _body(b: Builder, node: OnnxNode, graph: Any, bound: list[Any], label: str) -> list[Any]:
    """The outputs of subgraph `graph` converted in `node`'s scope, its inputs bound to `bound` in order."""
    from onnx import numpy_helper  # lazy: onnx is an optional extra, checked by reading

    from nnef_torch.formats.onnx.convert import convert_nodes  # lazy: convert imports these rules
    if len(graph.input) != len(bound):
        raise node.fail(f"{label} takes {len(graph.input)} inputs; the node gives it {len(bound)}")
    values = dict(node.scope)
    for value, given in zip(graph.input, bound):
        values[value.name] = given
    for tensor in graph.initializer:
        array = numpy_helper.to_array(tensor)
        values[tensor.name] = array.astype(np.float32) if array.dtype.kind == "f" else array
    convert_nodes(graph.node, values, b, node.file, node.opset, import_rules(ONNX), scope=f"{node.where} {label}: ")
    outputs = []
    for value in graph.output:
        found = values.get(value.name)
        if not isinstance(found, (Ref, np.ndarray, bool, int, float, list)):  # list: a sequence (sequences.py)
            raise node.fail(f"{label} output '{value.name}' is not computed by nnef_torch")
        outputs.append(found)
    return outputs


@import_rule("copy", ONNX, "If")
def if_(b: Builder, node: OnnxNode) -> Any:
    then_branch, else_branch = node.attr("then_branch"), node.attr("else_branch")
    if not node.known(0):
        return _selected(b, node, then_branch, else_branch)
    chosen, label = (then_branch, "then_branch") if _flag(node, 0, "the condition") else (else_branch, "else_branch")
    outputs = _body(b, node, chosen, [], label)
    if len(outputs) != node.outputs:
        raise node.fail(f"{label} has {len(outputs)} outputs; the node has {node.outputs}")
    return tuple(outputs) if len(outputs) > 1 else outputs[0]


def _selected(b: Builder, node: OnnxNode, then_branch: Any, else_branch: Any) -> Any:
    """An If whose condition is computed from the inputs: both branches computed, each output picked by `select`
    (the gradient reaches the branch taken only). The branches' outputs must be tensors of equal shapes."""
    condition = node.raw(0)
    if b.shape(condition) not in ((), (1,)):
        raise node.fail(f"the condition has shape {list(b.shape(condition))}; expected one item")
    then_outputs = _body(b, node, then_branch, [], "then_branch")
    else_outputs = _body(b, node, else_branch, [], "else_branch")
    if not len(then_outputs) == len(else_outputs) == node.outputs:
        raise node.fail(f"the branches have {len(then_outputs)} and {len(else_outputs)} outputs; the node has "
                        f"{node.outputs}")
    picked = []
    for index, (then_value, else_value) in enumerate(zip(then_outputs, else_outputs)):
        if isinstance(then_value, list) or isinstance(else_value, list):
            raise node.fail(f"output {index} is a sequence in a branch, and the condition is computed from the "
                            f"graph's inputs: {DATA_DEPENDENT}")
        then_value, else_value = node.as_tensor(then_value), node.as_tensor(else_value)
        shapes = [tuple(np.shape(v)) if not isinstance(v, Ref) else b.shape(v) for v in (then_value, else_value)]
        if shapes[0] != shapes[1]:
            raise node.fail(f"output {index} has shape {list(shapes[0])} in then_branch and {list(shapes[1])} in "
                            f"else_branch, and the condition is computed from the graph's inputs: {DATA_DEPENDENT}")
        rank = len(shapes[0])
        flag = b.op("reshape", condition, shape=[1] * rank) if rank else b.op("reshape", condition, shape=[])
        picked.append(b.op("select", flag, then_value, else_value))
    return tuple(picked) if len(picked) > 1 else picked[0]


def _trip_count(node: OnnxNode) -> int | None:
    if not node.has(0):
        return None
    if not node.known(0):
        raise node.fail(f"the trip count M (input 0) is computed from the graph's inputs: {DATA_DEPENDENT}")
    value = node.const(0)
    if value.size != 1:
        raise node.fail(f"the trip count M has {value.size} items; expected one")
    count = int(value.reshape(-1)[0])
    if count > MAX_UNROLL:
        raise node.fail(f"the trip count M is {count}: nnef_torch unrolls at most {MAX_UNROLL} iterations")
    return max(count, 0)


def _stacked(b: Builder, node: OnnxNode, items: list[Any]) -> Any:
    """Per-iteration values of one scan output, stacked on a new first axis."""
    if any(isinstance(item, list) for item in items):
        raise node.fail("a scan output is a sequence; ONNX scan outputs are tensors")
    if all(isinstance(item, np.ndarray) for item in items):
        return np.stack(items)
    parts = [node.as_tensor(item) for item in items]
    return b.op("concat", [b.op("unsqueeze", part, axes=[0]) for part in parts], axis=0)


@import_rule("copy", ONNX, "Loop")
def loop(b: Builder, node: OnnxNode) -> Any:
    body = node.attr("body")
    count = _trip_count(node)
    go = _flag(node, 1, "the initial condition") if node.has(1) else True
    carried = [node.raw(i) for i in range(2, len(node.inputs))]
    scans = node.outputs - len(carried)
    if len(body.output) != 1 + len(carried) + scans or scans < 0:
        raise node.fail(f"the body has {len(body.output)} outputs; expected the condition, {len(carried)} "
                        f"loop-carried value(s) and {max(scans, 0)} scan output(s)")
    if count is None and not node.has(1):
        raise node.fail("neither a trip count M nor a condition: the loop never ends")
    scanned: list[list[Any]] = [[] for _ in range(scans)]
    iteration = 0
    while go and (count is None or iteration < count):
        if iteration >= MAX_UNROLL:
            raise node.fail(f"the loop runs past {MAX_UNROLL} iterations, the most nnef_torch unrolls")
        bound = [np.array(iteration, np.int64), np.array(go, np.bool_), *carried]
        outputs = _body(b, node, body, bound, f"body (iteration {iteration})")
        condition = outputs[0]
        if not isinstance(condition, np.ndarray):
            raise node.fail(f"the body computes its condition from the graph's inputs: {DATA_DEPENDENT}")
        go = bool(condition.reshape(-1)[0])
        carried = outputs[1:1 + len(carried)]
        for items, value in zip(scanned, outputs[1 + len(carried):]):
            items.append(value)
        iteration += 1
    if scans and not iteration:
        raise node.fail("the loop runs no iteration, and its scan outputs would be empty (NNEF has no empty tensors)")
    results = carried + [_stacked(b, node, items) for items in scanned]
    return tuple(results) if len(results) > 1 else results[0]



def _slice_at(b: Builder, node: OnnxNode, value: Any, axis: int, index: int) -> Any:
    """Item `index` of `value` along `axis`, the axis dropped: one scan input's slice for one iteration."""
    if isinstance(value, np.ndarray):
        return np.take(value, index, axis=axis)
    part = b.op("slice", node.as_tensor(value), axes=[axis], begin=[index], end=[index + 1])
    return b.op("squeeze", part, axes=[axis])


def _moved(b: Builder, value: Any, axis: int) -> Any:
    """A stacked scan output with its first axis moved to `axis`."""
    if not axis:
        return value
    if isinstance(value, np.ndarray):
        return np.moveaxis(value, 0, axis)
    rank = b.rank(value)
    order = list(range(1, rank))
    order.insert(axis, 0)
    return b.op("transpose", value, axes=order)


@import_rule("copy", ONNX, "Scan")
def scan(b: Builder, node: OnnxNode) -> Any:
    """Scan (opset 9+) unrolled over its static scan length: the body converted once per slice of the scan inputs
    (taken along scan_input_axes, from the end where the direction is 1), the states threaded from one copy to the
    next, each scan output stacked along its scan_output_axes item (prepended where its direction is 1)."""
    body = node.attr("body")
    inputs = int(node.attr("num_scan_inputs", 0))
    states = len(node.inputs) - inputs
    outputs = node.outputs - states
    if inputs < 1 or states < 0 or outputs < 0 or len(body.output) != node.outputs:
        raise node.fail(f"{inputs} scan input(s) and {len(node.inputs)} inputs, {node.outputs} outputs and a body "
                        f"with {len(body.output)} outputs do not fit together")
    in_axes = list(node.attr("scan_input_axes", [0] * inputs))
    in_directions = list(node.attr("scan_input_directions", [0] * inputs))
    out_axes = list(node.attr("scan_output_axes", [0] * outputs))
    out_directions = list(node.attr("scan_output_directions", [0] * outputs))
    if (len(in_axes), len(in_directions), len(out_axes), len(out_directions)) != (inputs, inputs, outputs, outputs):
        raise node.fail("scan_input_axes/directions and scan_output_axes/directions do not match the inputs and "
                        "outputs")
    if any(d not in (0, 1) for d in in_directions + out_directions):
        raise node.fail("scan directions must be 0 (forward) or 1 (reverse)")
    scanned = [node.raw(states + i) for i in range(inputs)]
    ranks = [node.rank(states + i) for i in range(inputs)]
    in_axes = [node.axis(a, r, "scan_input_axes") for a, r in zip(in_axes, ranks)]
    lengths = {node.shape(states + i)[a] for i, a in enumerate(in_axes)}
    if len(lengths) != 1:
        raise node.fail(f"the scan inputs have different lengths {sorted(lengths)} along their scan axes")
    length = lengths.pop()
    if length > MAX_UNROLL:
        raise node.fail(f"the scan length is {length}: nnef_torch unrolls at most {MAX_UNROLL} iterations")
    if outputs and not length:
        raise node.fail("the scan length is 0, and its scan outputs would be empty (NNEF has no empty tensors)")
    carried = [node.raw(i) for i in range(states)]
    items: list[list[Any]] = [[] for _ in range(outputs)]
    for step in range(length):
        bound = [_slice_at(b, node, value, axis, length - 1 - step if reverse else step)
                 for value, axis, reverse in zip(scanned, in_axes, in_directions)]
        results = _body(b, node, body, carried + bound, f"body (iteration {step})")
        carried = results[:states]
        for collected, value in zip(items, results[states:]):
            collected.append(value)
    stacked = []
    for collected, axis, reverse in zip(items, out_axes, out_directions):
        whole = _stacked(b, node, collected[::-1] if reverse else collected)
        rank = whole.ndim if isinstance(whole, np.ndarray) else b.rank(whole)
        stacked.append(_moved(b, whole, node.axis(axis, rank, "scan_output_axes")))
    results = carried + stacked
    return tuple(results) if len(results) > 1 else results[0]
