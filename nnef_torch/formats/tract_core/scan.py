"""tract_core_scan, unrolled while lowering: the body fragment is expanded once per step on slices of the scanned
inputs, so a recurrent network becomes standard operations (slice, the body's ops, concat).

tract's semantics (nnef/src/ops/core/scan.rs): `scan` items (param, tensor, axis, chunk) are cut along `axis` in
chunks of |chunk| (last to first when chunk < 0); `full` items are passed whole each step; `state` items
(param, initial value, result) carry a body result to the next step; `output` items (result, "full" | "last",
axis, chunk) give the concatenation of the result over the steps along `axis` (in scan order, reversed when
chunk < 0) or its value at the last step.

Unrolling costs steps x (bindings + body): the whole of it is charged to the reading's compile-time budget before
the first step, and each binding is looked up by name in constant time, so a scan of any size is read in linear
time or refused at its statement.
"""
from __future__ import annotations

from typing import Any

from nnef_torch.errors import Location, NNEFSemanticError, NNEFShapeError, NNEFUnsupportedError
from nnef_torch.format import ast
from nnef_torch.formats.tract_core.lowering import call, charge
from nnef_torch.ir.graph import Ref
from nnef_torch.ir.limits import check_count
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
    if steps == 0:
        raise NNEFShapeError("tract_core_scan: the scanned inputs are empty along their axis (no step, so no "
                             "result)", loc)
    return check_count("tract_core_scan: the scanned inputs' steps (unrolled)", steps, MAX_STEPS, loc,
                       error=NNEFUnsupportedError)


def _few(names: list[str]) -> str:
    return str(names) if len(names) <= 8 else str(names[:8])[:-1] + f", ... ({len(names)} in all)]"


def _check_bindings(body: ast.Fragment, params: list[str], bound: list[str], loc: Location) -> None:
    """Each parameter of the body is bound exactly once, by a scan, full or state item."""
    declared, seen, twice = set(params), set(), []
    for name in bound:
        if name in seen:
            twice.append(name)
        seen.add(name)
    unbound = [name for name in params if name not in seen]
    extra = [name for name in bound if name not in declared]
    if twice:
        raise NNEFSemanticError(f"tract_core_scan: body parameter '{twice[0]}' is bound more than once", loc)
    if unbound or extra:
        raise NNEFSemanticError(f"tract_core_scan: body '{body.name}' parameters {_few(params)}; unbound "
                                f"{_few(unbound)}, unknown {_few(extra)}", loc)


@lowering_rule("tract_core_scan", dialect="tract_core")
def scan(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    for option in ("skip", "reset_every_turn", "external_state"):
        if args[option] != 0:
            raise NNEFUnsupportedError(f"tract_core_scan: {option} = {args[option]} (streaming) is not read", loc)
    body = lowerer.fragments.get(args["body"])
    if body is None or body.body is None:
        raise NNEFSemanticError(f"tract_core_scan: body '{args['body']}' is not a fragment defined in the document",
                                loc)
    scans, full, state = args["scan"], args["full"], args["state"]
    params = [param.name for param in body.params]
    _check_bindings(body, params, [item[0] for item in [*scans, *full, *state]], loc)
    results = [result.name for result in body.results]
    known = set(results)
    for name, kind, _, _ in args["output"]:
        if name not in known or kind not in ("full", "last"):
            raise NNEFSemanticError(f"tract_core_scan: output ('{name}', '{kind}') must name a result of "
                                    f"'{body.name}' {_few(results)} and be 'full' or 'last'", loc)
    for _, _, result in state:
        if result not in known:
            raise NNEFSemanticError(f"tract_core_scan: state result '{result}' is not a result of '{body.name}'", loc)
    steps = _steps(lowerer, scans, loc)
    # each step: a slice per scanned input, the body bound to every parameter, its outputs kept
    per_step = len(scans) + len(params) + len(args["output"]) + 1
    charge(lowerer, loc, steps=steps * per_step * lowerer.budget.INVOCATION_STEPS)
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
