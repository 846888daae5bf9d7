"""Load time cold and by stage, for bench/run.py.

Cold: a new process per measurement (nothing imported, nothing cached but Python's bytecode of the package, which an
installed package has). The process imports torch (not counted: every tool needs it), then the tool, then loads
the model once; the time reported is the tool's import plus that load. Runtimes: ours (`nnef_torch.load`), khronos
(`nnef.load_graph` + the Khronos PyTorch interpreter's `NNEFModule`), tract, and the floor (reading every .dat
file's bytes). Rounds rotate the order.

Stages: one warm load of ours in this process with the functions of each stage wrapped with timers: parse (the
graph text to a syntax tree), lower (tree to IR: fragments expanded, shapes inferred), generate (IR to the fx graph,
then the module and its Python code), and the rest (opening files, the variables' data, reading them in threads
while the graph is generated). Reading the .dat bytes alone is the read floor.
"""
from __future__ import annotations

import compileall
import functools
import gc
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
COLD_RUNTIMES = ("ours", "khronos", "tract", "floor")
STAGES = (  # (stage, module, attribute): what a load of ours goes through
    ("parse", "nnef_torch.format.graph_file", "parse_document"),  # a file's text, parsed once by its GraphFile
    ("lower", "nnef_torch.reader", "lower"),
    ("generate", "nnef_torch.importer.load", "GraphBuilder.build"),
    ("generate", "nnef_torch.importer.load", "NNEFModule.__init__"),
)


def _dat_files(folder: str) -> list[str]:
    return sorted(os.path.join(root, name) for root, _, files in os.walk(folder) for name in files
                  if name.endswith(".dat"))


def _cold(runtime: str, folder: str) -> float:
    """In this (new) process: import the tool and load `folder` once; seconds."""
    import torch  # noqa: F401  (not counted: every tool imports it)
    start = time.perf_counter()
    if runtime == "ours":
        import nnef_torch
        nnef_torch.load(folder)
    elif runtime == "khronos":
        from nnef_tools.interpreter.pytorch import NNEFModule
        NNEFModule(model=folder)
    elif runtime == "tract":
        import tract
        tract.nnef().without_tract_core().load(folder).into_runnable()
    else:
        for path in _dat_files(folder):
            with open(path, "rb") as handle:
                handle.read()
    return time.perf_counter() - start


def cold_loads(folder: str, rounds: int, threads: int) -> tuple[dict[str, float], dict[str, str]]:
    """Median cold seconds per runtime, and the reason for each that failed."""
    # our bytecode, as an installed package has it (pip compiles on install; the anchors are installed): with
    # PYTHONDONTWRITEBYTECODE set and sources edited since, every new process would compile them again
    compileall.compile_dir(os.path.join(REPO, "nnef_torch"), quiet=1)
    samples: dict[str, list[float]] = {name: [] for name in COLD_RUNTIMES}
    failed: dict[str, str] = {}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, HERE, os.environ.get("PYTHONPATH")])))
    for r in range(rounds):
        names = [n for n in COLD_RUNTIMES if n not in failed]
        for name in names[r % len(names):] + names[:r % len(names)]:
            done = subprocess.run([sys.executable, os.path.abspath(__file__), name, folder, str(threads)],
                                  capture_output=True, text=True, env=env, timeout=600)
            if done.returncode != 0:
                lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
                failed[name] = lines[-1][:200] if lines else f"exit status {done.returncode}"
                continue
            samples[name].append(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
    return {name: statistics.median(values) for name, values in samples.items() if values}, failed


def stage_breakdown(folder: str, loads: int = 3) -> dict[str, float]:
    """Median seconds per stage of `loads` warm loads of ours in this process (see the module docstring)."""
    import nnef_torch
    nnef_torch.load(folder)  # warm
    spent: dict[str, float] = {}
    _, undo = instrument(STAGES, spent)
    results: list[dict[str, float]] = []
    try:
        for _ in range(loads):
            spent.clear()
            gc.collect()
            start = time.perf_counter()
            nnef_torch.load(folder)
            total = time.perf_counter() - start
            results.append({**spent, "rest": total - sum(spent.values()), "total": total})
    finally:
        undo()
    start = time.perf_counter()
    for path in _dat_files(folder):
        with open(path, "rb") as handle:
            handle.read()
    floor = time.perf_counter() - start
    stages = {key: statistics.median(r.get(key, 0.0) for r in results) for key in results[0]}
    return {**stages, "read floor": floor}


def instrument(stages: tuple[tuple[str, str, str], ...], spent: dict[str, float]
               ) -> tuple[list[str], Callable[[], None]]:
    """Wrap the functions of `stages` ((stage, module, attribute) triples) so that each call adds its seconds to
    `spent[stage]`. Returns the ones not found and a function that puts the originals back."""
    missing, restore = [], []
    for stage, module_name, path in stages:
        try:
            owner: Any = importlib.import_module(module_name)
            *outer, name = path.split(".")
            for part in outer:
                owner = getattr(owner, part)
            original = getattr(owner, name)
        except (ImportError, AttributeError):
            missing.append(f"{module_name}.{path}")
            continue

        def timed(*args: Any, __original: Callable[..., Any] = original, __stage: str = stage, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return __original(*args, **kwargs)
            finally:
                spent[__stage] = spent.get(__stage, 0.0) + time.perf_counter() - start
        setattr(owner, name, functools.wraps(original)(timed))
        restore.append((owner, name, original))

    def undo() -> None:
        for owner, name, original in restore:
            setattr(owner, name, original)
    return missing, undo


if __name__ == "__main__":  # a cold-load worker: RUNTIME FOLDER THREADS
    runtime, model_folder, thread_count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import warnings
    warnings.filterwarnings("ignore")
    import torch as _torch
    _torch.set_num_threads(thread_count)
    print(json.dumps({"seconds": _cold(runtime, model_folder)}))
