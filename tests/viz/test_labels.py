"""Attributes in drawings: defaults hidden, values written as NNEF and shortened."""
from __future__ import annotations

import pytest

from nnef_torch.viz import labels
from nnef_torch.viz.labels import shown_attributes, value_text


def test_attributes_at_their_default_are_hidden():
    conv = {"border": "constant", "padding": [(1, 1), (1, 1)], "stride": [], "dilation": [], "groups": 1}
    assert shown_attributes("conv", conv) == [("padding", [(1, 1), (1, 1)])]
    # a value of another type than the default is shown ('groups = 1.0' is not the integer default)
    assert shown_attributes("conv", {"groups": 1.0}) == [("groups", 1.0)]
    assert shown_attributes("my_custom_op", {"alpha": 1}) == [("alpha", 1)]
    assert shown_attributes(None, {"alpha": 1}) == [("alpha", 1)]


@pytest.mark.parametrize("value, text", [
    (True, "true"), (3, "3"), (0.5, "0.5"), (1e-05, "1.0e-05"), ("ignore", "'ignore'"), ("it's", "'it\\'s'"),
    ([2, 2], "[2, 2]"), ([(1, 1), (0, 0)], "[(1, 1), (0, 0)]"), ([], "[]"), (None, "none"),
    (list(range(8)), "[0, 1, 2, 3, 4, 5, 6, 7]"),
    (list(range(20)), "[0, 1, 2, 3, 4, 5, … 20 items]"),
])
def test_value_text(value, text):
    assert value_text(value) == text


def test_value_text_cuts_long_values():
    text = value_text("x" * 200)
    assert len(text) == labels.VALUE_CHARS and text.endswith("…")
    assert value_text("x" * 200, limit=300) == "'" + "x" * 200 + "'"
