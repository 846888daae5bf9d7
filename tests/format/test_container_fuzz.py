"""Fuzzing the archive reader: mutated .tar and .tgz models are read whole (`read_model`, every tensor; graph_def
archives of two networks with `graph_def.load`, every document) or refused with a located `NNEFError`; nothing else
escapes, no message quotes a document that is not NNEF, and nothing is written anywhere.

Mutations edit header fields of the uncompressed tar (size, type, name, link name, mode) with a valid checksum, so
that they pass tarfile's checks and reach ours, as well as raw bytes, truncations and the gzip layer.
"""
from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from nnef_torch.errors import NNEFError
from nnef_torch.format import tensor_file
from nnef_torch.reader import read_model

GRAPH = b"""version 1.0;
graph G( input ) -> ( output )
{
    input = external(shape = [2, 3]);
    w = variable(shape = [2, 3], label = 'layer/w');
    b = variable<integer>(shape = [3], label = 'b');
    output = add(input, w);
}
"""
QUANT = b'"output": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n'
MEMBERS = [("graph.nnef", GRAPH), ("graph.quant", QUANT),
           ("layer/w.dat", tensor_file.encode(np.arange(6, dtype=np.float32).reshape(2, 3))),
           ("b.dat", tensor_file.encode(np.arange(3, dtype=np.int64)))]
# Header fields of a ustar block: (offset, length)
FIELDS = {"name": (0, 100), "mode": (100, 8), "size": (124, 12), "type": (156, 1), "linkname": (157, 100),
          "prefix": (345, 155)}
FIELD_VALUES = {
    "name": [b"../evil.dat", b"/etc/passwd", b"layer/../../x.dat", b"graph.nnef", b"b.dat", b"C:x.dat", b"", b"a\\..\\b"],
    "mode": [b"0000777\0", b"9999999\0", b"\xff" * 8],
    "size": [b"00000000000\0", b"77777777777\0", b"00000001000\0", b"00000000001\0", b"\x80" + bytes(11), b"zz\0"],
    "type": [b"0", b"1", b"2", b"3", b"5", b"6", b"7", b"x", b"S", b"L", b"K", b"g"],
    "linkname": [b"../../etc/passwd", b"graph.nnef", b""],
    "prefix": [b"..", b"/abs", b"layer"],
}


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _header_offsets(data: bytes) -> list[int]:
    offsets, at = [], 0
    while at + 512 <= len(data) and data[at:at + 512].strip(b"\0"):
        offsets.append(at)
        try:
            size = int(data[at + 124:at + 135].strip(b"\0 ") or b"0", 8)
        except ValueError:  # an edited size: the headers after it cannot be found
            break
        at += 512 + -(-size // 512) * 512
    return offsets


def _set_field(data: bytearray, header: int, field: str, value: bytes) -> None:
    offset, length = FIELDS[field]
    data[header + offset:header + offset + length] = value[:length].ljust(length, b"\0")
    block = data[header:header + 512]
    block[148:156] = b" " * 8
    data[header + 148:header + 156] = b"%06o\0 " % sum(block)


edit = st.one_of(
    st.tuples(st.just("field"), st.integers(0, 3), st.sampled_from(sorted(FIELDS)), st.integers(0, 20)),
    st.tuples(st.just("flip"), st.integers(0, 4096), st.integers(1, 255), st.just(0)),
    st.tuples(st.just("truncate"), st.integers(0, 4096), st.just(0), st.just(0)),
)


@fuzz(200)
@given(st.lists(edit, max_size=4), st.booleans(), st.permutations(range(len(MEMBERS))))
def test_mutated_archive_is_read_or_refused_cleanly(tmp_path_factory, edits, gzipped, order):
    data = bytearray(_tar([MEMBERS[i] for i in order]))
    for kind, a, b, c in edits:
        if kind == "field":
            headers = _header_offsets(bytes(data))
            if headers:
                values = FIELD_VALUES[b]
                _set_field(data, headers[a % len(headers)], b, values[c % len(values)])
        elif kind == "flip" and a < len(data):
            data[a] ^= b
        elif kind == "truncate":
            del data[a:]
    folder = tmp_path_factory.mktemp("archive")
    path = folder / ("m.tgz" if gzipped else "m.tar")
    path.write_bytes(_gzip(bytes(data)) if gzipped else bytes(data))
    try:
        model = read_model(path)
        assert set(model.tensors) == {"layer/w", "b"}
    except NNEFError as error:
        assert error.location is not None and error.location.file, str(error)
        str(error)
    assert sorted(os.listdir(folder)) == [path.name]  # nothing extracted, nothing written beside it
    assert not (Path(folder).parent / "evil.dat").exists()


def _gzip(data: bytes) -> bytes:
    import gzip
    return gzip.compress(data, mtime=0)


# graph_def archives: graph.nnef and another network beside it (train.nnef, train.quant), sharing the .dat members;
# loaded whole by graph_def.load, which reads every document of the archive
TRAIN = GRAPH.replace(b"graph G", b"graph T").replace(b"output = add(input, w);", b"output = relu(input);")
GRAPH_DEF_MEMBERS = [*MEMBERS, ("train.nnef", TRAIN), ("train.quant", QUANT)]
STRAY = ("notes.nnef", b"root:x:0:0:TOPSECRET:/root:/bin/bash\n")  # a document that is no NNEF


@fuzz(100)
@given(st.lists(edit, max_size=4), st.booleans(), st.permutations(range(len(GRAPH_DEF_MEMBERS))),
       st.integers(0, len(GRAPH_DEF_MEMBERS)), st.booleans())
def test_mutated_graph_def_archive_is_read_or_refused_cleanly(tmp_path_factory, edits, gzipped, order, dropped,
                                                              stray):
    from nnef_torch import graph_def

    members = [GRAPH_DEF_MEMBERS[i] for i in order if i != dropped] + ([STRAY] if stray else [])  # one left out
    data = bytearray(_tar(members))
    for kind, a, b, c in edits:
        if kind == "field":
            headers = _header_offsets(bytes(data))
            if headers:
                values = FIELD_VALUES[b]
                _set_field(data, headers[a % len(headers)], b, values[c % len(values)])
        elif kind == "flip" and a < len(data):
            data[a] ^= b
        elif kind == "truncate":
            del data[a:]
    folder = tmp_path_factory.mktemp("graph_def_archive")
    path = folder / ("m.tgz" if gzipped else "m.tar")
    path.write_bytes(_gzip(bytes(data)) if gzipped else bytes(data))
    try:
        g = graph_def.load(path)
        assert {"G", "T"} >= set(g.networks) and "G" in g.networks
    except NNEFError as error:
        shown = str(error)
        assert error.location is not None and error.location.file, shown
        assert "TOPSECRET" not in shown and "bin/bash" not in shown, shown
    assert sorted(os.listdir(folder)) == [path.name]
    assert not (Path(folder).parent / "evil.dat").exists()
