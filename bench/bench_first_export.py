"""The first export in a fresh process: nnef_torch against torch.onnx + the Khronos converter (nnef_tools), each in a
new Python process per run, so that every import, registration and cache is paid as a user pays it once.

Usage: python bench/bench_first_export.py [--models resnet50,...] [--runs N]

For each model of bench/export_models.py and each tool, a child process builds the model (not timed), then times
the export that writes the NNEF folder (`export`: nnef_torch.save, or torch.onnx.export + nnef_tools.convert, as in
bench/bench_export.py) and, apart, the imports the tool needs first (`import`: nnef_torch, or torch.onnx + onnx +
nnef_tools). The table gives the minimum over --runs fresh processes of import, export and their sum, and the
ratios onnx+nt / ours (> 1: ours is faster). Nothing is asserted; this script only prints.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

CHILD = r"""
import json, os, sys, tempfile, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{here!r}, {repo!r}]
import torch
from export_models import build
module, inputs = build({model!r})
start = time.perf_counter()
if {tool!r} == "ours":
    import nnef_torch
else:
    import onnx, torch.onnx
    from nnef_tools import convert
    import bench_export
imported = time.perf_counter()
work = tempfile.mkdtemp()
out = os.path.join(work, "model")
if {tool!r} == "ours":
    nnef_torch.save(module, out, inputs)
else:
    bench_export.export_onnx_nnef_tools(module, inputs, out, work)
done = time.perf_counter()
print(json.dumps({{"import": imported - start, "export": done - imported}}))
"""

TOOLS = ("ours", "onnx+nt")


def run_child(model: str, tool: str) -> dict[str, float]:
    code = CHILD.format(here=HERE, repo=REPO, model=model, tool=tool)
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd,
                              env={**os.environ, "PYTHONPATH": REPO})
    if done.returncode != 0:
        raise RuntimeError(f"{tool} on {model} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,mobilenetv2,transformer")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    print(f"first export in a fresh process, min over {args.runs} processes per tool (seconds)")
    print(f"{'model':12} {'tool':8} {'import':>7} {'export':>7} {'total':>7}   onnx+nt/ours (export, total)")
    for model in args.models.split(","):
        best: dict[str, dict[str, float]] = {}
        for _ in range(args.runs):
            for tool in TOOLS:  # interleaved, so that machine load falls on both
                found = run_child(model, tool)
                found["total"] = found["import"] + found["export"]
                best[tool] = {key: min(value, best.get(tool, {}).get(key, value)) for key, value in found.items()}
        for tool in TOOLS:
            row = best[tool]
            ratio = ""
            if tool == "onnx+nt":
                ours = best["ours"]
                ratio = f"   {row['export'] / ours['export']:.2f}, {row['total'] / ours['total']:.2f}"
            print(f"{model:12} {tool:8} {row['import']:7.2f} {row['export']:7.2f} {row['total']:7.2f}{ratio}")


if __name__ == "__main__":
    main()
