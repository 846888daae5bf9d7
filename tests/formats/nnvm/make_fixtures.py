"""Regenerate the MXNet fixtures of `fixtures/` from MXNet itself (the real producer of `-symbol.json` and `.params`).

MXNet must never be installed in the project's environment; use a scratch venv (MXNet 1.9.1 needs numpy < 1.24):

    python -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install numpy==1.23.5 mxnet==1.9.1
    /tmp/mxvenv/bin/python tests/formats/nnvm/make_fixtures.py            # everything
    /tmp/mxvenv/bin/python tests/formats/nnvm/make_fixtures.py --only bn_fix_gamma --only resnet18_v1
    /tmp/mxvenv/bin/python tests/formats/nnvm/make_fixtures.py --part ops          # or --part zoo

Operator cases (`mxnet_op_cases.py`) write `fixtures/ops/<case>-symbol.json`, `<case>-0000.params` (with `mx.nd.save`
and the `arg:` / `aux:` prefixes that `Module.save_checkpoint` writes) and `<case>.npz`: the inputs by name and
MXNet's outputs `output0`, `output1`, ... of a forward pass with `is_train=False`. Parameters are random, drawn from
the case's own seed, unless the case fixes them.

Model-zoo cases (`mxnet_zoo_cases.py`) write `fixtures/zoo/<net>-symbol.json` (Gluon's `export` after
`hybridize`), `<net>.params-shapes.json` and `<net>.npz` (MXNet's output and checksums). Their parameters and input
come from seeds through `zoo_params.py`, which the tests import too, so the large `.params` files are not committed;
nets marked `real_params` keep Gluon's `<net>-0000.params` as well.

Each folder's `manifest.json` lists its cases (family, input names in argument order, output count; the net's input
shape and seed). `--only` regenerates some cases and keeps the others; a whole run also removes the files of cases
that are gone. The few cases MXNet's MKLDNN kernels refuse run in a child process with `MXNET_MKLDNN_ENABLED=0`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import mxnet as mx
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/, for `formats.nnvm.*`

from formats.nnvm import mxnet_more_cases, mxnet_rnn_cases  # noqa: E402, F401  (register their cases)
from formats.nnvm.mxnet_op_cases import CASES, Built  # noqa: E402
from formats.nnvm.mxnet_training_cases import make_training_fixture  # noqa: E402
from formats.nnvm.mxnet_zoo_cases import NETS, Net, run_net  # noqa: E402

FIXTURES = HERE / "fixtures"


def default_param(name: str, shape: tuple[int, ...], rs: np.random.RandomState) -> np.ndarray:
    """A random parameter of the role its name says: positive variances, scales around 1, He-scaled weights."""
    if name.endswith(("_moving_var", "_running_var")):
        values = rs.uniform(0.5, 2.0, shape)
    elif name.endswith("_gamma"):
        values = rs.uniform(0.5, 2.0, shape)
    elif name.endswith("_weight") and len(shape) > 1:
        values = rs.standard_normal(shape) * np.sqrt(2.0 / max(int(np.prod(shape[1:])), 1))
    else:
        values = rs.standard_normal(shape) * 0.5
    return values.astype(np.float32)


def make_op_case(name: str, folder: Path) -> dict:
    family, build, _ = CASES[name]
    rs = np.random.RandomState(zlib.crc32(name.encode("utf-8")))
    built: Built = build(rs)
    symbol = built.symbol
    arg_shapes, _, aux_shapes = symbol.infer_shape(**{k: v.shape for k, v in built.inputs.items()})
    args, aux, params = {}, {}, {}
    for arg, shape in zip(symbol.list_arguments(), arg_shapes):
        if arg in built.inputs:
            args[arg] = mx.nd.array(built.inputs[arg], dtype=built.inputs[arg].dtype)
            continue
        value = built.params.get(arg)
        value = default_param(arg, tuple(shape), rs) if value is None else value
        assert value.shape == tuple(shape), (name, arg, value.shape, shape)
        args[arg] = mx.nd.array(value)
        params["arg:" + arg] = args[arg]
    for state, shape in zip(symbol.list_auxiliary_states(), aux_shapes):
        value = built.params.get(state)
        value = default_param(state, tuple(shape), rs) if value is None else value
        aux[state] = mx.nd.array(value)
        params["aux:" + state] = aux[state]
    unknown = set(built.params) - set(args) - set(aux)
    assert not unknown, f"{name}: fixed parameters {unknown} are not arguments of the symbol"
    executor = symbol.bind(mx.cpu(), args=args, aux_states=aux, grad_req="null")
    outputs = [output.asnumpy() for output in executor.forward(is_train=False)]
    symbol.save(str(folder / f"{name}-symbol.json"))
    mx.nd.save(str(folder / f"{name}-0000.params"), params)
    arrays = {**{k: np.asarray(v) for k, v in built.inputs.items()},
              **{f"output{i}": output for i, output in enumerate(outputs)}}
    np.savez_compressed(folder / f"{name}.npz", **arrays)
    inputs = [arg for arg in symbol.list_arguments() if arg in built.inputs and arg not in built.unused]
    return {"family": family, "inputs": inputs, "outputs": len(outputs)}


def make_zoo_case(net: Net, folder: Path) -> dict:
    prefix = folder / net.name
    shapes, arrays = run_net(net, str(prefix))
    params = folder / f"{net.name}-0000.params"
    if not net.real_params:
        params.unlink()
    (folder / f"{net.name}.params-shapes.json").write_text(json.dumps(shapes, indent=0) + "\n")
    np.savez_compressed(folder / f"{net.name}.npz", **arrays)
    return {"input_shape": list(net.input_shape), "seed": net.seed, "real_params": net.real_params}


def _write_manifest(folder: Path, entries: dict, cases: set[str] | None) -> None:
    """Merge `entries` into the folder's manifest; with `cases` (all there are), drop the others and their files."""
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    manifest.update(entries)
    if cases is not None:
        manifest = {name: entry for name, entry in manifest.items() if name in cases}
    path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    if cases is not None:
        for stale in sorted(p for p in folder.iterdir() if p.name != "manifest.json" and _case_of(p.name) not in cases):
            stale.unlink()
            print(f"removed {folder.name}/{stale.name}")


def _case_of(file: str) -> str:
    for suffix in ("-symbol.json", "-0000.params", ".params-shapes.json", ".npz"):
        if file.endswith(suffix):
            return file[:-len(suffix)]
    return file


def _make_ops(names: list[str], whole: bool) -> None:
    """Run the cases MKLDNN may run here, and the others in a child process with MKLDNN off (MXNet reads
    MXNET_MKLDNN_ENABLED once, at start)."""
    folder = FIXTURES / "ops"
    folder.mkdir(parents=True, exist_ok=True)
    child = os.environ.get("MXNET_MKLDNN_ENABLED") == "0"
    made = {}
    for name in names:
        if child or CASES[name][2]:
            made[name] = make_op_case(name, folder)
            print(f"ops/{name}: {made[name]['outputs']} output(s)")
    _write_manifest(folder, made, set(CASES) if whole and not child else None)
    without = [name for name in names if not CASES[name][2]]
    if without and not child:
        env = {**os.environ, "MXNET_MKLDNN_ENABLED": "0", "MXNET_STORAGE_FALLBACK_LOG_VERBOSE": "0"}
        subprocess.run([sys.executable, __file__, *(f"--only={name}" for name in without)], env=env, check=True)


def _make_zoo(names: list[str], whole: bool) -> None:
    folder = FIXTURES / "zoo"
    folder.mkdir(parents=True, exist_ok=True)
    made = {}
    for name in names:
        made[name] = make_zoo_case(NETS[name], folder)
        print(f"zoo/{name}: input {list(NETS[name].input_shape)}")
    _write_manifest(folder, made, set(NETS) if whole else None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="a case or net to regenerate (repeatable)")
    parser.add_argument("--part", choices=("ops", "zoo", "training"),
                        help="regenerate only the operator, model-zoo or training cases")
    args = parser.parse_args(argv)
    only = set(args.only or [])
    unknown = only - set(CASES) - set(NETS)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}")
    if args.part in (None, "ops"):
        _make_ops([name for name in CASES if not only or name in only], whole=not only)
    if args.part in (None, "zoo") and os.environ.get("MXNET_MKLDNN_ENABLED") != "0":
        _make_zoo([name for name in NETS if not only or name in only], whole=not only)
    if args.part in (None, "training") and not only and os.environ.get("MXNET_MKLDNN_ENABLED") != "0":
        make_training_fixture(FIXTURES / "training")


if __name__ == "__main__":
    main()
