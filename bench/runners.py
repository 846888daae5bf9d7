"""The runtimes bench/run.py compares, behind one shape: `load(folder)` returns a handle, `forward(handle, x)` returns
the first output as a torch tensor. Also the interleaved round-robin timer for calls too slow to repeat in a loop.

| name    | load                                                          | forward                          |
| ------- | ------------------------------------------------------------- | -------------------------------- |
| ours    | nnef_torch.load(folder)                                       | module(x)                        |
| native  | torch.export.load(<folder>.pt2).module() (torch's own format) | the hand-written twin, twin(x)   |
| khronos | nnef_tools.interpreter.pytorch.NNEFModule(model=folder)       | module(x)[0]                     |
| tract   | tract.nnef().without_tract_core().load(folder).into_runnable() | runnable.run([x.numpy()])[0]     |

Every import of an optional package happens inside the functions, so a missing anchor is one failed cell, not a crash.
"""
from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Runtime:
    name: str
    load: Callable[[str], Any]
    forward: Callable[[Any, torch.Tensor], torch.Tensor]


def native_program_path(folder: str) -> str:
    """Where run.py keeps torch.export.save's archive of the twin, next to the NNEF folder."""
    return folder.rstrip("/") + ".pt2"


def _load_ours(folder: str) -> Any:
    import nnef_torch
    return nnef_torch.load(folder).eval()


def _load_native(folder: str) -> Any:
    return torch.export.load(native_program_path(folder)).module()


def _load_khronos(folder: str) -> Any:
    from nnef_tools.interpreter.pytorch import NNEFModule
    return NNEFModule(model=folder).eval()


def _load_tract(folder: str) -> Any:
    import tract
    return tract.nnef().without_tract_core().load(folder).into_runnable()


def _forward_module(module: Any, x: torch.Tensor) -> torch.Tensor:
    return module(x)


def _forward_khronos(module: Any, x: torch.Tensor) -> torch.Tensor:
    return module(x)[0]


def _forward_tract(runnable: Any, x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(runnable.run([x.numpy()])[0].to_numpy())


RUNTIMES: dict[str, Runtime] = {
    "ours": Runtime("ours", _load_ours, _forward_module),
    "native": Runtime("native", _load_native, _forward_module),
    "khronos": Runtime("khronos", _load_khronos, _forward_khronos),
    "tract": Runtime("tract", _load_tract, _forward_tract),
}


def failure(error: BaseException) -> str:
    """One line saying why a tool failed: the exception type and the first line of its message, or for a chained
    Rust error (tract: `Caused by:` then numbered lines) its innermost cause."""
    lines = [line.strip() for line in str(error).strip().splitlines()]
    causes = []
    if "Caused by:" in lines:
        for line in lines[lines.index("Caused by:") + 1:]:
            if not re.match(r"\d+: ", line):
                break
            causes.append(line.split(": ", 1)[1])
    text = causes[-1] if causes else (lines or [""])[0]
    return f"{type(error).__name__}: {text[:160]}".rstrip(": ")


def rounds(calls: dict[str, Callable[[], Any]], reps: int, warmup: int = 1) -> tuple[dict[str, float], dict[str, str]]:
    """Median seconds of one call of each function, `reps` rounds with the order rotated every round, after `warmup`
    untimed calls each. A function that raises is dropped and its failure returned instead of a time."""
    names, failed = list(calls), {}
    for name in names:
        try:
            for _ in range(warmup):
                calls[name]()
        except Exception as error:  # noqa: BLE001 - one tool failing is a result, not the end of the run
            failed[name] = failure(error)
    names = [name for name in names if name not in failed]
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(reps):
        for name in names[r % max(len(names), 1):] + names[:r % max(len(names), 1)]:
            if name in failed:
                continue
            start = time.perf_counter()
            try:
                calls[name]()
            except Exception as error:  # noqa: BLE001
                failed[name] = failure(error)
                continue
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items() if name not in failed}, failed
