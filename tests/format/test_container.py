"""Tests of nnef_torch.format.container: folders, graph files, tar archives, unsafe input, atomic writes."""
from __future__ import annotations

import gzip
import io
import os
import tarfile

import pytest

from nnef_torch.errors import NNEFContainerError, NNEFError
from nnef_torch.format.container import ModelFiles, label_to_relpath, open_model, write_model

GRAPH = "version 1.0;\n\ngraph G( input ) -> ( output )\n{\n    output = relu(input);\n}\n"
QUANT = '"output": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n'
TENSORS = {"conv1/filter": b"\x01\x02\x03", "conv1/bias": b"", "fc": bytes(range(256)) * 5}


def _tree(root) -> list[str]:
    """Every path under root (files and folders), relative, sorted."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        out += [os.path.normpath(os.path.join(rel, n)) for n in dirs + files]
    return sorted(out)


def _make_tar(path, members, *, gz: bool = False) -> str:
    """Write a tar archive by hand. members: (TarInfo or name, bytes or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            if isinstance(info, str):
                info = tarfile.TarInfo(info)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    with open(path, "wb") as f:
        f.write(gzip.compress(raw) if gz else raw)
    return str(path)


def _special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


def _check_model(model: ModelFiles, tensors=TENSORS, quant=QUANT) -> None:
    assert model.graph_text == GRAPH
    assert model.quant_text == quant
    for label, data in tensors.items():
        assert model.has_tensor(label)
        assert bytes(model.tensor_bytes(label)) == data


# ---- round trips -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["model.nnef", "model.tgz", "model.tar.gz", "model.tar"])
def test_round_trip(tmp_path, name):
    target = tmp_path / name
    write_model(target, GRAPH, TENSORS.items(), QUANT)
    with open_model(target) as model:
        _check_model(model)
    assert _tree(tmp_path)[0] == name  # no temporary siblings left
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []


@pytest.mark.parametrize("name, gz", [("m.tgz", True), ("m.tar.gz", True), ("m.tar", False)])
def test_archive_kind_follows_name(tmp_path, name, gz):
    write_model(tmp_path / name, GRAPH, TENSORS.items())
    head = (tmp_path / name).read_bytes()[:2]
    assert (head == b"\x1f\x8b") == gz
    with tarfile.open(tmp_path / name) as tar:
        assert sorted(tar.getnames()) == ["conv1/bias.dat", "conv1/filter.dat", "fc.dat", "graph.nnef"]


def test_compress_true_writes_gzip_archive_under_any_name(tmp_path):
    write_model(tmp_path / "model.nnef", GRAPH, TENSORS.items(), compress=True)
    assert (tmp_path / "model.nnef").read_bytes()[:2] == b"\x1f\x8b"
    with open_model(tmp_path / "model.nnef") as model:
        _check_model(model, quant=None)


def test_compress_false_with_gzip_name_is_refused(tmp_path):
    with pytest.raises(ValueError):
        write_model(tmp_path / "m.tgz", GRAPH, [], compress=False)
    assert os.listdir(tmp_path) == []


def test_nested_and_backslash_labels(tmp_path):
    write_model(tmp_path / "m", GRAPH, [("a/b/c", b"abc"), ("d\\e", b"de")])
    assert (tmp_path / "m" / "a" / "b" / "c.dat").read_bytes() == b"abc"
    assert (tmp_path / "m" / "d" / "e.dat").read_bytes() == b"de"
    model = open_model(tmp_path / "m")
    assert model.tensor_bytes("a/b/c") == b"abc"
    assert model.tensor_bytes("a\\b\\c") == b"abc"
    assert model.tensor_bytes("d/e") == b"de"
    assert model.quant_text is None


def test_open_path_to_graph_file(tmp_path):
    write_model(tmp_path / "m", GRAPH, TENSORS.items(), QUANT)
    with open_model(tmp_path / "m" / "graph.nnef") as model:
        _check_model(model)
        assert model.source == str(tmp_path / "m" / "graph.nnef")


def test_open_path_to_other_graph_file_takes_its_quant_sibling(tmp_path):
    (tmp_path / "net.nnef").write_text(GRAPH)
    (tmp_path / "net.quant").write_text(QUANT)
    (tmp_path / "w.dat").write_bytes(b"w")
    with open_model(tmp_path / "net.nnef") as model:
        assert (model.graph_text, model.quant_text, model.tensor_bytes("w")) == (GRAPH, QUANT, b"w")


def test_tar_with_single_top_level_folder(tmp_path):
    path = _make_tar(tmp_path / "m.tgz", [
        (_special("model.nnef", tarfile.DIRTYPE), None), ("model.nnef/graph.nnef", GRAPH.encode()),
        ("model.nnef/graph.quant", QUANT.encode()),
        *((f"model.nnef/{label}.dat", data) for label, data in TENSORS.items())], gz=True)
    with open_model(path) as model:
        _check_model(model)
        assert model.tensor_path("conv1/filter") == f"{path}:model.nnef/conv1/filter.dat"


def test_tar_with_dot_slash_member_names(tmp_path):
    path = _make_tar(tmp_path / "m.tar", [(_special(".", tarfile.DIRTYPE), None), ("./graph.nnef", GRAPH.encode()),
                                          ("./w.dat", b"w")])
    with open_model(path) as model:
        assert model.graph_text == GRAPH and model.tensor_bytes("w") == b"w"


def test_gzip_detected_by_content_not_name(tmp_path):
    write_model(tmp_path / "m.tgz", GRAPH, TENSORS.items())
    os.rename(tmp_path / "m.tgz", tmp_path / "m.tar")
    with open_model(tmp_path / "m.tar") as model:
        _check_model(model, quant=None)


@pytest.mark.parametrize("name", ["m", "m.tgz"])
def test_case_insensitive_label_fallback(tmp_path, name):
    write_model(tmp_path / name, GRAPH, [("Conv1/Filter", b"f")])
    with open_model(tmp_path / name) as model:
        assert model.has_tensor("conv1/filter")
        assert model.tensor_bytes("CONV1/filter") == b"f"
        assert model.tensor_path("conv1/filter").replace(os.sep, "/").endswith("Conv1/Filter.dat")


def test_case_insensitive_ambiguity_is_an_error(tmp_path):
    path = _make_tar(tmp_path / "m.tar", [("graph.nnef", GRAPH.encode()), ("W.dat", b"1"), ("w.DAT", b"2")])
    with open_model(path) as model:
        assert model.tensor_bytes("W") == b"1"  # an exact match wins
        with pytest.raises(NNEFContainerError, match="differ only in case: W.dat, w.DAT"):
            model.tensor_bytes("w")


def test_duplicate_labels_are_refused_when_writing(tmp_path):
    with pytest.raises(NNEFContainerError, match="'W' clashes with label 'w'"):
        write_model(tmp_path / "m", GRAPH, [("w", b"1"), ("W", b"2")])
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["m", "m.tgz"])
@pytest.mark.parametrize("labels", [["a", "A.dat/b"], ["a.dat/b", "a"]])
def test_label_clashing_with_folder_of_another_label_is_refused(tmp_path, name, labels):
    with pytest.raises(NNEFContainerError, match="clashes"):
        write_model(tmp_path / name, GRAPH, [(label, b"1") for label in labels])
    assert os.listdir(tmp_path) == []


def test_tensor_callables_are_called_one_at_a_time_in_order(tmp_path):
    calls = []

    def make(label):
        def produce():
            calls.append(label)
            return label.encode() * 3
        return produce

    labels = [f"t{i}" for i in range(5)]
    write_model(tmp_path / "m.tgz", GRAPH, ((label, make(label)) for label in labels))
    assert calls == labels
    with open_model(tmp_path / "m.tgz") as model:
        assert [model.tensor_bytes(label) for label in reversed(labels)] == [
            label.encode() * 3 for label in reversed(labels)]


def test_overwrite_replaces_previous_model(tmp_path):
    write_model(tmp_path / "m", GRAPH, [("old", b"old")])
    write_model(tmp_path / "m", GRAPH, [("new", b"new")])
    model = open_model(tmp_path / "m")
    assert model.tensor_bytes("new") == b"new" and not model.has_tensor("old")
    assert os.listdir(tmp_path) == ["m"]


def test_refuses_to_replace_a_folder_that_is_not_a_model(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "precious.txt").write_text("keep")
    with pytest.raises(NNEFContainerError, match="not empty"):
        write_model(tmp_path / "home", GRAPH, [])
    assert (tmp_path / "home" / "precious.txt").read_text() == "keep"
    assert _tree(tmp_path) == ["home", os.path.join("home", "precious.txt")]


def test_files_keep_umask_permissions(tmp_path):
    write_model(tmp_path / "m", GRAPH, [("w", b"1")])
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "m").stat().st_mode & 0o777 == 0o777 & ~mask
    assert (tmp_path / "m" / "w.dat").stat().st_mode & 0o777 == 0o666 & ~mask


# ---- untrusted archives ---------------------------------------------------------------------------------------

ATTACKS = {
    "absolute": [("/tmp/evil.dat", b"x")],
    "dotdot": [("../evil.dat", b"x")],
    "nested_dotdot": [("a/../../evil.dat", b"x")],
    "symlink": [(_special("link.dat", tarfile.SYMTYPE, "/etc/passwd"), None)],
    "hardlink": [(_special("hard.dat", tarfile.LNKTYPE, "graph.nnef"), None)],
    "chr_device": [(_special("dev.dat", tarfile.CHRTYPE), None)],
    "blk_device": [(_special("blk.dat", tarfile.BLKTYPE), None)],
    "fifo": [(_special("pipe.dat", tarfile.FIFOTYPE), None)],
    "collision": [("w.dat", b"1"), ("./w.dat", b"2")],
    "backslash_collision": [("a/w.dat", b"1"), ("a\\w.dat", b"2")],
}
MEMBER = {"absolute": "/tmp/evil.dat", "dotdot": "../evil.dat", "nested_dotdot": "a/../../evil.dat",
          "symlink": "link.dat", "hardlink": "hard.dat", "chr_device": "dev.dat", "blk_device": "blk.dat",
          "fifo": "pipe.dat", "collision": "./w.dat", "backslash_collision": "a\\w.dat"}


@pytest.mark.parametrize("gz", [False, True], ids=["tar", "tgz"])
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_unsafe_archive_member_is_refused(tmp_path, attack, gz):
    path = _make_tar(tmp_path / ("m.tgz" if gz else "m.tar"), [("graph.nnef", GRAPH.encode()), *ATTACKS[attack]],
                     gz=gz)
    before = _tree(tmp_path)
    with pytest.raises(NNEFContainerError) as info:
        open_model(path)
    assert repr(MEMBER[attack]) in str(info.value)
    assert _tree(tmp_path) == before
    assert not (tmp_path.parent / "evil.dat").exists()


def test_too_many_members(tmp_path):
    path = _make_tar(tmp_path / "m.tar", [("graph.nnef", GRAPH.encode())] + [(f"t{i}.dat", b"") for i in range(10)])
    with pytest.raises(NNEFContainerError, match="more than 5 members.*'t4.dat'"):
        open_model(path, max_members=5)
    open_model(path, max_members=11).close()


def test_total_size_over_max_bytes(tmp_path):
    path = _make_tar(tmp_path / "m.tgz", [("graph.nnef", GRAPH.encode()), ("a.dat", bytes(1000)),
                                          ("big.dat", bytes(5000))], gz=True)
    with pytest.raises(NNEFContainerError, match="more than 4096 bytes.*'big.dat'"):
        open_model(path, max_bytes=4096)
    with open_model(path, max_bytes=10_000) as model:
        assert model.tensor_bytes("big") == bytes(5000)


def test_size_is_checked_from_headers_before_reading(tmp_path):
    """A header claiming a huge size is refused before any data is read (the data is not even there)."""
    path = _make_tar(tmp_path / "m.tar", [("graph.nnef", GRAPH.encode()), ("w.dat", b"abc")])
    raw = bytearray(open(path, "rb").read())
    header = tarfile.TarInfo("w.dat")
    header.size = 1 << 40
    raw[1024:1536] = header.tobuf(format=tarfile.GNU_FORMAT)
    open(path, "wb").write(raw)
    with pytest.raises(NNEFContainerError, match="'w.dat'"):
        open_model(path, max_bytes=1 << 30)


@pytest.mark.parametrize("gz", [False, True], ids=["tar", "tgz"])
def test_header_lying_about_size_truncated_archive(tmp_path, gz):
    data = _make_tar(tmp_path / "tmp.tar", [("graph.nnef", GRAPH.encode()), ("w.dat", bytes(range(256)) * 8)])
    raw = open(data, "rb").read()[:1024 + 512 + 1000]  # w.dat's header says 2048 bytes, 1000 remain
    os.remove(data)
    path = tmp_path / ("m.tgz" if gz else "m.tar")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    with pytest.raises(NNEFContainerError, match="'w.dat'"):
        open_model(path)


def test_header_lying_smaller_size_is_detected(tmp_path):
    path = _make_tar(tmp_path / "m.tar", [("graph.nnef", GRAPH.encode()), ("w.dat", b"\x01" * 2000)])
    raw = bytearray(open(path, "rb").read())
    header = tarfile.TarInfo("w.dat")
    header.size = 10
    raw[1024:1536] = header.tobuf(format=tarfile.GNU_FORMAT)
    open(path, "wb").write(raw)
    with pytest.raises(NNEFContainerError, match="'w.dat'.*invalid tar header"):
        open_model(path)


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE])
def test_huge_metadata_header_is_refused_before_allocating(tmp_path, kind):
    """A long-name or pax record claiming a terabyte, in a gzip stream: refused without reading it."""
    header = _special("././@LongLink", kind)
    header.size = 1 << 40
    raw = header.tobuf(format=tarfile.GNU_FORMAT)[:512] + bytes(1 << 16)
    (tmp_path / "m.tgz").write_bytes(gzip.compress(raw))
    with pytest.raises(NNEFContainerError, match="corrupt or truncated"):
        open_model(tmp_path / "m.tgz")


def test_gzip_bomb_is_bounded_by_max_bytes(tmp_path):
    path = _make_tar(tmp_path / "m.tgz", [("graph.nnef", GRAPH.encode()), ("zeros.dat", bytes(50 << 20))], gz=True)
    assert os.path.getsize(path) < 1 << 20
    with pytest.raises(NNEFContainerError, match="'zeros.dat'"):
        open_model(path, max_bytes=1 << 20)


def test_truncated_gzip_stream(tmp_path):
    write_model(tmp_path / "m.tgz", GRAPH, [("w", os.urandom(50_000))])
    raw = (tmp_path / "m.tgz").read_bytes()
    (tmp_path / "m.tgz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(NNEFContainerError, match="corrupt or truncated"):
        open_model(tmp_path / "m.tgz")


@pytest.mark.parametrize("name, content", [("m.tgz", b"this is plain text, not gzip\n" * 40),
                                           ("m.tar", bytes(range(256)) * 7 + b"\x7f" * 300),
                                           ("m.tgz", b"\x1f\x8b" + bytes(100)),
                                           ("m.tar", b"")])
def test_not_an_archive(tmp_path, name, content):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(NNEFContainerError) as info:
        open_model(tmp_path / name)
    assert name in str(info.value)
    assert os.listdir(tmp_path) == [name]


def test_archive_without_graph_lists_members(tmp_path):
    path = _make_tar(tmp_path / "m.tar", [("model/weights.dat", b"1"), ("readme.txt", b"hi")])
    with pytest.raises(NNEFContainerError, match="no graph.nnef.*model/weights.dat.*readme.txt"):
        open_model(path)


def test_closed_archive_cannot_be_read(tmp_path):
    write_model(tmp_path / "m.tgz", GRAPH, [("w", b"1")])
    with open_model(tmp_path / "m.tgz") as model:
        pass
    with pytest.raises(ValueError, match="closed"):
        model.tensor_bytes("w")


# ---- labels -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("label, rel", [("conv1/filter", "conv1/filter.dat"), ("a\\b/c", "a/b/c.dat"),
                                        ("x.y-z_0", "x.y-z_0.dat"), ("...", "....dat")])
def test_label_to_relpath(label, rel):
    assert label_to_relpath(label) == rel


UNSAFE_LABELS = ["../x", "a/../../x", "/abs", "\\abs", "a//b", "a/", "C:x", "c:/x", "", "a/./b", "a b", "x\0y", "é"]


@pytest.mark.parametrize("label", [*UNSAFE_LABELS, None, 7])
def test_unsafe_label_is_rejected(label):
    with pytest.raises(NNEFContainerError):
        label_to_relpath(label)


@pytest.mark.parametrize("name", ["m", "m.tgz"])
@pytest.mark.parametrize("label", ["../x", "/abs", "a//b", "C:x", ""])
def test_write_model_rejects_unsafe_label_and_writes_nothing(tmp_path, label, name):
    target = tmp_path / "out" / name
    target.parent.mkdir()
    with pytest.raises(NNEFContainerError):
        write_model(target, GRAPH, [("ok", b"1"), (label, b"evil")])
    assert _tree(tmp_path) == ["out"]


def test_reading_an_unsafe_label_is_an_error(tmp_path):
    write_model(tmp_path / "m", GRAPH, [])
    (tmp_path / "x.dat").write_bytes(b"outside")
    model = open_model(tmp_path / "m")
    with pytest.raises(NNEFContainerError, match="inside the model folder"):
        model.tensor_bytes("../x")


def test_symlink_escaping_the_model_folder_is_refused(tmp_path):
    write_model(tmp_path / "m", GRAPH, [])
    (tmp_path / "secret").write_bytes(b"secret")
    os.symlink(tmp_path / "secret", tmp_path / "m" / "w.dat")
    model = open_model(tmp_path / "m")
    with pytest.raises(NNEFContainerError, match="outside the model folder"):
        model.tensor_bytes("w")


def test_symlink_inside_the_model_folder_is_followed(tmp_path):
    write_model(tmp_path / "m", GRAPH, [("a", b"data")])
    os.symlink("a.dat", tmp_path / "m" / "b.dat")
    assert open_model(tmp_path / "m").tensor_bytes("b") == b"data"


# ---- atomicity ----------------------------------------------------------------------------------------------

class Boom(Exception):
    pass


def _exploding(after: int):
    def tensors():
        for i in range(after):
            yield f"t{i}", b"new"
        yield "bad", lambda: (_ for _ in ()).throw(Boom())
    return tensors()


@pytest.mark.parametrize("name", ["m", "m.tgz", "m.tar"])
def test_failed_save_leaves_previous_model_intact(tmp_path, name):
    write_model(tmp_path / name, GRAPH, [("old", b"old")], QUANT)
    before = (_tree(tmp_path), open_model(tmp_path / name).tensor_bytes("old"))
    with pytest.raises(Boom):
        write_model(tmp_path / name, "graph New() {}", _exploding(3))
    with open_model(tmp_path / name) as model:
        assert model.graph_text == GRAPH and model.quant_text == QUANT
        assert (_tree(tmp_path), model.tensor_bytes("old")) == before
    assert os.listdir(tmp_path) == [name]


@pytest.mark.parametrize("name", ["m", "m.tar.gz"])
def test_failed_first_save_leaves_nothing(tmp_path, name):
    with pytest.raises(Boom):
        write_model(tmp_path / name, GRAPH, _exploding(2))
    assert os.listdir(tmp_path) == []


def test_bad_tensor_type_leaves_nothing(tmp_path):
    with pytest.raises(TypeError, match="'w'"):
        write_model(tmp_path / "m", GRAPH, [("w", 3.5)])
    assert os.listdir(tmp_path) == []


def test_missing_parent_folder(tmp_path):
    with pytest.raises(NNEFContainerError, match="does not exist"):
        write_model(tmp_path / "no" / "m", GRAPH, [])
    assert os.listdir(tmp_path) == []


# ---- missing or broken files ----------------------------------------------------------------------------------

def test_missing_graph_in_folder_lists_contents(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.dat").write_bytes(b"1")
    with pytest.raises(NNEFContainerError, match="no graph.nnef; found: w.dat"):
        open_model(tmp_path / "m")


def test_non_existing_path(tmp_path):
    with pytest.raises(NNEFContainerError, match="no such"):
        open_model(tmp_path / "nope")


@pytest.mark.parametrize("name", ["m", "m.tgz"])
def test_missing_tensor_names_label_and_expected_path(tmp_path, name):
    write_model(tmp_path / name, GRAPH, [("w", b"1")])
    with open_model(tmp_path / name) as model:
        assert not model.has_tensor("conv1/filter")
        with pytest.raises(NNEFContainerError) as info:
            model.tensor_bytes("conv1/filter")
    message = str(info.value).replace(os.sep, "/")
    assert "'conv1/filter'" in message and f"{name}/conv1/filter.dat" in message.replace(":", "/")
    assert isinstance(info.value, NNEFError)


def test_non_utf8_graph_reports_position(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "graph.nnef").write_bytes(b"version 1.0;\ngraph G\xff() {}\n")
    with pytest.raises(NNEFContainerError, match="UTF-8") as info:
        open_model(tmp_path / "m")
    loc = info.value.location
    assert (loc.line, loc.column, loc.offset) == (2, 8, 20)
    assert loc.file.endswith("graph.nnef")


def test_non_utf8_graph_in_archive(tmp_path):
    path = _make_tar(tmp_path / "m.tgz", [("graph.nnef", b"\xc3(")], gz=True)
    with pytest.raises(NNEFContainerError, match="UTF-8") as info:
        open_model(path)
    assert info.value.location.file == f"{path}:graph.nnef"
    assert info.value.location.offset == 0


def test_tensor_that_is_a_folder_is_an_error(tmp_path):
    write_model(tmp_path / "m", GRAPH, [])
    (tmp_path / "m" / "w.dat").mkdir()
    with pytest.raises(NNEFContainerError, match="not a regular file"):
        open_model(tmp_path / "m").tensor_bytes("w")
