"""Export memory benchmark (issue 4): peak memory of `nnef_torch.save` on a model of a few GB, against the model's
own size; optionally the same for torch_to_nnef (KhronosNNEF target).

Usage: python bench/bench_export_memory.py [--layers 10] [--width 8192] [--skip-anchors] [--workdir /tmp]

The model is a stack of `--layers` nn.Linear(width, width) layers (10 x 8192^2 float32 = 2.7 GB by default), built on
the meta device and filled with torch.empty/normal_, so building it takes seconds. Each measurement runs in a fresh
subprocess: build the model, read VmRSS, reset the high-water mark (`echo 5 > /proc/self/clear_refs`), export and
save to a folder under --workdir, read VmHWM. A thread also samples VmRSS every 2 ms, as a cross-check where the
kernel does not support resetting VmHWM.

Printed: model MB, peak extra = VmHWM - VmRSS(model built), that extra over the model size and over the largest
tensor, peak total / model size, wall seconds and MB/s. Target: peak extra about one tensor (the tensor file being
written), i.e. peak total / model size close to 1. The output folder is deleted after each run.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, REPO]

from memory import RssSampler, reset_peak, rss_status  # noqa: E402  (bench/ is on sys.path from here)


def build(layers: int, width: int):
    import torch
    model = torch.nn.Sequential(*(torch.nn.Linear(width, width, device="meta") for _ in range(layers)))
    model = model.to_empty(device="cpu")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, width ** -0.5, generator=generator)
    return model.eval(), (torch.randn(1, width, generator=generator),)


def export_ours(model, inputs, out: str) -> None:
    import nnef_torch
    nnef_torch.save(model, out, inputs, progress=False)


def export_t2n(model, inputs, out: str) -> None:
    import logging

    from torch_to_nnef import KhronosNNEF, export_model_to_nnef
    target = KhronosNNEF(KhronosNNEF.OFFICIAL_SUPPORTED_VERSIONS[0], check_io=False)
    export_model_to_nnef(model, inputs, out, target, input_names=["x"], output_names=["y"], compression_level=None,
                         log_level=logging.ERROR)


def worker(tool: str, layers: int, width: int, workdir: str) -> None:
    """One measurement in this (fresh) process; prints one JSON line."""
    import gc
    import warnings
    warnings.filterwarnings("ignore")
    import torch  # noqa: F401 - the libraries are imported before the baseline, so that their pages count there
    if tool == "ours":
        import nnef_torch  # noqa: F401
    else:
        import torch_to_nnef  # noqa: F401
    rss_empty = rss_status()["VmRSS"]
    model, inputs = build(layers, width)
    gc.collect()
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    largest = max(p.numel() * p.element_size() for p in model.parameters())
    rss_model = rss_status()["VmRSS"]
    reset = reset_peak()
    sampler = RssSampler()
    sampler.start()
    out = tempfile.mkdtemp(prefix=f"export_memory_{tool}_", dir=workdir)
    target = os.path.join(out, "model.nnef")
    try:
        os.sync()
        start = time.perf_counter()
        (export_ours if tool == "ours" else export_t2n)(model, inputs, target)
        seconds = time.perf_counter() - start
        sampled = sampler.stop()
        hwm = rss_status()["VmHWM"]
        written = sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(out) for name in names)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(json.dumps({"tool": tool, "model_bytes": model_bytes, "largest": largest, "rss_empty": rss_empty,
                      "rss_model": rss_model, "hwm": hwm if reset else None, "sampled": sampled, "seconds": seconds,
                      "written": written}))


def measure(tool: str, args) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--worker", tool, "--layers", str(args.layers),
               "--width", str(args.width), "--workdir", args.workdir]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"tool": tool, "error": f"exit {done.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])


def report(result: dict) -> None:
    if "error" in result:
        print(f"  {result['tool']:5} FAILED {result['error']}")
        return
    mb = 1e6
    model = result["model_bytes"]
    peak = result["hwm"] if result["hwm"] is not None else result["sampled"]
    extra = peak - result["rss_model"]
    sampled_extra = result["sampled"] - result["rss_model"]
    print(f"  {result['tool']:5} model {model / mb:7.0f} MB | peak extra {extra / mb:7.0f} MB "
          f"(sampled {sampled_extra / mb:.0f}) = {extra / model:.2f} x model = {extra / result['largest']:.2f} x "
          f"largest tensor | peak total / model {(peak - result['rss_empty']) / model:.2f} | "
          f"{result['seconds']:.1f} s, {result['written'] / mb / result['seconds']:.0f} MB/s written")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--skip-anchors", action="store_true", help="measure nnef_torch only (no torch_to_nnef)")
    parser.add_argument("--workdir", default=tempfile.gettempdir(), help="where the models are written (deleted)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed per measurement")
    parser.add_argument("--worker", choices=("ours", "t2n"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.layers, args.width, args.workdir)
        return
    from importlib import metadata

    import torch
    size = args.layers * (args.width * args.width + args.width) * 4
    now = datetime.datetime.now().isoformat(timespec="seconds")
    print(f"export memory benchmark, {now}; torch {torch.__version__}, "
          f"nnef_torch {metadata.version('nnef-torch')}; {args.layers} x Linear({args.width}, {args.width}) = "
          f"{size / 1e9:.2f} GB float32; writing under {args.workdir}")
    print("NOTE: the MB/s figures depend on the disk and on other processes; peak memory is what this measures.")
    tools = ["ours"] if args.skip_anchors else ["ours", "t2n"]
    for tool in tools:
        report(measure(tool, args))


if __name__ == "__main__":
    main()
