"""Which consumers run our exports, by target: every row of the single-op export table (tests/exporter/
single_op_rows.py, the `extra` rows included) and every model of the test zoo (tests/exporter/zoo.py, eval mode),
exported with target="standard" and target="tract", then run in

- Session:      the Khronos reference executor, `nnef.Session(folder, lowered=[...])`;
- tract strict: `tract.nnef().without_tract_core()` (standard NNEF only);
- tract:        `tract.nnef()` with its default registries (tract_core included);

and compared with torch's output (the tolerance of the tests; tract gets integer inputs as int64, its NNEF
`integer`, and the Khronos executor as int32, its own). Prints, per target, how many cases exported and how
many each consumer ran and matched, and the cases each one failed with the first line of the reason.

Usage: python bench/count_export_consumers.py [--rows N] [--verbose]

Rows whose Khronos run is recorded as crashing the process (`Row.crashes`) are counted as Session failures without
being run. The cases run in a worker process, started again when a consumer crashes it; that case then counts as
failed by every consumer. Nothing is asserted; this script only counts.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import multiprocessing
import os
import queue
import sys
import tempfile
import warnings
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(REPO, "tests"), REPO]

TARGETS = ("standard", "tract")
CONSUMERS = ("Session", "tract strict", "tract")


def cases(limit: int | None):
    """(name, module, inputs, rtol, consumers not to run) for every row and zoo model."""
    from exporter.single_op_rows import ROWS
    from exporter.zoo import ZOO, make
    rows = ROWS[:limit] if limit else ROWS
    for row in rows:
        yield row.name, row.module, row.inputs, row.rtol, set(row.crashes)
    for name in ZOO:
        module, inputs = make(name, "eval")
        yield f"zoo:{name}", module, inputs, 1e-4, set()


def case_names(limit: int | None) -> list[str]:
    """The names of `cases(limit)`, without building their modules."""
    from exporter.single_op_rows import ROWS
    from exporter.zoo import ZOO
    return [row.name for row in (ROWS[:limit] if limit else ROWS)] + [f"zoo:{name}" for name in ZOO]


def run_case(module, inputs, rtol: float, target: str, crashes: set[str], folder: str) -> dict[str, str]:
    """'' for each consumer that matched, else the reason; 'export' holds the export's failure, if any."""
    import numpy as np
    import torch
    import tract
    from exporter.consumers import _as_list, _numpy, close, run_khronos

    import nnef_torch
    with torch.no_grad():
        expected = [_numpy(v) for v in _as_list(copy.deepcopy(module)(*inputs))]
    try:
        nnef_torch.export(module, inputs, target=target).save(folder)
    except Exception as error:  # noqa: BLE001  (counted)
        return {"export": f"{type(error).__name__}: {error}"}
    arrays = [_numpy(x) for x in inputs]

    def in_tract(nnef) -> list:
        model = nnef.load(folder).into_runnable()
        outputs = model.run([x.astype(np.int64) if x.dtype.kind in "iu" else x for x in arrays])  # NNEF integer
        return [outputs[i].to_numpy() for i in range(len(outputs))]

    runs = {"Session": lambda: run_khronos(_path(folder), arrays),
            "tract strict": lambda: in_tract(tract.nnef().without_tract_core()),
            "tract": lambda: in_tract(tract.nnef())}
    found = {"export": ""}
    for consumer, run in runs.items():
        if consumer == "Session" and "khronos" in crashes:
            found[consumer] = "not run: crashes the process"
            continue
        try:
            outputs = run()
            assert len(outputs) == len(expected), f"{len(outputs)} outputs, expected {len(expected)}"
            for got, want in zip(outputs, expected):
                close(got, want, rtol)
            found[consumer] = ""
        except BaseException as error:  # noqa: BLE001  (counted; pytest.skip is a BaseException)
            found[consumer] = f"{type(error).__name__}: {_reason(error)}"
    return found


class Worker:
    """Runs cases in a spawned process of its own (forking after torch has started its threads can hang), started
    again after a case crashed it; a crash counts as a failure of every consumer of that case."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.context = multiprocessing.get_context("spawn")
        self.process = None

    def run(self, index: int, target: str, folder: str) -> dict[str, str]:
        if self.process is None or not self.process.is_alive():
            self.requests, self.answers = self.context.SimpleQueue(), self.context.Queue()
            self.process = self.context.Process(target=_serve, args=(self.requests, self.answers, self.limit),
                                                daemon=True)
            self.process.start()
        self.requests.put((index, target, folder))
        while True:
            try:
                return self.answers.get(timeout=1.0)
            except queue.Empty:
                if not self.process.is_alive():
                    crashed = f"crashed the process (exit code {self.process.exitcode})"
                    return {"export": "", **{consumer: crashed for consumer in CONSUMERS}}

    def close(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.requests.put(None)
            self.process.join()


def _serve(requests, answers, limit: int | None) -> None:
    warnings.simplefilter("ignore")
    all_cases = list(cases(limit))
    while (request := requests.get()) is not None:
        index, target, folder = request
        _, module, inputs, rtol, crashes = all_cases[index]
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            answers.put(run_case(module, inputs, rtol, target, crashes, folder))


def _reason(error: BaseException) -> str:
    """The informative line of an error: the deepest cause of tract's chain (before its stack backtrace)."""
    text = str(error).split("Stack backtrace:")[0]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _path(folder: str):
    from pathlib import Path
    return Path(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="only the first N single-op rows")
    parser.add_argument("--verbose", action="store_true", help="print every failure")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    results: dict[str, dict[str, dict[str, str]]] = {target: {} for target in TARGETS}
    worker = Worker(args.rows)
    with tempfile.TemporaryDirectory() as work:
        for index, name in enumerate(case_names(args.rows)):
            for target in TARGETS:
                folder = os.path.join(work, f"{index}_{target}")
                results[target][name] = worker.run(index, target, folder)
            print(f"\r{index + 1} cases", end="", file=sys.stderr, flush=True)
    worker.close()
    print(file=sys.stderr)
    total = len(results["standard"])
    print(f"{total} export cases (single-op table with its extra rows, and the zoo in eval mode)\n")
    print(f"{'target':10} {'exported':>9} " + " ".join(f"{c:>13}" for c in CONSUMERS))
    for target in TARGETS:
        found = results[target]
        exported = sum(1 for r in found.values() if not r["export"])
        counts = [sum(1 for r in found.values() if not r["export"] and r.get(c) == "") for c in CONSUMERS]
        print(f"{target:10} {exported:>9} " + " ".join(f"{n:>13}" for n in counts))
    for target in TARGETS:
        for consumer in ("export", *CONSUMERS):
            failed = {name: r[consumer] for name, r in results[target].items() if r.get(consumer)}
            if not failed:
                continue
            reasons = Counter(why.split(":")[0] for why in failed.values())
            print(f"\n{target} / {consumer}: {len(failed)} failed ({dict(reasons.most_common(4))})")
            for name, why in sorted(failed.items()) if args.verbose else list(sorted(failed.items()))[:6]:
                print(f"  {name}: {why[:160]}")


if __name__ == "__main__":
    main()
