"""Archives against folders and the system tar: a model of `--mb` MB of float32 weights (a stack of Linear layers,
ResNet-like in its value distribution: random normal weights), exported once, then in one run: save to a folder,
save to .tgz (ours), `tar czf` of the folder, load from the folder, load from the .tgz (ours), `tar xzf`, and
`nnef-torch convert` .tgz -> folder. Prints seconds of the first run and the median of `--repeat` runs, with ratios
against tar and against the folder path. `--levels` also times zlib levels 1, 6 and 9 on the weights.

    PYTHONPATH=/work/main python bench/bench_archives.py --mb 100
    PYTHONPATH=/tmp/before python bench/bench_archives.py --mb 100     # a copy of the tree before the change
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import zlib
from collections.abc import Callable

import torch

import nnef_torch
from nnef_torch.cli import main as cli_main


def _model(mb: int) -> torch.nn.Module:
    width = 2048  # 16 MiB of float32 per layer
    layers = max(1, round(mb * (1 << 20) / (width * width * 4)))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    with torch.no_grad():
        for layer in model:
            layer.weight.normal_(0, 0.02)  # a trained layer's spread of values, not the uniform init
    return model.eval()


def _timed(step: Callable[[], object], repeat: int, reset: Callable[[], None]) -> tuple[float, float]:
    """Seconds of the first run and the median of `repeat` runs (each run after `reset`)."""
    times = []
    for _ in range(repeat):
        reset()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times[0], statistics.median(times)


def _levels(model: torch.nn.Module) -> None:
    data = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
    print(f"zlib on {len(data) / 2**20:.0f} MiB of float32 weights:")
    for level in (1, 6, 9):
        start = time.perf_counter()
        packed = zlib.compress(data, level)
        seconds = time.perf_counter() - start
        print(f"  level {level}: {len(packed) / len(data):.2%} of the size, {seconds:.2f} s "
              f"({len(data) / seconds / 2**20:.0f} MiB/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="float32 weights in MiB (default 100)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each step (the first is printed too)")
    parser.add_argument("--levels", action="store_true", help="also time zlib levels 1, 6, 9 on the weights")
    args = parser.parse_args()
    module = _model(args.mb)
    if args.levels:
        _levels(module)
    exported = nnef_torch.export(module, torch.zeros(1, 2048))
    work = tempfile.mkdtemp(prefix="bench-archives-")
    folder, tgz = os.path.join(work, "m"), os.path.join(work, "m.tgz")
    tar_tgz, untar, converted = os.path.join(work, "tar.tgz"), os.path.join(work, "untar"), os.path.join(work, "c")

    def clear(*paths: str) -> Callable[[], None]:
        def reset() -> None:
            for path in paths:
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else \
                    os.path.exists(path) and os.remove(path)
            os.makedirs(untar, exist_ok=True)
        return reset

    def untar_step() -> None:
        subprocess.run(["tar", "xzf", tar_tgz, "-C", untar], check=True)

    results: dict[str, tuple[float, float]] = {}
    try:
        results["save folder"] = _timed(lambda: exported.save(folder), args.repeat, clear(folder))
        results["save .tgz"] = _timed(lambda: exported.save(tgz), args.repeat, clear(tgz))
        results["tar czf"] = _timed(lambda: subprocess.run(["tar", "czf", tar_tgz, "-C", folder, "."], check=True),
                                    args.repeat, clear(tar_tgz))
        results["load folder"] = _timed(lambda: nnef_torch.load(folder), args.repeat, lambda: None)
        results["load .tgz"] = _timed(lambda: nnef_torch.load(tgz), args.repeat, lambda: None)
        results["tar xzf"] = _timed(untar_step, args.repeat, clear(untar))
        results["convert .tgz -> folder"] = _timed(lambda: cli_main(["convert", tgz, converted]), args.repeat,
                                                   clear(converted))
        sizes = {name: os.path.getsize(path) for name, path in (("ours", tgz), ("tar", tar_tgz))}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"nnef_torch from {os.path.dirname(nnef_torch.__file__)}; {args.mb} MiB of weights; .tgz "
          f"{sizes['ours'] / 2**20:.1f} MiB (tar czf: {sizes['tar'] / 2**20:.1f} MiB)")
    against = {"save folder": "save folder", "save .tgz": "tar czf", "load .tgz": "tar xzf",
               "convert .tgz -> folder": "tar xzf"}
    folder_of = {"save .tgz": "save folder", "load .tgz": "load folder"}
    print(f"{'step':<24}{'first s':>9}{'median s':>10}{'x tar':>8}{'x folder':>10}")
    for step, (first, median) in results.items():
        tar = results["tar czf" if step.startswith("save") else "tar xzf"][0]
        base = folder_of.get(step)
        ratio_tar = f"{first / tar:.1f}" if step in against and "tar" in against[step] else ""
        ratio_folder = f"{first / results[base][0]:.1f}" if base else ""
        print(f"{step:<24}{first:>9.2f}{median:>10.2f}{ratio_tar:>8}{ratio_folder:>10}")


if __name__ == "__main__":
    main()
