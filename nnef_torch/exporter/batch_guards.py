"""The symbolic-batch trace of a variable-batch export: torch.export with one `torch.export.Dim` on every batch
axis, and where the module's code fixes or restricts the batch, the operation and the user's source line.

Those come from the guards torch records while tracing: its `torch.fx.experimental.symbolic_shapes` log, read at
INFO level for the duration of the trace through a filter that lets through only what would show anyway (the
logger's level is process-wide, so two exports must not trace at once in two threads).
"""
from __future__ import annotations

import logging
import math
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from nnef_torch.errors import ExportError, Location
from nnef_torch.exporter.problems import Problem, error_problem, is_user_file
from nnef_torch.exporter.trace import explain, quiet_torch

_SHAPE_LOG = "torch.fx.experimental.symbolic_shapes"
_SYMBOL = re.compile(r"\bs\d+\b")


def rebatched(inputs: tuple[Any, ...], axes: list[int | None], size: int) -> tuple[Any, ...]:
    """The inputs with `size` items along their batch axes (the example's items repeated, then cut)."""
    result = []
    for value, axis in zip(inputs, axes):
        if axis is not None:
            times = math.ceil(size / value.shape[axis])
            value = torch.cat([value] * times, dim=axis).narrow(axis, 0, size)
        result.append(value)
    return tuple(result)



@dataclass(frozen=True)
class _Guard:
    """A condition on the batch size that torch recorded while tracing, where the user's code made it."""

    expr: str
    frame: traceback.FrameSummary | None
    op: str | None  # the ATen operation being traced, where the guard came from one


class _GuardLog(logging.Filter):
    """Collects the guards torch logs at INFO level; lets through only the records that would show anyway."""

    def __init__(self, shown: int, depth: int):
        super().__init__()
        self.shown = shown
        self.depth = depth  # frames of the stack above the trace: the caller's, not the module's
        self.guards: list[_Guard] = []

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if "[guard added]" in str(record.msg) and len(args) >= 2 and _SYMBOL.search(str(args[1])):
            self.guards.append(_Guard(str(args[1]), self._user_frame(), _traced_op()))
        return record.levelno >= self.shown

    def _user_frame(self) -> traceback.FrameSummary | None:
        frames = [frame for frame in traceback.extract_stack()[self.depth:] if is_user_file(frame.filename)]
        return frames[-1] if frames else None


@contextmanager
def _recorded_guards() -> Iterator[_GuardLog]:
    logger = logging.getLogger(_SHAPE_LOG)
    level = logger.level
    log = _GuardLog(logger.getEffectiveLevel(), len(traceback.extract_stack()))
    logger.addFilter(log)
    logger.setLevel(min(logging.INFO, logger.getEffectiveLevel()))
    try:
        yield log
    finally:
        logger.removeFilter(log)
        logger.setLevel(level)


def _traced_op() -> str | None:
    """The outermost ATen operation being dispatched below the user's code (read from torch's dispatch frames)."""
    frame = sys._getframe(1)
    found = None
    while frame is not None and not is_user_file(frame.f_code.co_filename):
        for key in ("func", "op_overload"):
            value = frame.f_locals.get(key)
            if isinstance(value, torch._ops.OpOverload):
                found = str(value)
        frame = frame.f_back
    return found


def check_symbolic(module: torch.nn.Module, inputs: tuple[Any, ...], axes: list[int | None],
                   size: int) -> Exception | None:
    """Trace `module` with a symbolic batch; raises ExportError where the code fixes the batch. A failure of
    another kind is returned: the concrete traces that follow report it, or the caller does."""
    dim = torch.export.Dim("batch")
    shapes = tuple({axis: dim} if axis is not None else None for axis in axes)
    name = type(module).__name__
    with _recorded_guards() as log, quiet_torch():
        try:
            torch.export.export(module, rebatched(inputs, axes, size), dynamic_shapes=shapes, strict=False)
            return None
        except Exception as error:  # torch reports tracing failures with many exception types
            failure = error
    problems = [_guard_problem(guard) for guard in _culprits(log.guards)]
    if not ("Constraints violated" in str(failure) or "specialized" in str(failure)):
        try:  # does it fail at the example batch too? Then it is no matter of the batch: the traces report it
            with quiet_torch():
                torch.export.export(module, inputs, strict=False)
        except Exception:  # noqa: BLE001 - reported by the concrete trace that follows
            return failure
        problem = error_problem(failure, _SYMBOL.sub("batch", explain(failure)))
        if problem.location is not None or not problems:  # torch's own assertion says less than its guards
            problems.insert(0, problem)
    elif not problems:
        problems = [error_problem(failure, _torch_reason(failure))]
    raise ExportError(f"{name} cannot be exported with a variable batch size: its code fixes or restricts the "
                      f"batch size (it traces at batch {_batch_of(inputs, axes)}, not at every batch):",
                      _unique(problems)) from failure


def _culprits(guards: list[_Guard]) -> list[_Guard]:
    """The guards to report: those made in the module's code (equalities first), at most five."""
    located = [guard for guard in guards if guard.frame is not None] or guards
    located.sort(key=lambda guard: not guard.expr.startswith("Eq("))
    return located[:5]


def _unique(problems: list[Problem]) -> list[Problem]:
    """One problem per source line (the first), and those without a line."""
    seen: set[Any] = set()
    kept = []
    for problem in problems:
        key = str(problem.location) if problem.location is not None else str(problem)
        if key not in seen:
            seen.add(key)
            kept.append(problem)
    return kept


def _guard_problem(guard: _Guard) -> Problem:
    condition = _readable(guard.expr)
    fixed = re.fullmatch(r"batch == (\d+)|(\d+) == batch", condition)
    who = guard.op or "this code"
    if fixed:
        reason = f"{who} fixes the batch size to {fixed.group(1) or fixed.group(2)}"
    else:
        reason = f"{who} restricts the batch size: torch.export finds that it holds only where {condition}"
    frame = guard.frame
    if frame is None:
        return Problem(reason)
    return Problem(reason, Location(file=frame.filename, line=frame.lineno), (frame.line or "").strip() or None,
                   frame.name)


def _readable(expr: str) -> str:
    expr = _SYMBOL.sub("batch", expr)
    match = re.fullmatch(r"(Eq|Ne)\((.*), (.*)\)", expr)
    if match:
        return f"{match.group(2)} {'==' if match.group(1) == 'Eq' else '!='} {match.group(3)}"
    return expr


def _torch_reason(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip().startswith("- ")]
    return "torch.export: " + ("; ".join(line[2:] for line in lines) or str(error).splitlines()[0])


def _batch_of(inputs: tuple[Any, ...], axes: list[int | None]) -> int:
    return next(int(value.shape[axis]) for value, axis in zip(inputs, axes) if axis is not None)
