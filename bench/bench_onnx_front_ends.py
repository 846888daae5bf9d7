"""Three ways to bring an ONNX model into PyTorch or NNEF, counted on 13 held-out .onnx files.

    python bench/bench_onnx_front_ends.py                      # about 3-5 minutes on 2 shared cores
    python bench/bench_onnx_front_ends.py --remake --timeout 300
    python bench/bench_onnx_front_ends.py --onnx2torch-python /path/to/python --only gru_legacy,mlp_dynamic_legacy

Setup. The main environment needs torch, onnx, onnxscript (the dynamo exporter), onnxruntime, nnef, nnef_tools
(with onnxsim for --fold-constants) and tract: the `bench` and `test` extras. onnx2torch must NOT go into it (its
requirements drag a CUDA torch and torchvision): the script makes a scratch venv, by default /tmp/onnx2torch-venv,
with `python -m venv --system-site-packages` and `pip install --no-deps onnx2torch`, or uses --onnx2torch-python.
onnx2torch imports torchvision at import time, for NonMaxSuppression and RoiAlign only; the PyPI torchvision wheel is
built for a CUDA torch and refuses to import next to the CPU torch here, so when the venv has no importable
torchvision the script writes a stub package `torchvision` into it (`torchvision.ops.nms`, `roi_align` and
`box_convert` raise NotImplementedError; no held-out file uses them). If the venv cannot be made, the onnx2torch
columns read `skip` and the reason is printed.

The held-out files are written by this script (seed 0, CPU), into --cache (default bench/.cache/onnx_heldout/, not
committed; --remake writes them again), each with its example inputs, and onnxruntime's outputs on them (graph
optimizations off, so quantized graphs run their QuantizeLinear / DequantizeLinear nodes as written):

- resnet_legacy: a ResNet-style CNN (conv-BN-ReLU stem, two basic blocks, one strided with a 1x1 shortcut,
  global average pool, linear; batch norms with non-trivial statistics), torch.onnx legacy (dynamo=False, opset 17);
- resnet_dynamo: the same CNN, torch.onnx dynamo (dynamo=True, opset 18);
- mobilenet_legacy: a MobileNetV3-style block: strided conv + HardSwish, depthwise conv + BN + HardSwish,
  squeeze-excite ending in HardSigmoid, pointwise conv + BN, residual, mean, linear; legacy;
- transformer_dynamo: nn.TransformerEncoderLayer(16, 2 heads, feed-forward 32, batch_first); dynamo (the legacy
  exporter fails on it in torch 2.13: "scaled_dot_product_attention(): argument 'is_causal' must be bool");
- bilstm_legacy: a 2-layer bidirectional nn.LSTM classifier (last step -> linear); legacy;
- gru_legacy: an nn.GRU, its final hidden state -> linear; legacy;
- lstm_dynamo: an nn.LSTM tagger (every step -> linear); dynamo (it exports to one ONNX LSTM node);
- cumsum_gather_legacy: int64 tokens -> nn.Embedding (Gather) -> torch.cumsum -> torch.gather at fixed positions
  (GatherElements) -> linear; legacy;
- loop_if_scripted_legacy: torch.jit.script of a module with a loop over range(x.size(0)) (3 trips; the exporter
  unrolls a literal range(3), this stays an ONNX Loop with a constant trip count) and a data-dependent `if` (If);
  legacy;
- mlp_dynamic_legacy: an MLP with LayerNorm and GELU; legacy with dynamic_axes (batch), also checked at batch 5;
- split_mean_dynamo: linear -> torch.split -> means over two different axes -> cat: opset-18 Split and ReduceMean
  with their sizes and axes as inputs; dynamo;
- cnn_qdq: a small CNN (conv-ReLU twice, max pool, linear; legacy), then onnxruntime.quantization.quantize_static
  in QDQ format, per-channel int8 weights, int8 activations, 16 seeded calibration inputs;
- cnn_qoperator: the same CNN, quantize_static in QOperator format, per-channel, Conv and MatMul only (QLinearConv
  and QuantizeLinear / DequantizeLinear; no com.microsoft ops; the linear layer stays float).

The models live in bench/onnx_heldout_models.py.

Contenders, each run per file in a subprocess of its own with --timeout seconds (a hang or a crash of one does not
stop the run; the checks finished before it are kept):

- onnx2torch (in its venv): runs = `onnx2torch.convert(path)` and the module's outputs on the example inputs match
  onnxruntime; trains = a backward pass of the outputs' sum gives every parameter a finite gradient (there must be
  some), and for mlp_dynamic_legacy the module also matches onnxruntime at batch 5.
- nnef_tools: `python -m nnef_tools.convert --input-format onnx --output-format nnef --fold-constants` (in process,
  with --input-shapes only where an input has a symbolic dimension); NNEF runs = the Khronos executor
  `nnef.Session(folder, lowered=[the document's fragments + the compound standard ops])` matches onnxruntime;
  tract = `tract.nnef().load(folder).into_runnable().run(inputs)` matches onnxruntime.
- nnef_torch: runs = `nnef_torch.load(path)` matches onnxruntime; trains = the outputs' sum gives every float
  Parameter a finite gradient (there must be some), one SGD step changes the output, and for mlp_dynamic_legacy the
  module also matches at batch 5; NNEF = `nnef_torch.save(module, folder, inputs)` of a freshly loaded module,
  called once on the inputs first (symbolic extents bind at the first call, and saving asks for them), and
  `nnef.Session` on that folder matches onnxruntime; where it does not, the reason also says whether tract
  matches. A quantized file's folder holds graph.quant, which the Khronos executor ignores: there it must give the
  float graph (the module with its fake quantization off), and the folder read back by `nnef_torch.load` must match
  onnxruntime (tract 0.23 types graph.quant tensors as integers and refuses graphs that mix them with floats).

"Matches" is np.allclose(rtol=1e-3, atol=1e-4) with equal shapes, output by output. Integer inputs go to the
Khronos executor as int32 (its `integer`) and to tract as int64. Every failed check is recorded in one line
(exception type and the first line of its message); `-` means the check was not tried because an earlier step of
that contender failed. Torch runs single-threaded in the workers. Nothing here asserts a figure. The table and its
totals go to bench/results/onnx_front_ends.txt (or --out).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from onnx_front_end_checks import WORKERS, Case, NotTried, failure  # beside this script

HERE = Path(__file__).resolve().parent
DEFAULT_CACHE = HERE / ".cache" / "onnx_heldout"
DEFAULT_OUT = HERE / "results" / "onnx_front_ends.txt"
DEFAULT_VENV = Path("/tmp/onnx2torch-venv")
SEED = 0

# contender -> its checks, in the order they run; a column of the table each
CHECKS = {"onnx2torch": ("runs", "trains"), "nnef_tools": ("NNEF runs", "tract"),
          "nnef_torch": ("runs", "trains", "NNEF", "tract")}

TORCHVISION_STUB = '''"""A stub written by bench/bench_onnx_front_ends.py: onnx2torch imports torchvision for NMS
and RoiAlign only."""
'''
TORCHVISION_OPS_STUB = '''"""A stub written by bench/bench_onnx_front_ends.py: the real ops are not installed here."""


def _missing(*args, **kwargs):
    raise NotImplementedError("torchvision is a stub in this venv (see bench/bench_onnx_front_ends.py)")


nms = roi_align = box_convert = _missing
'''


# ---------------------------------------------------------------- the held-out files (main environment only)


def models() -> dict[str, Callable[[Path], dict[str, Any]]]:
    """name -> maker(path): writes the .onnx file and returns its example inputs (name -> array) and optionally
    `other` inputs at another batch."""
    from onnx_heldout_models import MAKERS
    return MAKERS


def make_files(cache: Path, remake: bool, only: list[str]) -> dict[str, str]:
    """Writes the missing (or, with remake, all) held-out files with their inputs and onnxruntime's outputs.
    Returns name -> failure reason for files that could not be made."""
    import logging

    import torch
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed", once per export
    cache.mkdir(parents=True, exist_ok=True)
    failures = {}
    for name, maker in models().items():
        if name not in only or (not remake and (cache / f"{name}.npz").exists()):
            continue
        torch.manual_seed(SEED)
        np.random.seed(SEED)
        path = cache / f"{name}.onnx"
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                made = maker(path)
            arrays = {f"in:{k}": v for k, v in made["inputs"].items()}
            arrays.update({f"out:{i}": v for i, v in enumerate(onnxruntime_outputs(path, made["inputs"]))})
            if "other" in made:
                arrays.update({f"other_in:{k}": v for k, v in made["other"].items()})
                outputs = onnxruntime_outputs(path, made["other"])
                arrays.update({f"other_out:{i}": v for i, v in enumerate(outputs)})
            np.savez(cache / f"{name}.npz", **arrays)
        except Exception as error:  # noqa: BLE001  (reported)
            failures[name] = failure(error)
    return failures


def onnxruntime_outputs(path: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return [np.asarray(x) for x in session.run(None, inputs)]


# ---------------------------------------------------------------- the onnx2torch venv


def onnx2torch_python(args: argparse.Namespace) -> tuple[str | None, str]:
    """(the python that imports onnx2torch, a note) or (None, why the columns are skipped)."""
    python = args.onnx2torch_python or str(args.onnx2torch_venv / "bin" / "python")
    try:
        if not args.onnx2torch_python:
            make_onnx2torch_venv(args.onnx2torch_venv)
        problem = _probe(python, "import onnx2torch")
        if problem is not None:
            return None, f"{python} cannot import onnx2torch: {problem}"
        version = _output(python, "from importlib import metadata; print(metadata.version('onnx2torch'))")
        stub = "bench_onnx_front_ends" in _output(python, "import torchvision; print(torchvision.__doc__)")
    except (OSError, subprocess.SubprocessError, RuntimeError) as error:
        return None, f"no python with onnx2torch: {failure(error)}"
    return python, f"onnx2torch {version} in {python}" + (" (torchvision is the stub)" if stub else "")


def make_onnx2torch_venv(venv: Path) -> None:
    """A venv that sees the main environment's packages, with onnx2torch (and, if need be, the stub torchvision)."""
    python = str(venv / "bin" / "python")
    if not Path(python).exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                       capture_output=True, timeout=300)
    if _probe(python, "import onnx2torch.utils") is not None:  # not installed yet (onnx2torch needs torchvision)
        done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "onnx2torch"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError("pip install --no-deps onnx2torch failed: " + _last_line(done.stderr))
    if _probe(python, "import torchvision.ops") is not None:
        package = Path(_output(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])"), "torchvision")
        (package / "ops").mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(TORCHVISION_STUB + "from . import ops  # noqa: F401\n")
        (package / "ops" / "__init__.py").write_text(TORCHVISION_OPS_STUB)


def _probe(python: str, code: str) -> str | None:
    """None if `code` runs in `python`, else the last line it printed."""
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300)
    return None if done.returncode == 0 else _last_line(done.stderr)


def _output(python: str, code: str) -> str:
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300)
    return done.stdout.strip() or "?"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no message)"


# ---------------------------------------------------------------- running one contender on one file


def run_contender(contender: str, python: str, cache: Path, name: str, scratch: Path,
                  timeout: float) -> dict[str, str]:
    """check -> 'ok', a failure reason, or '-' (not tried): the worker's JSON lines, plus what became of the check
    it was in when it timed out or died."""
    result = scratch / f"{contender}-{name}.jsonl"
    result.unlink(missing_ok=True)
    command = [python, str(Path(__file__).resolve()), "--worker", contender, "--cache", str(cache), "--only", name,
               "--scratch", str(scratch / f"{contender}-{name}"), "--result", str(result)]
    ended = ""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=HERE.parent)
        if done.returncode != 0:
            ended = f"process died (exit code {done.returncode}): {_last_line(done.stderr)}"
    except subprocess.TimeoutExpired:
        ended = f"timed out after {timeout:g} s"
    found: dict[str, str] = {}
    started = None
    if result.exists():
        for line in result.read_text().splitlines():
            record = json.loads(line)
            if "started" in record:
                started = record["started"]
            else:
                found[record["check"]] = record["result"]
    if started is not None and started not in found:
        found[started] = ended or "worker stopped without a result"
    for check in CHECKS[contender]:
        found.setdefault(check, ended or "-")
    return found


def worker(contender: str, cache: Path, name: str, scratch: Path, result: Path) -> None:
    """Runs a contender's checks on one file, appending one JSON line as each starts and ends."""
    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    data = np.load(cache / f"{name}.npz")
    case = Case(cache / f"{name}.onnx", scratch,
                [data[k] for k in data.files if k.startswith("in:")],
                [data[k] for k in data.files if k.startswith("out:")],
                [data[k] for k in data.files if k.startswith("other_in:")],
                [data[k] for k in data.files if k.startswith("other_out:")])
    scratch.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {}
    with result.open("a") as log:
        for check in CHECKS[contender]:
            log.write(json.dumps({"started": check}) + "\n")
            log.flush()
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    WORKERS[contender][check](case, state)
                outcome = "ok"
            except NotTried as reason:
                outcome = "-" if not str(reason) else f"- ({reason})"
            except BaseException as error:  # noqa: BLE001  (recorded)
                outcome = failure(error).replace(f"{cache}{os.sep}", "")
            log.write(json.dumps({"check": check, "result": outcome}) + "\n")
            log.flush()


# ---------------------------------------------------------------- the report


def report(names: list[str], results: dict[str, dict[str, dict[str, str]]], notes: list[str]) -> str:
    columns = [(c, check) for c, checks in CHECKS.items() for check in checks]
    header = "| file | " + " | ".join(f"{c} {check}" for c, check in columns) + " |"
    lines = [header, "|" + " --- |" * (len(columns) + 1)]
    for name in names:
        cells = [_cell(results[name][c][check]) for c, check in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    count = {(c, check): sum(results[n][c][check] == "ok" for n in names) for c, check in columns}
    total = len(names)
    lines += ["", f"onnx2torch ran {count['onnx2torch', 'runs']}/{total} and trained "
              f"{count['onnx2torch', 'trains']}/{total}; nnef_tools converted {count['nnef_tools', 'NNEF runs']}/"
              f"{total} to NNEF that runs (tract ran {count['nnef_tools', 'tract']}/{total} of them); nnef_torch ran "
              f"{count['nnef_torch', 'runs']}/{total}, trained {count['nnef_torch', 'trains']}/{total}, wrote NNEF "
              f"that runs {count['nnef_torch', 'NNEF']}/{total} (saved with target='tract', tract ran "
              f"{count['nnef_torch', 'tract']}/{total})", ""]
    lines += [f"- {note}" for note in notes]
    for c, checks in CHECKS.items():
        reasons = [f"  - {n} {check}: {results[n][c][check]}" for n in names for check in checks
                   if results[n][c][check] != "ok" and _cell(results[n][c][check]) == "no"]
        if reasons:
            lines += [f"- {c} failures:", *reasons]
    return "\n".join(lines)


def _cell(outcome: str) -> str:
    return {"ok": "yes", "skip": "skip"}.get(outcome, "-" if outcome.startswith("-") else "no")


def versions() -> str:
    found = []
    for package in ("torch", "onnx", "onnxscript", "onnxruntime", "nnef", "nnef_tools", "tract"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} not installed")
    return ", ".join(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the held-out files are written")
    parser.add_argument("--remake", action="store_true", help="write the held-out files again")
    parser.add_argument("--only", help="comma-separated file names (default: all 13)")
    parser.add_argument("--contenders", default=",".join(CHECKS), help="comma-separated, default all three")
    parser.add_argument("--timeout", type=float, default=240, help="seconds per contender per file")
    parser.add_argument("--onnx2torch-python", help="a python that imports onnx2torch (default: make a venv)")
    parser.add_argument("--onnx2torch-venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results file")
    parser.add_argument("--worker", choices=sorted(CHECKS), help=argparse.SUPPRESS)
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.cache, args.only, args.scratch, args.result)
        return 0
    sys.path.insert(0, str(HERE))
    names = list(models()) if not args.only else args.only.split(",")
    start = time.perf_counter()
    made_failures = make_files(args.cache, args.remake, names)
    notes = [f"held-out files: {args.cache} ({time.perf_counter() - start:.0f} s to make what was missing)"]
    notes += [f"{name} could not be made: {reason}" for name, reason in made_failures.items()]
    names = [n for n in names if n not in made_failures]
    contenders = args.contenders.split(",")
    o2t_python, o2t_note = onnx2torch_python(args) if "onnx2torch" in contenders else (None, "not asked for")
    notes.append(o2t_note if o2t_python else f"onnx2torch skipped: {o2t_note}")
    import tempfile
    results: dict[str, dict[str, dict[str, str]]] = {}
    with tempfile.TemporaryDirectory(prefix="onnx_front_ends_") as tmp:
        for name in names:
            results[name] = {}
            for contender, checks in CHECKS.items():
                python = o2t_python if contender == "onnx2torch" else sys.executable
                if contender not in contenders or python is None:
                    results[name][contender] = {check: "skip" for check in checks}
                    continue
                begun = time.perf_counter()
                results[name][contender] = run_contender(contender, python, args.cache, name, Path(tmp),
                                                         args.timeout)
                print(f"  {name:26} {contender:11} {time.perf_counter() - begun:5.1f} s  "
                      + ", ".join(f"{k}: {_cell(v)}" for k, v in results[name][contender].items()), flush=True)
    notes.append(f"seconds: {time.perf_counter() - start:.0f} in all; per contender per file timeout "
                 f"{args.timeout:g} s; load average {os.getloadavg()[0]:.2f}")
    title = (f"# python bench/bench_onnx_front_ends.py {' '.join(argv if argv is not None else sys.argv[1:])}"
             f"  (seed {SEED}; {versions()}; {datetime.date.today()})")
    text = title.rstrip() + "\n\n" + report(names, results, notes)
    print("\n" + text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
