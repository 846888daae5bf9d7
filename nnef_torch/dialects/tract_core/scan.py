"""tract_core_scan, unrolled while lowering: the body fragment is expanded once per step on slices of the scanned
inputs, so a recurrent network becomes standard operations (slice, the body's ops, concat).

tract's semantics (nnef/src/ops/core/scan.rs): `scan` items (param, tensor, axis, chunk) are cut along `axis` in
chunks of |chunk| (last to first when chunk < 0); `full` items are passed whole each step; `state` items
(param, initial value, result) carry a body result to the next step; `output` items (result, "full" | "last",
axis, chunk) give the concatenation of the result over the steps along `axis` (in scan order, reversed when
chunk < 0) or its value at the last step.
"""
from __future__ import annotations

from typing import Any

from nnef_torch.dialects.tract_core.lowering import call
from nnef_torch.errors import Location, NNEFSemanticError, NNEFShapeError, NNEFUnsupportedError
from nnef_torch.format import ast
from nnef_torch.ir.graph import Ref
from nnef_torch.ops.registry import lowering_rule

MAX_STEPS = 4096  # unrolled steps of one scan


def _shape(lowerer: Any, value: Any, what: str, loc: Location) -> tuple[int, ...]:
    if not isinstance(value, Ref) or lowerer.tensors[value.name].shape is None:
        raise NNEFShapeError(f"tract_core_scan: {what} needs a tensor of known shape", loc)
    return lowerer.tensors[value.name].shape


def _steps(lowerer: Any, scans: list, loc: Location) -> int:
    steps = None
    for name, value, axis, chunk in scans:
        shape = _shape(lowerer, value, f"scanned input '{name}'", loc)
        if chunk == 0 or not -len(shape) <= axis < len(shape) or shape[axis] % abs(chunk):
            raise NNEFShapeError(f"tract_core_scan: scanned input '{name}' of shape {list(shape)} cannot be cut "
                                 f"along axis {axis} in chunks of {chunk}", loc)
        count = shape[axis] // abs(chunk)
        if steps is not None and count != steps:
            raise NNEFShapeError(f"tract_core_scan: scanned inputs give {steps} and {count} steps", loc)
        steps = count
    if steps is None:
        raise NNEFUnsupportedError("tract_core_scan without scanned inputs has no static number of steps", loc)
    if steps > MAX_STEPS:
        raise NNEFUnsupportedError(f"tract_core_scan: {steps} steps is more than the {MAX_STEPS} unrolled", loc)
    return steps


@lowering_rule("tract_core_scan")
def scan(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    for option in ("skip", "reset_every_turn", "external_state"):
        if args[option] != 0:
            raise NNEFUnsupportedError(f"tract_core_scan: {option} = {args[option]} (streaming) is not read", loc)
    body = lowerer.fragments.get(args["body"])
    if body is None or body.body is None:
        raise NNEFSemanticError(f"tract_core_scan: body '{args['body']}' is not a fragment defined in the document",
                                loc)
    scans, full, state = args["scan"], args["full"], args["state"]
    bound = [item[0] for item in [*scans, *full, *state]]
    params = [param.name for param in body.params]
    unbound = [name for name in params if name not in bound]
    extra = [name for name in bound if name not in params]
    if unbound or extra:
        raise NNEFSemanticError(f"tract_core_scan: body '{body.name}' parameters {params}; unbound {unbound}, "
                                f"unknown {extra}", loc)
    results = [result.name for result in body.results]
    for name, kind, _, _ in args["output"]:
        if name not in results or kind not in ("full", "last"):
            raise NNEFSemanticError(f"tract_core_scan: output ('{name}', '{kind}') must name a result of "
                                    f"'{body.name}' {results} and be 'full' or 'last'", loc)
    for _, _, result in state:
        if result not in results:
            raise NNEFSemanticError(f"tract_core_scan: state result '{result}' is not a result of '{body.name}'", loc)
    steps = _steps(lowerer, scans, loc)
    current = {name: value for name, value, _ in state}
    history: list[dict[str, Any]] = []
    for step in range(steps):
        values = dict(current)
        values.update({name: value for name, value in full})
        for name, value, axis, chunk in scans:
            size = abs(chunk)
            at = step if chunk > 0 else steps - 1 - step
            values[name] = call(lowerer, "slice", loc, input=value, axes=[axis], begin=[at * size],
                                end=[(at + 1) * size])
        out = lowerer.invoke(body.name, [(name, values[name], loc) for name in params], None, loc, None)
        out = dict(zip(results, out if len(results) > 1 else [out]))
        history.append(out)
        current = {name: out[result] for name, _, result in state}
    outputs = []
    for name, kind, axis, chunk in args["output"]:
        if kind == "last":
            outputs.append(history[-1][name])
            continue
        items = [h[name] for h in history]
        if chunk < 0:
            items.reverse()
        outputs.append(items[0] if len(items) == 1 else call(lowerer, "concat", loc, values=items, axis=axis))
    return outputs
