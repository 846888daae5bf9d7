"""Archives are read and written in one forward pass: members in any order, no backward seek (a pipe would do),
what we write read back by Python's tarfile, the Khronos parser and tract, other archive names refused, progress."""
from __future__ import annotations

import io
import os
import tarfile

import nnef
import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.cli import main as cli_main
from nnef_torch.errors import NNEFContainerError, NNEFTensorFileError
from nnef_torch.format.container import archive, open_model

GRAPH = """version 1.0;

graph G( input ) -> ( output )
{
    input = external<scalar>(shape = [1, 3]);
    w = variable<scalar>(shape = [1, 3], label = 'layer/w');
    b = variable<scalar>(shape = [1, 3], label = 'b');
    t = mul(input, w);
    output = add(t, b);
}
"""
W = np.array([[1.5, -2.0, 0.25]], np.float32)
B = np.array([[10.0, 20.0, 30.0]], np.float32)


def _dat(array: np.ndarray, tmp_path) -> bytes:
    """A tensor file as the Khronos tools write it (independent of our encoder)."""
    path = tmp_path / "tensor.dat"
    with open(path, "wb") as handle:
        nnef.write_tensor(handle, array)
    return path.read_bytes()


def _archive(path, members: list[tuple[str, bytes]], gz: bool = True) -> str:
    with tarfile.open(path, "w:gz" if gz else "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def _members(tmp_path) -> dict[str, bytes]:
    return {"graph.nnef": GRAPH.encode(), "layer/w.dat": _dat(W, tmp_path), "b.dat": _dat(B, tmp_path),
            "README.txt": b"not a model file\n"}


def _expected(x: np.ndarray) -> np.ndarray:
    return x * W + B


@pytest.mark.parametrize("order", [["graph.nnef", "layer/w.dat", "b.dat", "README.txt"],
                                   ["b.dat", "README.txt", "layer/w.dat", "graph.nnef"],
                                   ["layer/w.dat", "graph.nnef", "README.txt", "b.dat"]],
                         ids=["graph_first", "graph_last", "graph_between"])
@pytest.mark.parametrize("gz", [True, False], ids=["tgz", "tar"])
def test_graph_anywhere_in_the_archive_loads(tmp_path, order, gz):
    members = _members(tmp_path)
    path = _archive(tmp_path / ("m.tgz" if gz else "m.tar"), [(name, members[name]) for name in order], gz)
    module = nnef_torch.load(path)
    x = np.array([[2.0, 3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(module(torch.from_numpy(x)).detach().numpy(), _expected(x))


class _Pipe:
    """A file that only reads forward, as a pipe does: any seek fails the test."""

    def __init__(self, handle: io.BufferedReader):
        self.handle = handle
        self.reads = 0

    def read(self, n: int = -1) -> bytes:
        self.reads += 1
        return self.handle.read(n)

    def readinto(self, buffer) -> int:
        self.reads += 1
        return self.handle.readinto(buffer)

    def seek(self, *args: object) -> int:
        raise AssertionError(f"seek{args} on an archive that is read in one pass")

    def tell(self) -> int:
        raise AssertionError("tell() on an archive that is read in one pass")

    def seekable(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.handle.fileno()

    def close(self) -> None:
        self.handle.close()

    def __enter__(self) -> _Pipe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.mark.parametrize("gz", [True, False], ids=["tgz", "tar"])
def test_reading_an_archive_never_seeks(tmp_path, monkeypatch, gz):
    """The archive file is read as a pipe would be, however the members are ordered and however often a tensor is
    asked for (the loader's constant reader and `convert` ask twice)."""
    members = _members(tmp_path)
    order = ["b.dat", "layer/w.dat", "README.txt", "graph.nnef"]
    path = _archive(tmp_path / ("m.tgz" if gz else "m.tar"), [(name, members[name]) for name in order], gz)
    pipes = []
    real_open = archive.open_regular

    def open_as_pipe(*args: object, **kwargs: object) -> _Pipe:
        pipes.append(_Pipe(real_open(*args, **kwargs)))
        return pipes[-1]

    monkeypatch.setattr(archive, "open_regular", open_as_pipe)
    with open_model(path) as files:
        first, again = files.tensor_bytes("layer/w"), files.tensor_bytes("layer/w")
        assert bytes(first) == bytes(again) == members["layer/w.dat"]
        assert bytes(files.tensor_bytes("B")) == members["b.dat"]  # labels compare case-insensitively
        assert files.graph_text == GRAPH
    assert len(pipes) == 1 and pipes[0].reads > 0  # one pass over the file
    x = np.ones((1, 3), np.float32)
    np.testing.assert_array_equal(nnef_torch.load(path)(torch.from_numpy(x)).detach().numpy(), _expected(x))
    assert len(pipes) == 2


def test_later_reads_of_a_member_are_copies(tmp_path):
    """The first read hands out the kept buffer (a tensor's storage), a later one a copy: they never alias."""
    members = _members(tmp_path)
    path = _archive(tmp_path / "m.tgz", list(members.items()))
    with open_model(path) as files:
        first, again = files.tensor_bytes("b"), files.tensor_bytes("b")
        np.frombuffer(first, np.uint8)[-4:] = 0
        assert bytes(again) == members["b.dat"]


def test_unreferenced_bad_tensor_file_is_read_only_when_asked(tmp_path):
    """A .dat member whose header disagrees with its size is not kept while the archive is read (no allocation by
    its header), and refused with its location when the model reads it."""
    members = _members(tmp_path)
    members["b.dat"] = members["b.dat"][:128] + bytes(4096)  # the header says 12 bytes of data
    path = _archive(tmp_path / "m.tgz", list(members.items()))
    with open_model(path) as files:
        assert bytes(files.tensor_bytes("b")) == members["b.dat"]  # raw bytes: read again, in a pass of its own
    with pytest.raises(NNEFTensorFileError, match="b.dat"):
        nnef_torch.load(path)


def _exported(tmp_path):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(2, 8)
    return module, x, nnef_torch.export(module, x)


def test_saved_archive_is_read_by_tarfile_khronos_and_tract(tmp_path):
    module, x, exported = _exported(tmp_path)
    exported.save(tmp_path / "m.tgz")
    exported.save(tmp_path / "folder")
    with tarfile.open(tmp_path / "m.tgz", "r:gz") as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
        assert names[0] == "graph.nnef"  # written first: a reader may stop waiting for the graph early
        for name in names:
            assert tar.extractfile(name).read() == (tmp_path / "folder" / name).read_bytes(), name
        tar.extractall(tmp_path / "extracted", filter="data")
    graph = nnef.load_graph(str(tmp_path / "extracted"))  # the Khronos parser, with every .dat
    state = [p.detach().numpy().reshape(-1) for p in module.state_dict().values()]
    variables = [graph.tensors[op.outputs["output"]].data.reshape(-1) for op in graph.operations
                 if op.name == "variable"]
    assert len(variables) == len(state)
    for data in variables:  # each variable holds one of the module's tensors, exactly
        assert any(data.shape == value.shape and np.array_equal(data, value) for value in state)
    tract = pytest.importorskip("tract")
    ran = tract.nnef().load(str(tmp_path / "m.tgz")).into_runnable().run([x.numpy()])[0].to_numpy()
    with torch.no_grad():
        np.testing.assert_allclose(ran, module(x).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["model.zip", "model.ZIP", "model.tar.xz", "model.tar.bz2", "model.7z"])
def test_other_archive_names_are_refused(tmp_path, name):
    """A name of an archive kind NNEF models are not written as is refused, not written as a folder of that name;
    the error says which names are archives."""
    module, x, exported = _exported(tmp_path)
    with pytest.raises(NNEFContainerError, match=r"\.tgz, \.tar\.gz or \.tar.*folder") as info:
        nnef_torch.save(module, tmp_path / name, example_inputs=(x,))
    assert "model.tgz" in str(info.value).lower()
    with pytest.raises(NNEFContainerError, match="archive"):
        exported.save(tmp_path / name)
    assert os.listdir(tmp_path) == []


def test_progress_shows_on_stderr_when_asked(tmp_path, capsys):
    module, x, exported = _exported(tmp_path)
    exported.save(tmp_path / "m.tgz", progress=True)
    assert "writing NNEF tensors" in capsys.readouterr().err
    nnef_torch.load(tmp_path / "m.tgz", progress=True)
    err = capsys.readouterr().err
    assert "reading m.tgz" in err and "loading NNEF tensors" in err
    nnef_torch.load(tmp_path / "m.tgz")  # not a terminal: nothing by default
    assert capsys.readouterr().err == ""
    assert cli_main(["convert", str(tmp_path / "m.tgz"), str(tmp_path / "out"), "--progress"]) == 0
    err = capsys.readouterr().err
    assert "reading m.tgz" in err and f"writing {tmp_path / 'out'}" in err and "checking" in err
    assert cli_main(["convert", str(tmp_path / "m.tgz"), str(tmp_path / "quiet.tgz")]) == 0
    assert capsys.readouterr().err == ""
