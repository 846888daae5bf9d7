"""Regenerate bench/data/resnet50_v1-symbol.json.gz, the ResNet-50 symbol of bench/bench_mxnet.py, from MXNet itself.

MXNet must never be installed in the project's environment; use the scratch venv (MXNet 1.9.1 needs numpy < 1.24):

    python -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install numpy==1.23.5 mxnet==1.9.1
    /tmp/mxvenv/bin/python bench/make_mxnet_resnet50.py

It builds Gluon's model-zoo `resnet50_v1` (`classes=1000`), hybridizes it, runs it once on a 1x3x224x224 batch (which
completes the deferred shapes) and exports it with `HybridBlock.export` into a temporary folder; the symbol JSON it
wrote is kept, gzipped (150 KB -> 6 KB; written with mtime 0, so the same symbol gives the same bytes). The
`.params` file (~100 MB) is not kept: the benchmark writes its own from seeded arrays.

Then it checks the benchmark's `.params` writer (bench/mxnet_params.py) against MXNet: the names and shapes of the
net's parameters (`arg:` and `aux:` as Gluon exports them) get seeded arrays (`seeded_params`), which
`write_ndarray_list` and `mx.nd.save` each write to a file; the two files must be byte for byte equal, and
`mx.nd.load` of the writer's file must give the same names and arrays. Last run (MXNet 1.9.1, numpy 1.23.5): 299
arrays (193 `arg:`, 106 `aux:`), 102,540,706 bytes, identical, and `mx.nd.load` reads back every array exactly.
`--skip-check` leaves the check out.
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
import tempfile

import mxnet as mx
import numpy as np
from mxnet.gluon.model_zoo import vision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from mxnet_params import seeded_params, write_ndarray_list  # noqa: E402

NET = "resnet50_v1"
OUT = os.path.join(HERE, "data", f"{NET}-symbol.json.gz")
SEED = 50


def export(folder: str) -> tuple[str, dict[str, tuple[int, ...]], set[str]]:
    """Export the net into `folder`; return the symbol's path, the parameter shapes and the aux names."""
    net = vision.get_model(NET, classes=1000)
    net.initialize()
    net.hybridize()
    net(mx.nd.zeros((1, 3, 224, 224)))
    prefix = os.path.join(folder, NET)
    net.export(prefix, epoch=0)
    symbol = mx.sym.load(prefix + "-symbol.json")
    aux = set(symbol.list_auxiliary_states())
    shapes = {name: tuple(param.shape) for name, param in net.collect_params().items()}
    arguments = [name for name in symbol.list_arguments() if name != "data"]
    if set(shapes) != set(arguments) | aux:
        differ = sorted(set(shapes) ^ (set(arguments) | aux))
        raise SystemExit(f"Gluon's parameters and the symbol's arguments differ: {differ}")
    return prefix + "-symbol.json", shapes, aux


def check_writer(folder: str, shapes: dict[str, tuple[int, ...]], aux: set[str]) -> None:
    arrays = seeded_params(shapes, aux, SEED)
    ours, theirs = os.path.join(folder, "writer.params"), os.path.join(folder, "mxnet.params")
    size = write_ndarray_list(ours, arrays)
    mx.nd.save(theirs, {name: mx.nd.array(array, dtype=array.dtype) for name, array in arrays.items()})
    with open(ours, "rb") as a, open(theirs, "rb") as b:
        same = a.read() == b.read()
    print(f"writer: {len(arrays)} arrays, {size:,} bytes; mx.nd.save wrote {os.path.getsize(theirs):,} bytes; "
          f"byte for byte {'identical' if same else 'DIFFERENT'}")
    loaded = mx.nd.load(ours)
    if list(loaded) != list(arrays):
        raise SystemExit(f"mx.nd.load gives other names: {sorted(set(loaded) ^ set(arrays))[:10]}")
    for name, array in arrays.items():
        back = loaded[name].asnumpy()
        if back.dtype != array.dtype or back.shape != array.shape or not np.array_equal(back, array):
            raise SystemExit(f"mx.nd.load gives another array for {name}: {back.dtype} {back.shape}")
    print(f"mx.nd.load of the writer's file: the same {len(loaded)} names and arrays")
    if not same:
        raise SystemExit("the writer's file differs from mx.nd.save's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-check", action="store_true", help="do not check the .params writer against MXNet")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="mxnet_resnet50_")
    try:
        symbol, shapes, aux = export(folder)
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(symbol, "rb") as source, open(OUT, "wb") as raw, \
                gzip.GzipFile(filename=os.path.basename(symbol), mode="wb", fileobj=raw, mtime=0) as target:
            shutil.copyfileobj(source, target)
        print(f"MXNet {mx.__version__}: {NET} symbol ({os.path.getsize(symbol):,} bytes, {len(shapes)} parameters, "
              f"{len(aux)} aux) -> {os.path.relpath(OUT)} ({os.path.getsize(OUT):,} bytes)")
        if not args.skip_check:
            check_writer(folder, shapes, aux)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
