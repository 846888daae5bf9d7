"""torch.compile on imported models (issue 18): the imported MLP and unrolled LSTM of bench/import_models.py,
compiled, against tract and against the same modules uncompiled, forward at batch 1, in one run.

Usage: python bench/bench_compile.py [--models mlp,lstm] [--reps 11] [--threads 1] [--out FILE]

Each model is written as an NNEF folder (batch 1) and loaded with `nnef_torch.load`; `torch.compile(module)` is
warmed until it stops recompiling (its compile time is reported apart). tract loads the same folder
(`tract.nnef().without_tract_core()`). Times are medians of interleaved samples (bench_import.interleaved, the same
as bench/run.py); ratios are column / compiled, so above 1 the compiled module is faster. Outputs are compared with
the twin first. Nothing is asserted. The results go to bench/results/<date>-compile.md or --out FILE.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # the sibling scripts, and the nnef_torch of this checkout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,lstm")
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(args.threads)
    import import_models
    from bench_import import interleaved

    import nnef_torch
    lines = [f"# torch.compile on imported models, {datetime.date.today()}", "",
             f"command: `python bench/bench_compile.py {' '.join(argv if argv is not None else sys.argv[1:])}`  ",
             f"torch {torch.__version__}, {args.threads} thread(s), {os.cpu_count()} cores, load average "
             f"{os.getloadavg()[0]:.2f}", "",
             "| model | compiled | eager (x) | tract (x) | twin (x) | compile s | max rel. diff |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            folder = os.path.join(work, name)
            twin = import_models.write_model(name, folder).eval()
            x = import_models.example_input(name)
            eager = nnef_torch.load(folder)
            compiled = torch.compile(eager)
            with torch.no_grad():
                start = time.perf_counter()
                for _ in range(3):
                    out = compiled(x)
                compile_seconds = time.perf_counter() - start
                expected = twin(x)
                diff = ((out - expected).abs().max() / expected.abs().max()).item()
            calls = {"compiled": lambda c=compiled, x=x: c(x), "eager": lambda e=eager, x=x: e(x),
                     "twin": lambda t=twin, x=x: t(x)}
            try:
                import tract
                runnable = tract.nnef().without_tract_core().load(folder).into_runnable()
                array = x.numpy()
                calls["tract"] = lambda r=runnable, a=array: r.run([a])
            except Exception as error:  # noqa: BLE001 - an anchor that cannot load is a result
                print(f"[{name}] tract: {str(error).splitlines()[0]}")
            with torch.no_grad():
                seconds = interleaved(calls, args.reps, 0.05, budget=2.0)
            ours = seconds["compiled"]
            cells = {key: f"{seconds[key] * 1e3:.3f} ms ({seconds[key] / ours:.2f}x)" if key in seconds else "fails"
                     for key in ("eager", "tract", "twin")}
            lines.append(f"| {name} | {ours * 1e3:.3f} ms | {cells['eager']} | {cells['tract']} | {cells['twin']} | "
                         f"{compile_seconds:.1f} | {diff:.1e} |")
            print(lines[-1], flush=True)
    report = "\n".join(lines) + "\n"
    print(report)
    out = args.out or os.path.join(HERE, "results", f"{datetime.date.today()}-compile.md")
    with open(out, "w") as handle:
        handle.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
