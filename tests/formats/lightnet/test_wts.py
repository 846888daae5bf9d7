"""LightNet's text weight files (`.wts`): written as LightNet's `tools/genwts.pl` writes them (byte for byte), read
back bit for bit, and every inconsistency refused at its line and column; mutated files are read or refused with an
`NNEFError`, nothing else."""
from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nnef_torch.errors import ForeignFormatError, NNEFError
from nnef_torch.formats.lightnet import wts
from nnef_torch.formats.lightnet.weights import load_weights
from nnef_torch.formats.lightnet.wts import read_wts, write_wts

MIRROR = Path("/work/.mirror/zhaozhixu+LightNet/repo")


def bits(word: str) -> float:
    """A float32 from its 8-digit bit pattern, decoded by hand."""
    return struct.unpack(">f", bytes.fromhex(word))[0]


def test_write_wts_as_genwts_writes_it() -> None:
    # genwts.pl -t 0 on "1.0 -2.5, 3e-3 [0.1]" and -t 2 on "-1 5 100 -128" (outputs recorded from the tool)
    assert write_wts({"conv_w": np.array([1.0, -2.5, 3e-3, 0.1], np.float32)}) == \
        "1\nconv_w 0 4 3f800000 c0200000 3b449ba6 3dcccccd\n"
    assert write_wts({"q": np.array([-1, 5, 100, -128], np.int8)}) == "1\nq 2 4 ff 05 64 80\n"
    assert write_wts({}) == "0\n"
    assert write_wts({"empty": np.zeros(0, np.float32)}) == "1\nempty 0 0 \n"


@pytest.mark.skipif(shutil.which("perl") is None or not MIRROR.exists(),
                    reason="needs perl and the LightNet sources (tools/genwts.pl)")
def test_write_wts_matches_genwts_pl(tmp_path: Path) -> None:
    script = tmp_path / "genwts.pl"
    script.write_bytes(subprocess.run(["git", "--git-dir", str(MIRROR), "show", "HEAD:tools/genwts.pl"],
                                      capture_output=True, check=True).stdout)
    values = np.random.default_rng(3).standard_normal(37).astype(np.float32)
    (tmp_path / "weight_a.txt").write_text(" ".join(repr(float(v)) for v in values))
    (tmp_path / "bias.txt").write_text("[1, -2, 0.5]")
    out = tmp_path / "out.wts"
    subprocess.run(["perl", str(script), "-t", "0", "-o", str(out), str(tmp_path / "bias.txt"),
                    str(tmp_path / "weight_a.txt")], check=True, capture_output=True)
    ours = write_wts({"bias": np.array([1, -2, 0.5], np.float32), "weight_a": values})
    assert out.read_text() == ours


def test_float32_round_trips_bit_for_bit() -> None:
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -3.4028235e38], np.float32)
    payload = np.array([0x7FC00001, 0xFFBADBAD], np.uint32).view(np.float32)  # NaNs with payloads and signs
    values = np.concatenate([special, payload]).reshape(2, 4)
    text = write_wts({"w": values, "q": np.array([[-128, 127]], np.int8)})
    found = read_wts(text.encode("ascii"))
    assert list(found) == ["w", "q"]
    assert found["w"].dtype == np.float32 and found["q"].dtype == np.int8
    np.testing.assert_array_equal(found["w"].view(np.uint32), values.reshape(-1).view(np.uint32))
    np.testing.assert_array_equal(found["q"], [-128, 127])


def test_other_floats_are_written_as_float32_and_others_refused() -> None:
    text = write_wts({"d": np.array([0.1], np.float64), "h": np.array([1.5], np.float16)})
    assert text == f"2\nd 0 1 {struct.pack('>f', 0.1).hex()}\nh 0 1 3fc00000\n"
    with pytest.raises(ValueError, match="float32 or int8"):
        write_wts({"i": np.array([1], np.int32)})
    with pytest.raises(ValueError, match="white space"):
        write_wts({"a b": np.zeros(1, np.float32)})


def test_read_wts_accepts_what_fscanf_reads() -> None:
    text = "2\r\n\nw 0 2 3F800000 0x40000000\nq 2 3 1 0a FF\n"
    found = read_wts(text)
    assert bits("3F800000") == 1.0 and found["w"].tolist() == [1.0, 2.0]
    assert found["q"].tolist() == [1, 10, -1]


@pytest.mark.parametrize(("text", "message", "line", "column"), [
    ("", "empty weight file", 1, 1),
    ("two\n", "count of arrays", 1, 1),
    ("-1\n", "negative count", 1, 1),
    ("1 w\n", "only the count", 1, 3),
    ("2\nw 0 1 3f800000\n", "truncated weight file: its count says 2 arrays, it holds 1", 3, 1),
    ("1\nw 0 3 3f800000 3f800000\n", "says it holds 3 items, its line has 2", 2, 24),
    ("1\nw 0 1 3f800000 3f800000\n", "says it holds 1 items, its line has 2", 2, 16),
    ("2\nw 0 1 3f800000\nw 0 1 00000000\n", "'w' is given twice \\(first on line 2\\)", 3, 1),
    ("1\nw 0 1 3f800000\nv 0 1 3f800000\n", "more arrays than its count", 3, 1),
    ("1\nw 1 1 3c00\n", "unsupported type 1 \\(LightNet does not read half", 2, 3),
    ("1\nw 7 1 3c00\n", "unsupported type 7", 2, 3),
    ("1\nw 0 x\n", "length of array 'w'", 2, 5),
    ("1\nw 0\n", "truncated record", 2, 4),
    ("1\nw 0 1 3f8000001\n", "item 0 of array 'w' is '3f8000001'", 2, 7),
    ("1\nw 2 1 100\n", "int8 bit pattern of at most 2", 2, 7),
    ("1\nw 0 1 zz\n", "not a float32 bit pattern", 2, 7),
    ("1\nw 0 -2\n", "has length -2", 2, 5),
])
def test_read_wts_refuses_inconsistent_files(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(ForeignFormatError, match=message) as caught:
        read_wts(text.encode("ascii"), "model.wts")
    location = caught.value.location
    assert (location.file, location.line, location.column) == ("model.wts", line, column)


def test_read_wts_refuses_binary() -> None:
    with pytest.raises(ForeignFormatError, match="not ASCII text: byte 0xff") as caught:
        read_wts(b"1\nw 0 1 3f80\xff000\n", "b.wts")
    assert (caught.value.location.line, caught.value.location.column) == (2, 11)


ARRAYS = st.dictionaries(st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=8),
                         st.one_of(hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)),
                                   hnp.arrays(np.int8, hnp.array_shapes(min_dims=1, max_dims=2, max_side=5))),
                         max_size=4)


@fuzz(200)
@given(ARRAYS)
def test_write_then_read_is_identity(arrays: dict[str, np.ndarray]) -> None:
    found = read_wts(write_wts(arrays))
    assert list(found) == list(arrays)
    for name, array in arrays.items():
        expected = array.reshape(-1)
        assert found[name].dtype == expected.dtype
        assert found[name].tobytes() == expected.tobytes()


WHITE = b" \t\n\v\f\r"  # what fscanf skips (C's isspace)


def reference_wts(data: bytes) -> dict[str, np.ndarray] | None:
    """The arrays of a .wts file by the rules of the module docstring, read the plain way (line by line, word by
    word), or None where the file breaks one of them: the oracle the fuzzing compares `read_wts` with."""
    if not data.isascii():
        return None
    lines = [line.split() for line in data.split(b"\n")]
    records = [words for words in lines if words]
    if not records or len(records[0]) != 1 or not re.fullmatch(rb"[-+]?[0-9]{1,12}", records[0][0]):
        return None
    count = int(records[0][0])
    if not 0 <= count <= 16384 or len(records) - 1 != count:
        return None
    arrays: dict[str, np.ndarray] = {}
    for words in records[1:]:
        if len(words) < 3 or len(words[0]) > 511 or words[0].decode() in arrays:
            return None
        if not all(re.fullmatch(rb"[-+]?[0-9]{1,12}", word) for word in words[1:3]):
            return None
        kind, length = int(words[1]), int(words[2])
        if kind not in (0, 2) or not 0 <= length < 2**31 or len(words) != 3 + length:
            return None
        digits = 8 if kind == 0 else 2
        if not all(re.fullmatch(rb"(0[xX])?[0-9a-fA-F]{1,%d}" % digits, word) for word in words[3:]):
            return None
        bits = np.array([int(word, 16) for word in words[3:]], "<u4" if kind == 0 else "u1")
        arrays[words[0].decode()] = bits.view("<f4" if kind == 0 else "i1")
    return arrays


MUTATIONS = [b" ", b"\n", b"9", b"-", b"0x", b"0X", b"ffffffffff", b"a 0 1 0\n", b"\t", b"\r", b"\v", b"\x1c",
             b"\n\n\n", b"F", b" 0", b"b 2 2 0x1 ff\n", b"\xe9", b"\x00", b"   \t  ", b"c 0 0\n"]


@fuzz(400)
@given(st.data())
def test_mutated_wts_is_read_as_the_plain_reading_or_refused_cleanly(tmp_path_factory, data: st.DataObject) -> None:
    """Mutated files (through bytes, text, or a mapped file; in chunks as small as a word) give the arrays the plain
    reading gives, or a located error where it finds none."""
    arrays = data.draw(st.sampled_from([
        {"a": np.arange(5, dtype=np.float32), "b": np.array([1, -1], np.int8)},
        {"w": np.linspace(-2, 2, 40).astype(np.float32), "q": np.arange(-20, 20, dtype=np.int8), "e": np.zeros(0)}]))
    text = bytearray(write_wts(arrays).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(["byte", "cut", "insert", "word", "loose"]))
        at = data.draw(st.integers(0, len(text)))
        if how == "byte" and at < len(text):
            text[at] = data.draw(st.integers(0, 255))
        elif how == "cut":
            del text[at:at + data.draw(st.integers(1, 12))]
        elif how == "insert":
            text[at:at] = data.draw(st.sampled_from(MUTATIONS))
        elif how == "word":
            text[at:at] = data.draw(st.sampled_from([b"99999999999999", b"2147483648", b"-0", b"1e3", b"16385"]))
        else:  # words of other widths and separators, still readable
            text = bytearray(re.sub(rb" 0+([0-9a-f])", lambda m: data.draw(st.sampled_from([b" ", b"\t", b"  "])) +
                                    data.draw(st.sampled_from([b"", b"0x", b"0X"])) + m.group(1), bytes(text)))
    expected = reference_wts(bytes(text))
    chunk, short = wts._CHUNK, wts._SHORT
    wts._CHUNK = data.draw(st.sampled_from([chunk, 11, 12, 16, 37]))  # longer than a word with its 0x (10)
    wts._SHORT = data.draw(st.sampled_from([short, 0]))  # short lines read word by word, or in blocks
    try:
        how = data.draw(st.sampled_from(["bytes", "text", "file"]))
        if how == "file":
            path = tmp_path_factory.mktemp("wts") / "m.wts"
            path.write_bytes(bytes(text))
            found = load_weights(path, "m.json").arrays
        else:
            found = read_wts(bytes(text) if how == "bytes" else bytes(text).decode("latin-1"), "m.wts")
    except NNEFError as error:
        assert expected is None, (error, expected)
        assert error.location is not None and error.location.line is not None
        return
    finally:
        wts._CHUNK, wts._SHORT = chunk, short
    assert expected is not None and list(found) == list(expected)
    for name, array in expected.items():
        assert found[name].dtype == array.dtype and found[name].tobytes() == array.tobytes(), name
