"""The casting rules of spec 3.3.1, row by row."""
from __future__ import annotations

import pytest

from nnef_torch.format.ast import ArrayType, TensorType, TupleType
from nnef_torch.ir import types as T

S, I, L, STR, G = T.SCALAR, T.INTEGER, T.LOGICAL, T.STRING, T.GENERIC

CASTS = [
    (S, S, True), (I, S, False), (S, I, False), (L, I, False),
    (S, TensorType(S), True), (I, TensorType(I), True), (I, TensorType(S), False), (L, TensorType(L), True),
    (S, G, True), (STR, G, True), (TensorType(S), TensorType(G), True), (TensorType(None), TensorType(G), False),
    (TensorType(S), TensorType(None), True), (TensorType(I), TensorType(None), True), (S, TensorType(None), True),
    (TensorType(S), S, False), (TensorType(S), TensorType(I), False),
    (ArrayType(I), ArrayType(I), True), (ArrayType(S), ArrayType(TensorType(S)), True),
    (ArrayType(I), ArrayType(S), False), (T.EMPTY_ARRAY, ArrayType(I), True), (ArrayType(I), T.EMPTY_ARRAY, False),
    (T.EMPTY_ARRAY, ArrayType(TupleType((I, I))), True), (T.EMPTY_ARRAY, I, False),
    (TupleType((I, S)), TupleType((I, S)), True), (TupleType((I, I)), TupleType((I, I, I)), False),
    (TupleType((S, S)), TupleType((TensorType(S), TensorType(S))), True),
    (ArrayType(TupleType((I, I))), ArrayType(TupleType((I, I))), True),
]


@pytest.mark.parametrize("source,target,allowed", CASTS, ids=[f"{s}->{t}" for s, t, _ in CASTS])
def test_implicit_casts(source, target, allowed):
    assert T.can_cast(source, target) is allowed


def test_common_type_and_generic_substitution():
    assert T.common_type(I, TensorType(I)) == TensorType(I)
    assert T.common_type(I, S) is None
    assert T.common_type(T.EMPTY_ARRAY, ArrayType(S)) == ArrayType(S)
    assert T.substitute(ArrayType(TensorType(G)), I) == ArrayType(TensorType(I))
    found: set[str] = set()
    T.deduce(TensorType(G), S, found)
    T.deduce(ArrayType(G), ArrayType(I), found)
    assert found == {"scalar", "integer"}
