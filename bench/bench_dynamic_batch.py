"""Variable-batch export (issue 17): each model exported once with `dynamic_batch=True`, its `external` extents
edited to batch 1 and 7, and run there by the Khronos executor (`nnef.Session`) and tract against torch; the
export's time against a fixed-batch export of the same module, in one run.

Usage: python bench/bench_dynamic_batch.py [--reps 3] [--out FILE]

Models (seeded, eval mode, exported at batch 4): a CNN with 4 channels, flatten and linear (a channel count equal to
the batch); a batch-first TransformerEncoderLayer (its attention reshapes the batch into heads); an LSTM without an
initial state (torch makes batch-sized zeros). Errors are max |consumer - torch| and that over max |torch|. Times
are medians of `--reps` exports in this process; the ratio is fixed / dynamic (below 1: the variable batch costs
that much more). Nothing is asserted. The results go to bench/results/<date>-dynamic-batch.md or --out FILE.
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # the nnef_torch of this checkout (installed or not)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

BATCHES = (1, 7)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.linear = nn.Linear(4 * 5 * 5, 3)

    def forward(self, x):
        return self.linear(torch.flatten(torch.relu(self.conv(x)), 1))


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 10, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def models():
    torch.manual_seed(0)
    return {"CNN (flatten, linear; 4 channels = batch 4)": (ConvNet().eval(), (4, 5, 5)),
            "TransformerEncoderLayer (batch first)": (
                nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval(), (6, 16)),
            "LSTM (no initial state)": (Recurrent().eval(), (9, 6))}


def at_batch(folder: str, batch: int, scratch: str) -> str:
    copy = os.path.join(scratch, f"b{batch}")
    shutil.copytree(folder, copy)
    path = os.path.join(copy, "graph.nnef")
    with open(path) as file:
        text = file.read()
    text = re.sub(r"(external<scalar>\(shape = \[)4,", rf"\g<1>{batch},", text)
    with open(path, "w") as file:
        file.write(text)
    return copy


def run_session(folder: str, x: np.ndarray) -> np.ndarray:
    import nnef
    text = open(os.path.join(folder, "graph.nnef")).read()
    from nnef_torch.stdlib import standard_fragments
    native = {"max_pool", "max_pool_with_index", "avg_pool", "rms_pool", "separable_conv", "separable_deconv",
              "nearest_upsample", "nearest_downsample", "area_downsample"}  # expanded, these hit executor bugs
    compound = [name for name, fragment in standard_fragments().items() if fragment.body is not None
                and name not in native]  # the executor runs these (moments, ...) only expanded
    lowered = re.findall(r"^fragment (\w+)", text, re.M) + compound
    with nnef.Session(folder, lowered=lowered) as session:
        return np.asarray(session(x))


def run_tract(folder: str, x: np.ndarray) -> np.ndarray:
    import tract
    model = tract.nnef().without_tract_core().load(folder).into_runnable()
    return model.run([x])[0].to_numpy()


def median_time(function, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import nnef_torch

    lines = [f"# Variable-batch export, {datetime.date.today()}", "",
             f"command: `python bench/bench_dynamic_batch.py {' '.join(argv if argv is not None else sys.argv[1:])}`"
             f"  \nmachine: {os.cpu_count()} cores, torch {torch.__version__}, load average "
             f"{os.getloadavg()[0]:.2f}", "",
             "| model | batch | nnef.Session max abs / rel | tract max abs / rel | nnef_torch.load(batch_size=) |",
             "|---|---:|---|---|---|"]
    timing = ["", "| model | fixed-batch export s | dynamic export s | fixed / dynamic |", "|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as scratch:
        for name, (module, shape) in models().items():
            example = torch.randn(4, *shape)
            folder = os.path.join(scratch, re.sub(r"\W", "", name)[:12])
            nnef_torch.save(module, folder, (example,), dynamic_batch=True)
            for batch in BATCHES:
                x = torch.randn(batch, *shape)
                with torch.no_grad():
                    expected = module(x).numpy()
                scale = float(np.abs(expected).max())
                cells = []
                for run in (run_session, run_tract):
                    try:
                        found = run(at_batch(folder, batch, os.path.join(scratch, run.__name__, name[:3])),
                                    x.numpy())
                        error = float(np.abs(found - expected).max())
                        cells.append(f"{error:.1e} / {error / scale:.1e}")
                    except Exception as failure:  # noqa: BLE001 - a consumer's refusal is a result
                        cells.append(f"fails: {str(failure).splitlines()[0][:60]}")
                with torch.no_grad():
                    ours = nnef_torch.load(folder, batch_size=batch)(x).numpy()
                error = float(np.abs(ours - expected).max())
                lines.append(f"| {name} | {batch} | {cells[0]} | {cells[1]} | {error:.1e} / {error / scale:.1e} |")
            fixed = median_time(lambda m=module, x=example: nnef_torch.export(m, (x,)), args.reps)
            dynamic = median_time(lambda m=module, x=example: nnef_torch.export(m, (x,), dynamic_batch=True),
                                  args.reps)
            timing.append(f"| {name} | {fixed:.2f} | {dynamic:.2f} | {fixed / dynamic:.2f}x |")
    report = "\n".join(lines + timing) + "\n"
    print(report)
    out = args.out or os.path.join(HERE, "results", f"{datetime.date.today()}-dynamic-batch.md")
    with open(out, "w") as handle:
        handle.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
