"""What stops an export: one `Problem` per cause, each pointing at the line of the user's code that caused it.

The line comes from the stack trace torch.export records on every traced node (`node.meta['stack_trace']`, already
limited to user code), or, for a failure while tracing, from the traceback: its innermost frame outside torch,
nnef_torch and the standard library.
"""
from __future__ import annotations

import os
import re
import sysconfig
import traceback
from typing import Any

from nnef_torch.errors import Location

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)(?:\n[ \t]+(?!File ")(.*))?')
_GENERATED = ("<eval_with_key>", "<string>")  # code torch.fx generates and runs while tracing
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the nnef_torch folder


class Problem(str):
    """One reason a module cannot be exported, as text (so it prints and compares as a string), with
    `location` (file and line of the user's code, or None when unknown) and `code` (that line's text)."""

    reason: str
    location: Location | None
    code: str | None

    def __new__(cls, reason: str, location: Location | None = None, code: str | None = None,
                function: str | None = None) -> Problem:
        text = reason
        if location is not None:
            text += f"\n      at {location}" + (f" in {function}" if function else "") + (f": {code}" if code else "")
        problem = super().__new__(cls, text)
        problem.reason, problem.location, problem.code = reason, location, code
        return problem


def node_problem(node: Any, reason: str) -> Problem:
    """A problem with the traced node `node` (an fx node), located at the user's line that produced it."""
    text = f"{node.target} ({node.name}): {reason}"
    frames = [frame for frame in _FRAME.findall(node.meta.get("stack_trace") or "")
              if not frame[0].startswith(_GENERATED)]
    if not frames:
        return Problem(text + _module_path(node))
    file, line, function, code = frames[-1]
    return Problem(text, Location(file=file, line=int(line)), code.strip() or None, function)


def error_problem(error: BaseException, reason: str) -> Problem:
    """A problem raised while tracing, located at the innermost frame of user code in `error`'s traceback (below
    nnef_torch's own frames: the caller of `nnef_torch.export` is not where the module failed)."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [index for index, frame in enumerate(frames) if _is_ours(frame.filename)]
    frames = [frame for frame in frames[ours[-1] + 1 if ours else 0:] if is_user_file(frame.filename)]
    if not frames:
        return Problem(reason)
    frame = frames[-1]
    return Problem(reason, Location(file=frame.filename, line=frame.lineno), (frame.line or "").strip() or None,
                   frame.name)


def _module_path(node: Any) -> str:
    """Where a node without a recorded stack trace comes from: the submodule that called it."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path, kind = list(stack.values())[-1]
    kind = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    return f"\n      in submodule '{path}' ({kind.rsplit('.', 1)[-1]})" if path else ""


def _folders(*folders: str) -> tuple[str, ...]:
    return tuple(os.path.normcase(os.path.abspath(folder)) + os.sep for folder in folders)


def _is_ours(filename: str) -> bool:
    return os.path.normcase(os.path.abspath(filename)).startswith(_folders(_PACKAGE))


def is_user_file(filename: str) -> bool:
    """Not torch, nnef_torch or the standard library (installed packages, such as model zoos, count as user code)."""
    import torch
    if filename.startswith(_GENERATED):
        return False
    path = os.path.normcase(os.path.abspath(filename))
    paths = sysconfig.get_paths()
    if path.startswith(_folders(os.path.dirname(torch.__file__), _PACKAGE)):
        return False
    return not path.startswith(_folders(paths["stdlib"], paths["platstdlib"])) or path.startswith(
        _folders(paths["purelib"], paths["platlib"]))
