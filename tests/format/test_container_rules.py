"""Every file a model folder holds is read under the container's rules: inside the folder (no symbolic link or '..'
out of it), a regular file (a FIFO never blocks), a document no larger than the limit, and nothing of a refused
file in the message. The graph file a caller names itself is followed wherever it is."""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from nnef_torch.errors import NNEFContainerError
from nnef_torch.format.container import open_model, open_regular, write_model

GRAPH = "version 1.0;\n\ngraph G( input ) -> ( output )\n{\n    output = relu(input);\n}\n"
QUANT = '"output": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n'
SECRET = "root:x:0:0:TOPSECRET:/root:/bin/bash\n"

needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32",
                                    reason="symbolic links need a POSIX system")
needs_fifos = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs need a POSIX system")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    write_model(tmp_path / "m", GRAPH, [("w", b"data")])
    (tmp_path / "outside.txt").write_text(SECRET)
    return tmp_path / "m"


def _refused(path: Path, match: str, **options) -> NNEFContainerError:
    with pytest.raises(NNEFContainerError, match=match) as info:
        with open_model(path, **options) as files:
            files.documents()
    assert "TOPSECRET" not in str(info.value) and "bin/bash" not in str(info.value)
    return info.value


@needs_symlinks
@pytest.mark.parametrize("name", ["graph.nnef", "graph.quant", "train.nnef", "train.quant"])
def test_file_linked_outside_the_model_folder_is_refused(model, name):
    (model / name).unlink(missing_ok=True)
    os.symlink(model.parent / "outside.txt", model / name)
    error = _refused(model, "resolves outside the model folder")
    assert error.location.file == os.path.join(str(model), name)


@needs_symlinks
def test_quant_file_beside_a_named_graph_file_linked_outside_is_refused(model):
    os.symlink(model.parent / "outside.txt", model / "graph.quant")
    _refused(model / "graph.nnef", "resolves outside the model folder")


@needs_symlinks
def test_graph_file_named_by_the_caller_is_followed(model, tmp_path):
    os.symlink(model / "graph.nnef", tmp_path / "alias.nnef")
    with open_model(tmp_path / "alias.nnef") as files:
        assert files.graph_text == GRAPH


@needs_symlinks
def test_document_linked_inside_the_model_folder_is_read(model):
    (model / "real.txt").write_text(GRAPH)
    os.symlink("real.txt", model / "train.nnef")
    with open_model(model) as files:
        assert files.documents() == {"train.nnef": GRAPH}


def test_folder_named_like_a_document_is_not_one(model):
    (model / "train.nnef").mkdir()
    with open_model(model) as files:
        assert files.document_names() == [] and files.documents() == {}


# A FIFO in place of a file: refused before it is opened (opening one for reading waits for a writer).
_OPEN = "import sys; from nnef_torch.format.container import open_model\n" \
        "try:\n    open_model(sys.argv[1]).documents()\nexcept Exception as e:\n    print(type(e).__name__, e)\n"


@needs_fifos
@pytest.mark.parametrize("name, opened", [("graph.nnef", "m"), ("graph.quant", "m"), ("train.nnef", "m"),
                                          ("graph.nnef", "m/graph.nnef"), ("x.tgz", "m/x.tgz")])
def test_fifo_in_place_of_a_file_is_refused_without_blocking(model, name, opened):
    (model / name).unlink(missing_ok=True)
    os.mkfifo(model / name)
    child = subprocess.run([sys.executable, "-c", _OPEN, str(model.parent / opened)], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert child.stdout.startswith("NNEFContainerError") and "not a regular file (a FIFO)" in child.stdout, \
        child.stdout + child.stderr


@needs_fifos
def test_open_regular_says_what_a_path_is(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(NNEFContainerError, match=r"model file is not a regular file \(a FIFO\)"):
        open_regular(str(tmp_path / "pipe"), what="model file")
    with pytest.raises(NNEFContainerError, match=r"not a regular file \(a folder\)"):
        open_regular(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        open_regular(str(tmp_path / "missing"))
    (tmp_path / "f").write_bytes(b"abc")
    with open_regular(str(tmp_path / "f")) as handle:
        assert handle.read() == b"abc"


@pytest.mark.parametrize("name", ["graph.nnef", "graph.quant", "train.nnef"])
def test_document_over_the_size_limit_is_refused_before_it_is_read(model, name):
    with open(model / name, "wb") as handle:  # sparse: nothing of it is on disk
        handle.truncate(1 << 30)
    error = _refused(model, "larger than the limit of 4,096 bytes", max_document_bytes=4096)
    assert error.location.file == os.path.join(str(model), name)
    _refused(model, "larger than the limit of 33,554,432 bytes")  # the default


def test_archive_document_over_the_size_limit_is_refused(tmp_path):
    write_model(tmp_path / "m.tar", GRAPH, [], QUANT, documents={"train.nnef": GRAPH + "#" * 5000})
    with pytest.raises(NNEFContainerError, match="larger than the limit") as info:
        with open_model(tmp_path / "m.tar", max_document_bytes=4096) as files:
            files.documents()
    assert info.value.location.file == f"{tmp_path / 'm.tar'}:train.nnef"
    with tarfile.open(tmp_path / "m.tar") as archive:
        assert "train.nnef" in archive.getnames()


def test_documents_are_read_one_at_a_time(model):
    (model / "a.nnef").write_text(GRAPH)
    (model / "a.quant").write_text(QUANT)
    with open_model(model) as files:
        assert files.document_names() == ["a.nnef", "a.quant"]
        assert (files.document("a.nnef"), files.document("a.quant")) == (GRAPH, QUANT)
