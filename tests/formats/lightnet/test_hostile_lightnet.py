"""Hostile LightNet models, options and weight files: each is refused with a located `NNEFError` before it costs much,
or read. Sizes a rule computes from params are checked before anything is allocated (`nnef_torch.ir.limits`, for
each array and for the model); params that would hold an infinity are refused with the op named; options that name
what the model lacks are refused with what it has; errors about 'ops' are placed at the key that counts. The work
of a conversion grows linearly with the model: counted in lines of Python run (deterministic), never timed. What
hostile files cost in memory is measured in a child process by `tests/test_hostile_inputs.py` (its COSTLY table)."""
from __future__ import annotations

import io
import math
import os
import sys
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nnef_torch
from formats.lightnet.lightnet_ir import create, document, hand_layout, op, write
from formats.lightnet.test_bad_lightnet import line_of
from nnef_torch.errors import ForeignFormatError, NNEFError, NNEFOptionError
from nnef_torch.formats import convert as convert_model
from nnef_torch.formats.lightnet import wts
from nnef_torch.formats.lightnet.convert import convert_ir
from nnef_torch.formats.lightnet.ir_json import parse_ir
from nnef_torch.formats.lightnet.node import MAX_LITERAL_ITEMS
from nnef_torch.formats.lightnet.weights import Weights, load_weights
from nnef_torch.ir.limits import MAX_COMPUTED_ITEMS

X = create("x", [1, 1, 2, 2], from_file=True)
LIMIT = "more than the limit"


def refused(tmp_path: Path, ops: list[dict[str, Any]], error: type[NNEFError], match: str,
            **options: Any) -> NNEFError:
    path = write(tmp_path, document(*ops))
    with pytest.raises(error, match=match) as caught:
        nnef_torch.load(path, **options)
    assert caught.value.location is not None and caught.value.location.file == str(path), caught.value
    return caught.value


# ---- sizes computed from params, checked before anything is allocated -----------------------------------------
COMPUTED = {
    "arange_of_2_pow_31_items": [op("arange", "a", {}, {"dst": "y"}, dtype="TL_FLOAT", start=0, stop=2**31, step=1)],
    "arange_of_int32_items": [op("arange", "a", {}, {"dst": "y"}, dtype="TL_INT32", start=0, stop=2**31 - 1,
                                 step=1)],
    "create_of_ten_billion_zeros": [create("y", [100_000, 100_000])],
    "create_of_ten_billion_integer_zeros": [create("y", [100_000, 100_000], dtype="TL_INT32")],
    "create_of_ten_billion_random_numbers": [create("y", [100_000, 100_000], ran=(0, 1))],
    "zeros_of_ten_billion_integers": [op("zeros", "z", {}, {"dst": "y"}, dtype="TL_INT32", dims=[100_000, 100_000])],
    "resize_to_two_billion": [X, op("resize", "r", {"src": "x"}, {"dst": "y"}, mode="TL_NEAREST",
                                    dims=[1, 1, 2, 2_000_000_000])],
    "upsample_by_a_billion": [X, op("upsample", "u", {"src": "x"}, {"dst": "y"}, mode="TL_NEAREST",
                                    scales=[1, 1, 1, 1e9])],
}


@pytest.mark.parametrize("ops", COMPUTED.values(), ids=COMPUTED.keys())
def test_computed_sizes_are_checked_before_they_are_allocated(tmp_path: Path, ops: list[dict[str, Any]]) -> None:
    error = refused(tmp_path, ops, ForeignFormatError, LIMIT, params={"x": np.zeros(4, np.float32)})
    assert error.location.line is not None and f"'{ops[-1]['name']}'" in error.message


def test_sort_of_a_vector_past_the_limit_is_refused(tmp_path: Path) -> None:
    ops = [create("x", [2**31 - 1]), op("sort1d", "s", {"src_key": "x"}, {"dst_key": "y"},
                                        dir="TL_SORT_DIR_ASCENDING")]
    refused(tmp_path, ops, ForeignFormatError, f"op 's' .*{LIMIT}", inputs=["x"])


def test_dims_past_64_bits_are_refused(tmp_path: Path) -> None:
    refused(tmp_path, [create("y", [2**31 - 1] * 3)], ForeignFormatError, "volume beyond 2\\^63")


def test_computed_items_are_counted_for_the_whole_model(tmp_path: Path) -> None:
    third = MAX_COMPUTED_ITEMS // 3 + 1  # each create is within the limit, the three are not
    ops = [create(f"y{index}", [third]) for index in range(3)]
    error = refused(tmp_path, ops, ForeignFormatError, f"with the arrays computed for the ops before it.*{LIMIT}")
    assert "'create_y2'" in error.message


def test_constants_written_into_the_document_are_counted_for_the_whole_model(tmp_path: Path) -> None:
    """Ranges, sort positions and resize indexes are literals of the NNEF document, which costs far more an item
    than an array: a model has MAX_LITERAL_ITEMS of them."""
    half = MAX_LITERAL_ITEMS // 2 + 1
    ops = [op("arange", "a", {}, {"dst": "y"}, dtype="TL_INT32", start=0, stop=half, step=1),
           op("sort1d", "s", {"src_key": "x"}, {"dst_key": "z"}, dir="TL_SORT_DIR_ASCENDING"), create("x", [half])]
    ops.insert(1, ops.pop())
    error = refused(tmp_path, ops, ForeignFormatError, f"with the constants written for the ops before it.*{LIMIT}")
    assert "op 's'" in error.message and f"{2 * half:,}" in error.message
    nnef_torch.load(write(tmp_path / "within", document(*ops[:2])))


# ---- params that would hold an infinity -------------------------------------------------------------------------
def lrelu(negslope: Any) -> list[dict[str, Any]]:
    return [X, op("lrelu", "act", {"src": "x"}, {"dst": "y"}, negslope=negslope)]


def test_float_param_beyond_a_c_float_is_refused_with_the_op_named(tmp_path: Path) -> None:
    error = refused(tmp_path, lrelu(1e39), ForeignFormatError, "is 1e\\+39, out of the range of a C float",
                    params={"x": np.zeros(4, np.float32)})
    assert "ops[1] 'act' (lrelu): param 'negslope'" in error.message
    assert error.location.line == line_of(Path(error.location.file), "act")


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 10**400], ids=["inf", "-inf", "nan", "10^400"])
def test_non_finite_params_of_a_document_are_refused_with_the_op_named(tmp_path: Path, value: Any) -> None:
    path = write(tmp_path, document(*lrelu(0.5)))
    with pytest.raises(ForeignFormatError, match="ops\\[1\\] 'act' \\(lrelu\\): param 'negslope'") as caught:
        convert_model(path, format="lightnet", document=document(*lrelu(value)), params={"x": np.zeros(4)})
    assert caught.value.location.file == str(path) and caught.value.location.line == line_of(path, "act")


def test_double_data_beyond_a_float_saturates(tmp_path: Path) -> None:
    ops = [op("arange", "a", {}, {"dst": "y"}, dtype="TL_DOUBLE", start=1e300, stop=3e300, step=1e300)]
    module = nnef_torch.load(write(tmp_path, document(*ops)))
    np.testing.assert_array_equal(module().detach().numpy(), np.full(2, np.finfo(np.float32).max))


# ---- options naming what the model lacks -------------------------------------------------------------------------
@pytest.mark.parametrize(("options", "match"), [
    ({"outputs": ["nothing"]}, "outputs= names \\['nothing'\\], which are not tensors of the model; its tensors: "
                               "\\['x', 'y'\\]"),
    ({"outputs": []}, "outputs= names no tensor"),
    ({"outputs": [7]}, "outputs= names \\[7\\]"),
    ({"inputs": ["nothing"]}, "inputs= names \\['nothing'\\], which no create op makes; the created tensors: "
                              "\\['x'\\]"),
    ({"inputs": ["y"]}, "inputs= names \\['y'\\], which no create op makes \\(y computed by ops\\)"),
    ({"inputs": ["x"], "input_shapes": {"x": "abc"}}, "input_shapes gives 'x' the shape"),
    ({"inputs": ["x"], "input_shapes": {"x": [2.5]}}, "input_shapes gives 'x' the shape \\[2.5\\]"),
    ({"inputs": ["x"], "input_shapes": {"x": [2**62, 4]}}, "volume beyond 2\\^63"),
], ids=["missing_output", "no_output", "output_not_a_name", "missing_input", "computed_input", "shape_of_text",
        "fractional_extent", "shape_past_64_bits"])
def test_options_naming_what_the_model_lacks_list_what_it_has(tmp_path: Path, options: dict[str, Any],
                                                              match: str) -> None:
    ops = [create("x", [1, 4]), op("relu", "act", {"src": "x"}, {"dst": "y"})]
    refused(tmp_path, ops, NNEFOptionError, match, **options)


# ---- where errors about 'ops' are placed -----------------------------------------------------------------------
def test_duplicated_ops_key_is_located_at_the_winning_key(tmp_path: Path) -> None:
    good = hand_layout(document(create("x", [1, 4]), op("relu", "act", {"src": "x"}, {"dst": "y"})))
    bad = hand_layout(document(create("x", [1, 4]), op("relu", "act", {"src": "nothing"}, {"dst": "y"})))
    text = good.rstrip().removesuffix("}").rstrip() + ",\n" + bad.strip().removeprefix("{")  # json keeps the last
    path = tmp_path / "model.json"
    path.write_text(text)
    with pytest.raises(ForeignFormatError, match="reads tensor 'nothing'") as caught:
        nnef_torch.load(path)
    lines = text.split("\n")
    winning = max(i for i, line in enumerate(lines, 1) if line.strip() == '"name": "act",') - 1
    assert (caught.value.location.line, caught.value.location.column) == (winning, 9)


def test_ops_that_are_no_array_are_located_at_the_winning_key(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.write_text('{\n  "ops": [],\n  "ops": 7\n}\n')
    with pytest.raises(ForeignFormatError, match="'ops' should be an array") as caught:
        nnef_torch.load(path, format="lightnet")
    assert (caught.value.location.line, caught.value.location.column) == (3, 10)


# ---- the work of a conversion is linear in the model ----------------------------------------------------------------
def lines_run(function: Callable[[], Any]) -> int:
    """The lines of Python that running `function` executes (loop iterations included): a measure of its work
    that does not depend on the machine."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        count += event == "line"
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        function()
    finally:
        sys.settrace(previous)
    return count


def chain_of_rearanges(n: int) -> list[dict[str, Any]]:
    return [create("t0", [4], [4, 3, 2, 1])] + [
        op("rearange", f"r{i}", {"src": f"t{i}"}, {"dst": f"t{i + 1}"}, start=0, stop=4, step=1) for i in range(n)]


def colliding_creates(n: int) -> list[dict[str, Any]]:
    """Creates nothing reads (every one an output), whose names all become one label 'a__'."""
    marks = "!#$%&()*+,-/:;<=>?@[]^{|}~"
    return [create("a" + marks[i % len(marks)] + marks[i // len(marks)], [1], [i]) for i in range(n)]


def outputs_among_dead_tensors(n: int) -> list[dict[str, Any]]:
    """Ops of which every second gives an output (`outputs=`), the others nothing reads."""
    return [create("x", [1, 4], [1, 2, 3, 4])] + [op("relu", f"r{i}", {"src": "x"}, {"dst": f"y{i}"})
                                                  for i in range(n)]


@pytest.mark.parametrize("model", [chain_of_rearanges, colliding_creates, outputs_among_dead_tensors])
def test_conversion_work_is_linear(model: Callable[[int], list[dict[str, Any]]]) -> None:
    def work(n: int) -> int:
        ir = parse_ir(document(*model(n)), None)
        outputs = [f"y{i}" for i in range(0, n, 2)] if model is outputs_among_dead_tensors else None
        return lines_run(lambda: convert_ir(ir, Weights({}, None), outputs=outputs))

    work(10)  # caches filled (the fragment library, the op table)
    small, large = work(300), work(600)  # twice the model: about twice the work (four times, were it quadratic)
    assert large < 2.3 * small, (small, large)


# ---- weight files ------------------------------------------------------------------------------------------------
def test_wts_text_that_is_not_ascii_is_located() -> None:
    with pytest.raises(ForeignFormatError, match="not ASCII: character '\\\\xe9'") as caught:
        wts.read_wts("1\nw 0 1 3f80000\u00e9\n", "w.wts")
    assert (caught.value.location.line, caught.value.location.column) == (2, 14)
    with pytest.raises(ForeignFormatError, match="not ASCII: character '\\\\ud800'"):
        wts.read_wts("1\nw\ud800 0 1 3f800000\n", "w.wts")


def test_wts_count_past_the_limit_is_refused_before_the_records_are_read() -> None:
    text = "16385\n" + "".join(f"a{i} 0 1 00000000\n" for i in range(16385))
    with pytest.raises(ForeignFormatError, match=f"{LIMIT} of 16,384") as caught:
        wts.read_wts(text, "w.wts")
    assert (caught.value.location.line, caught.value.location.column) == (1, 1)


def test_wts_name_longer_than_lightnet_reads_is_refused() -> None:
    with pytest.raises(ForeignFormatError, match="longer than LightNet's names \\(511 characters\\)") as caught:
        wts.read_wts(f"1\n  {'w' * 512} 0 1 3f800000\n", "w.wts")
    assert (caught.value.location.line, caught.value.location.column) == (2, 3)
    assert list(wts.read_wts(f"1\n{'w' * 511} 0 1 3f800000\n")) == ["w" * 511]


def test_wts_items_in_other_layouts_have_a_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wts, "MAX_LOOSE_ITEMS", 200)  # lines of more than 256 bytes not laid out as genwts.pl's
    loose, prefixed = "a 0 150" + " 1" * 150 + "\n", "b 0 100" + " 0x4" * 100 + "\n"
    canonical = "c 0 40" + " 3f800000" * 40 + "\n"
    found = wts.read_wts("2\n" + loose + canonical)
    assert found["a"].view(np.uint32).tolist() == [1] * 150 and found["c"].tolist() == [1.0] * 40
    with pytest.raises(ForeignFormatError, match="'b' holds 100 items not laid out as genwts.pl writes them") as caught:
        wts.read_wts("3\n" + loose + canonical + prefixed, "w.wts")
    assert (caught.value.location.line, caught.value.location.column) == (4, 1)


def test_wts_keeps_only_the_arrays_wanted() -> None:
    text = wts.write_wts({f"a{i}": np.full(3, i, np.float32) for i in range(15)})
    contents = wts.scan_wts(text.encode(), "w.wts", wanted={"a3", "a7", "gone"})
    assert list(contents.arrays) == ["a3", "a7"] and contents.arrays["a7"].tolist() == [7.0] * 3
    assert contents.others == 13 and contents.other_names == tuple(f"a{i}" for i in (0, 1, 2, 4, 5, 6, 8, 9, 10, 11))
    with pytest.raises(ForeignFormatError, match="item 2 of array 'a14' is '416000zz'"):  # all is checked
        wts.scan_wts(text[:-3].encode() + b"zz\n", "w.wts", wanted={"a3"})


def npz(tmp_path: Path, header_shape: tuple[int, ...], data: bytes, compress: bool = False) -> Path:
    """An .npz archive of one float32 member 'w' whose header says `header_shape`, followed by `data`."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": header_shape})
    path = tmp_path / "w.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as archive:
        archive.writestr("w.npy", np.lib.format.MAGIC_PREFIX + b"\x01\x00" + header.getvalue()[8:] + data)
    return path


def test_npz_member_whose_header_claims_more_than_it_holds_is_refused(tmp_path: Path) -> None:
    path = npz(tmp_path, (100_000, 100_000), np.ones(4, np.float32).tobytes())
    with pytest.raises(ForeignFormatError, match="'w' says it holds 10,000,000,000 items of float32") as caught:
        load_weights(path, str(tmp_path / "m.json"))
    assert caught.value.location.file == str(path)
    assert load_weights(npz(tmp_path, (2, 2), np.ones(4, np.float32).tobytes()), "m.json").arrays["w"].shape == (2, 2)


def test_npz_member_inflating_past_20_times_the_archive_is_refused(tmp_path: Path) -> None:
    path = npz(tmp_path, (16 << 20,), bytes(64 << 20), compress=True)
    with pytest.raises(ForeignFormatError, match="more than 20 times its size"):
        load_weights(path, str(tmp_path / "m.json"))


def test_weights_that_are_a_fifo_are_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "w.wts"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            load_weights(fifo, str(tmp_path / "m.json"))
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001  (reported below)
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=60)  # only catches a hang: the refusal takes no time
    assert outcome and isinstance(outcome[0], ForeignFormatError), outcome
    assert "not a regular file" in outcome[0].message and outcome[0].location.file == str(fifo)


def test_weights_no_create_reads_are_counted_not_kept(tmp_path: Path) -> None:
    path = write(tmp_path, document(create("w", [2], from_file=True)))
    extra = {f"stale{i}": np.zeros(3, np.float32) for i in range(12)}
    path.with_suffix(".wts").write_text(wts.write_wts({**extra, "w": np.array([1, 2], np.float32)}))
    with pytest.warns(UserWarning, match="ignoring 12 weight\\(s\\) .*: stale0, .*, stale9 and 2 more"):
        module = nnef_torch.load(path)
    assert module().tolist() == [1.0, 2.0]
    assert list(load_weights(path.with_suffix(".wts"), str(path), {"w"}).arrays) == ["w"]
