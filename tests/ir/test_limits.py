"""The shared limits every reader checks computed sizes against (`nnef_torch.ir.limits`)."""
from __future__ import annotations

import pytest

from nnef_torch.errors import ForeignFormatError, Location, NNEFShapeError
from nnef_torch.ir.limits import MAX_COMPUTED_ITEMS, check_computed, check_count, check_shape


def test_shapes_within_64_bits_pass_and_come_back_as_tuples():
    assert check_shape("x", [2, 3, 0]) == (2, 3, 0)
    assert check_shape("x", [2 ** 31, 2 ** 31]) == (2 ** 31, 2 ** 31)


@pytest.mark.parametrize("shape, why", [
    ([2, -1], "not an integer from 0"), ([True, 2], "not an integer from 0"), ([2.0], "not an integer from 0"),
    ([2 ** 63], "not an integer from 0"), ([2 ** 32, 2 ** 32], r"volume beyond 2\^63 - 1"),
    ([2 ** 40] * 100_000, r"volume beyond 2\^63 - 1"),  # stops at the first product past the limit
])
def test_bad_shapes_are_refused_with_the_callers_error_and_location(shape, why):
    where = Location("model.json", 3, 7)
    with pytest.raises(ForeignFormatError, match=why) as caught:
        check_shape("node 2 'fc': input shape", shape, where, error=ForeignFormatError)
    assert caught.value.location == where and len(str(caught.value)) < 600


def test_counts_and_computed_arrays():
    assert check_count("split", 4, 8) == 4
    with pytest.raises(NNEFShapeError, match="more than the limit of 8"):
        check_count("split", 9, 8)
    with pytest.raises(NNEFShapeError, match="negative count"):
        check_count("split", -1, 8)
    assert check_computed("arange", MAX_COMPUTED_ITEMS) == MAX_COMPUTED_ITEMS
    with pytest.raises(NNEFShapeError, match="items computed while reading"):
        check_computed("arange", MAX_COMPUTED_ITEMS + 1)
