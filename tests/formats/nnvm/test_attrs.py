"""Attribute strings as NNVM's `tuple.h` and dmlc's parameter parser read them (`formats/nnvm/attrs.py`)."""
from __future__ import annotations

import pytest

from nnef_torch.errors import ForeignFormatError
from nnef_torch.formats.nnvm.attrs import Attributes, parse_bool, parse_float, parse_int, parse_tuple


@pytest.mark.parametrize("text, value", [
    ("(1, 1)", (1, 1)), ("[3, 3]", (3, 3)), ("(2L, 2L)", (2, 2)), ("1", (1,)), ("(7,)", (7,)), ("()", ()),
    ("((0, 0), (1, 2))", ((0, 0), (1, 2))), ("(None, 3)", (None, 3)), ("(-1, 0, -4)", (-1, 0, -4)),
    (" ( 1 ,2 ) ", (1, 2)), ("(1.5, 2)", (1.5, 2)), ("[]", ()),
])
def test_tuples(text, value):
    assert parse_tuple(text) == value


@pytest.mark.parametrize("text", ["(1, 2", "1, 2)", "(1 2)", "(a, b)", "", "((1)", "(1,,2)"])
def test_bad_tuples(text):
    with pytest.raises(ValueError):
        parse_tuple(text)


@pytest.mark.parametrize("text, value", [("True", True), ("False", False), ("1", True), ("0", False),
                                         ("true", True)])
def test_booleans(text, value):
    assert parse_bool(text) is value


@pytest.mark.parametrize("text, value", [("1e-05", 1e-5), ("0.9", 0.9), ("-2", -2.0), ("3.", 3.0), (".5", 0.5),
                                         ("1e-3f", 1e-3)])
def test_numbers(text, value):
    assert parse_float(text) == pytest.approx(value)


def test_integers():
    assert parse_int("64") == 64 and parse_int("2L") == 2 and parse_int("-3") == -3
    for bad in ("1.0", "x", "1" + "0" * 30):
        with pytest.raises(ValueError):
            parse_int(bad)


def test_attributes_read_by_type_and_remember_what_was_read():
    attrs = Attributes({"kernel": "(3, 3)", "no_bias": "True", "eps": "1e-05", "axis": "None", "__shape__": "(1,)",
                        "unknown": "x"}, "node 2 'conv' (Convolution)", "m-symbol.json")
    assert attrs.ints("kernel", length=2) == (3, 3)
    assert attrs.bool("no_bias") is True
    assert attrs.float("eps") == pytest.approx(1e-5)
    assert attrs.int("axis", 1) == 1  # "None": an unset optional takes the default
    assert attrs.int("num_group", 1) == 1
    assert attrs.unread() == ["unknown"]  # hidden attributes (__shape__) never count
    with pytest.raises(ForeignFormatError, match=r"node 2 'conv' \(Convolution\): attribute 'kernel' must have 3"):
        attrs.ints("kernel", length=3)
    with pytest.raises(ForeignFormatError, match="attribute 'stride' is missing"):
        attrs.ints("stride")
    with pytest.raises(ForeignFormatError, match="must be one of"):
        attrs.choice("unknown", ("a", "b"))
