"""The wrong kind of file given as a model (nnef_torch.formats.kinds): each is named for what it is, with what to
pass instead, by the API and the command line alike, never as 'not valid UTF-8'."""
from __future__ import annotations

import re
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from cli.helpers import cli

import nnef_torch
from nnef_torch.errors import NNEFError
from nnef_torch.format import tensor_file
from nnef_torch.formats.kinds import identify
from nnef_torch.reader import read_model

GRAPH = "version 1.0;\n\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [2]);\n    y = relu(x);\n}\n"
# a ModelProto's first fields: ir_version 7, producer_name "pytorch", producer_version "2.0", graph {}
ONNX = bytes([0x08, 0x07, 0x12, 0x07]) + b"pytorch" + bytes([0x1a, 0x03]) + b"2.0" + bytes([0x3a, 0x00])


def write_zip(path: Path, member: str, data: bytes = b"") -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, data)


# file name -> (how to write it, what the message must say)
KINDS = {
    "w.dat": (lambda p: p.write_bytes(tensor_file.encode(np.zeros(3, np.float32))),
              r"an NNEF tensor file \(\.dat.*not a model: pass the folder that holds graph\.nnef"),
    "resnet-0000.params": (lambda p: p.write_bytes(struct.pack("<QQQ", 0x112, 0, 0)),
                           r"MXNet parameters \(\.params\), not a model: pass the resnet-symbol\.json beside it"),
    "a.npy": (lambda p: np.save(p, np.zeros(3)), r"a numpy array \(\.npy\), not a model"),
    "b.npz": (lambda p: np.savez(p, x=np.zeros(3)), r"a numpy \.npz archive of arrays, not a model"),
    "model.zip": (lambda p: write_zip(p, "graph.nnef", GRAPH.encode()),
                  r"a zip archive: NNEF archives are \.tar, \.tgz or \.tar\.gz"),
    "m.pt": (lambda p: torch.save({"w": torch.zeros(2)}, p), r"a PyTorch checkpoint \(torch\.save\)"),
    "legacy.pt": (lambda p: torch.save({"w": torch.zeros(2)}, p, _use_new_zipfile_serialization=False),
                  r"a Python pickle .*never unpickles"),
    "graph.quant": (lambda p: p.write_text('"x": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n'),
                    r"a graph\.quant .*not a graph: pass the folder that holds graph\.nnef"),
    "m.wts": (lambda p: p.write_text("1\nfc 0 2 3f800000 3f800000\n"),
              r"LightNet weights \(\.wts\), not a model: pass the LightNet \.json beside it"),
    "m.h5": (lambda p: p.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(64)), r"an HDF5 file"),
    "m.bin": (lambda p: p.write_bytes(b"\x01\x02\x00\xff" * 8), r"a binary file of no kind nnef_torch reads"),
}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_wrong_kind_of_file_is_named_by_the_api(tmp_path, name):
    write, expected = KINDS[name]
    path = tmp_path / name
    write(path)
    for read in (lambda: read_model(path), lambda: read_model(path, format="nnef"), lambda: nnef_torch.load(path)):
        with pytest.raises(NNEFError, match=expected) as caught:
            read()
        assert caught.value.location.file == str(path)
        assert "UTF-8" not in str(caught.value)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_wrong_kind_of_file_is_named_by_the_command_line(tmp_path, capsys, name):
    write, expected = KINDS[name]
    path = tmp_path / name
    write(path)
    for verb in ("info", "validate"):
        status, out, err = cli(capsys, verb, path)
        assert status == 1 and out == ""
        assert err.startswith(f"{path}: error: ") and len(err.splitlines()) == 1
        assert re.search(expected, err) and "UTF-8" not in err


def test_an_onnx_file_goes_to_the_onnx_reader(tmp_path, capsys):
    """ONNX is read (formats/onnx/): a ModelProto is named as one, and this one, which imports no opset, is
    refused by the ONNX reader; asked to read it as NNEF, the message says how to read it."""
    path = tmp_path / "m.onnx"
    path.write_bytes(ONNX)
    for read in (lambda: read_model(path), lambda: nnef_torch.load(path)):
        with pytest.raises(NNEFError, match="imports no opset of the default ONNX domain"):
            read()
    with pytest.raises(NNEFError, match="an ONNX model, not an NNEF one: read it with nnef_torch.load"):
        read_model(path, format="nnef")
    status, out, err = cli(capsys, "info", path)
    assert status == 1 and "imports no opset of the default ONNX domain" in err


def test_onnx_is_known_by_its_fields_without_its_suffix():
    assert "ONNX" in identify(ONNX, "model.bin")
    assert identify(GRAPH.encode(), "m.onnx") is None  # graph text named .onnx: no ModelProto field
    # wire type 3 is no field of a ModelProto: a binary file of no known kind
    assert "no kind" in identify(ONNX.replace(b"\x3a", b"\x3b", 1), "m.onnx")


def test_models_are_still_models(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "graph.nnef").write_text(GRAPH)
    archive = tmp_path / "model.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder / "graph.nnef", "graph.nnef")
    for path in (folder, folder / "graph.nnef", archive):
        assert list(read_model(path).graph.outputs) == ["y"]
    assert identify(GRAPH.encode(), "graph.nnef") is None
    assert identify(b"version 1.0;\x00", "graph.nnef") is None  # named as graph text: the parser says where
