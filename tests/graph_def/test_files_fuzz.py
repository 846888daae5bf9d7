"""Fuzzing graph_def model folders: a valid folder of two networks (graph.nnef, train.nnef, their graph.quant and
train.quant, one .dat per label) is mutated as an attacker would (bytes flipped, files cut short, removed, replaced
by folders, FIFOs or symbolic links in and out of the folder, stray documents added) and loaded whole. Each load
gives the networks or a located `NNEFError`; nothing else escapes, nothing outside the folder is read into a
message, and nothing is written."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from nnef_torch import graph_def
from nnef_torch.errors import NNEFError
from nnef_torch.format import tensor_file

GRAPH = """version 1.0;

graph infer( input ) -> ( output )
{
    input = external<scalar>(shape = [2, 3]);
    w = variable<scalar>(shape = [2, 3], label = 'layer/w');
    b = variable<scalar>(shape = [1, 3], label = 'b');
    s = add(input, w);
    output = add(s, b);
}
"""
TRAIN = GRAPH.replace("graph infer", "graph train").replace("output = add(s, b);", "output = relu(s);")
QUANT = '"output": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n'
FILES = {"graph.nnef": GRAPH.encode(), "graph.quant": QUANT.encode(), "train.nnef": TRAIN.encode(),
         "train.quant": QUANT.replace("output", "s").encode(),
         "layer/w.dat": tensor_file.encode(np.arange(6, dtype=np.float32).reshape(2, 3)),
         "b.dat": tensor_file.encode(np.arange(3, dtype=np.float32).reshape(1, 3))}
SECRET = "root:x:0:0:TOPSECRET:/root:/bin/bash\n"
STRAYS = {"notes.nnef": SECRET, "empty.nnef": "", "bad.quant": SECRET, "other.nnef": GRAPH,
          "binary.nnef": "\x00\x01\x02TOPSECRET"}
_POSIX = sys.platform != "win32" and hasattr(os, "mkfifo")

names = st.sampled_from(sorted(FILES))
edit = st.one_of(
    st.tuples(st.just("flip"), names, st.integers(0, 600), st.integers(1, 255)),
    st.tuples(st.just("truncate"), names, st.integers(0, 600), st.just(0)),
    st.tuples(st.just("remove"), names, st.just(0), st.just(0)),
    st.tuples(st.just("folder"), names, st.just(0), st.just(0)),
    st.tuples(st.just("stray"), st.sampled_from(sorted(STRAYS)), st.just(0), st.just(0)),
    *([st.tuples(st.just("fifo"), names, st.just(0), st.just(0)),
       st.tuples(st.just("link_out"), names, st.just(0), st.just(0)),
       st.tuples(st.just("link_in"), names, st.sampled_from(sorted(FILES)), st.just(0))] if _POSIX else []),
)


def _mutate(root, kind, name, a, b) -> None:
    path = root / name
    if kind == "stray":
        path.write_text(STRAYS[name])
        return
    if not path.is_file() or path.is_symlink():
        return
    if kind == "flip":
        data = bytearray(path.read_bytes())
        if a < len(data):
            data[a] ^= b
            path.write_bytes(bytes(data))
    elif kind == "truncate":
        path.write_bytes(path.read_bytes()[:a])
    else:
        path.unlink()
        if kind == "folder":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "link_out":
            os.symlink(root.parent / "outside.txt", path)
        elif kind == "link_in":
            os.symlink(os.path.relpath(root / a, path.parent), path)


@fuzz(60)
@given(st.lists(edit, min_size=1, max_size=4), st.booleans())
def test_mutated_graph_def_folder_is_read_or_refused_cleanly(tmp_path_factory, edits, exclude):
    top = tmp_path_factory.mktemp("graph_def")
    root = top / "m"
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (top / "outside.txt").write_text(SECRET)
    for kind, name, a, b in edits:
        _mutate(root, kind, name, a, b)
    before = sorted(str(p.relative_to(top)) for p in top.rglob("*"))
    try:
        g = graph_def.load(root, exclude_parameter=exclude)
        assert len(g.networks) >= 1
        if not exclude:
            assert all(np.asarray(value).size for value in g.parameters.values())
    except NNEFError as error:
        shown = str(error)
        assert error.location is not None and error.location.file, shown
        assert "TOPSECRET" not in shown and "bin/bash" not in shown, shown
    assert sorted(str(p.relative_to(top)) for p in top.rglob("*")) == before  # nothing written


@pytest.mark.skipif(not _POSIX, reason="symbolic links and FIFOs need a POSIX system")
def test_unmutated_folder_loads_both_networks(tmp_path):
    root = tmp_path / "m"
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    g = graph_def.load(root)
    assert list(g.networks) == ["infer", "train"] and sorted(g.parameters) == ["b", "layer/w"]
