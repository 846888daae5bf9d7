"""Export of torch.gather, sort, argsort and topk (nnef_torch/exporter/rules/indexing.py), checked in the Khronos
parser and executor, tract and re-import against torch; gradients against torch's; value-dependent shapes refused."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nnef_torch
from exporter.consumers import close_all, export_and_check, khronos_parse, run_khronos, run_tract
from exporter.grads import check_gradients
from exporter.single_op_rows import Fn
from nnef_torch.ops import registry

NO_CAST = "tract's standard NNEF has no `cast` (nor `gather`)"
NO_GATHER = "tract's standard NNEF has no `gather`"
_GEN = torch.Generator().manual_seed(19)


def _tuple(value):
    return value if isinstance(value, tuple) else (value,)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def ties(*shape: int) -> torch.Tensor:
    """Few distinct values (many ties), both infinities and NaNs (which torch sorts as the largest values)."""
    x = torch.randint(-2, 3, shape, generator=_GEN).float()
    x.view(-1)[0], x.view(-1)[-1], x.view(-1)[1], x.view(-1)[-3] = float("inf"), -float("inf"), *[float("nan")] * 2
    return x


GATHERS = [
    ("dim1", lambda x, i: torch.gather(x, 1, i), (randn(3, 4), torch.randint(0, 4, (2, 6), generator=_GEN))),
    ("dim_negative", lambda x, i: torch.gather(x, -2, i),
     (randn(2, 5, 3), torch.randint(0, 5, (2, 7, 2), generator=_GEN))),
    ("take_along_dim", lambda x, i: torch.take_along_dim(x, i, 0),
     (randn(4, 3), torch.randint(0, 4, (2, 3), generator=_GEN))),
]


@pytest.mark.parametrize("fn, inputs", [g[1:] for g in GATHERS], ids=[g[0] for g in GATHERS])
def test_gather(fn, inputs, tmp_path) -> None:
    module = Fn(fn)
    report = export_and_check(module, inputs, tmp_path / "model")
    assert set(report.passed) == {"khronos", "nnef_torch"}, report.failures
    assert "cast" in report.failures["tract"] or "gather" in report.failures["tract"], NO_CAST
    check_gradients(module, inputs, tmp_path / "model")


class GatherBuffer(torch.nn.Module):
    """An index known at export time: its linear indices are written as a constant, with no `cast`."""

    def __init__(self):
        super().__init__()
        self.register_buffer("index", torch.tensor([[2, 0, 1], [1, 1, 0]]))

    def forward(self, x):
        return torch.gather(x, 1, self.index)


def test_gather_with_constant_index(tmp_path) -> None:
    inputs = (randn(2, 3),)
    report = export_and_check(GatherBuffer(), inputs, tmp_path / "model")
    assert set(report.passed) == {"khronos", "nnef_torch"}, report.failures
    text = (tmp_path / "model" / "graph.nnef").read_text()
    assert "cast" not in text and "gather" in text
    assert "gather" in report.failures["tract"], NO_GATHER


SORTS = [  # stable references: torch's default sort may order ties either way, the export keeps input order
    ("sort_descending", lambda x: torch.sort(x, dim=-1, descending=True, stable=True), (ties(3, 20),)),
    ("sort_axis0", lambda x: torch.sort(x, dim=0, stable=True), (ties(18, 2),)),
    ("argsort", lambda x: torch.argsort(x, dim=1, stable=True), (ties(2, 17, 2),)),
    ("topk_largest", lambda x: torch.topk(x, 4, dim=-1), (randn(3, 20),)),
    ("topk_smallest", lambda x: torch.topk(x, 3, dim=0, largest=False), (randn(20, 3),)),
]


def _exactly(found, expected) -> None:
    assert len(found) == len(expected)
    for f, x in zip(found, expected):
        np.testing.assert_array_equal(np.asarray(f).astype(x.dtype), x)  # exact: infinities and NaN included


@pytest.mark.parametrize("fn, inputs", [s[1:] for s in SORTS], ids=[s[0] for s in SORTS])
def test_sort_and_topk(fn, inputs, tmp_path, monkeypatch) -> None:
    module = Fn(fn)
    folder = tmp_path / "model"
    nnef_torch.export(module, inputs).save(folder)
    text = (folder / "graph.nnef").read_text()
    assert "fragment stable_sort(" in text or "fragment stable_topk(" in text
    khronos_parse(folder)
    out = module(*inputs)
    expected = [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]
    arrays = [x.numpy() for x in inputs]
    _exactly(run_khronos(folder, arrays), expected)  # the fragments' bodies, lowered
    _exactly(run_tract(folder, arrays), expected)
    _exactly([o.detach().numpy() for o in _tuple(nnef_torch.load(folder)(*inputs))], expected)  # torch.sort
    for name in ("stable_sort", "stable_topk"):  # without the native kernels our importer runs the bodies
        monkeypatch.setattr(registry.entry(name), "torch", None)
    _exactly([o.detach().numpy() for o in _tuple(nnef_torch.load(folder)(*inputs))], expected)
    monkeypatch.undo()
    if not isinstance(fn(*inputs), torch.Tensor):
        check_gradients(module, inputs, tmp_path / "model")


def test_topk_ties_are_stable(tmp_path) -> None:
    """torch.topk orders equal items as it likes; the export takes the first k of the stable sort."""
    x = ties(2, 18)
    nnef_torch.export(Fn(lambda x: torch.topk(x, 5, dim=1)), (x,)).save(tmp_path / "model")
    values, indices = nnef_torch.load(tmp_path / "model")(x)
    reference = torch.sort(x, dim=1, descending=True, stable=True)
    torch.testing.assert_close(values, reference.values[:, :5], rtol=0, atol=0, equal_nan=True)
    assert torch.equal(indices, reference.indices[:, :5])


def test_sort_body_and_native_kernel_agree(tmp_path, monkeypatch) -> None:
    """By default the importer runs `stable_sort` as torch.sort (kept atomic); without that implementation it runs
    the fragment's body. Both give the stable sort, including on integers."""
    x = torch.randint(-3, 4, (2, 19), generator=_GEN)
    module = Fn(lambda x: torch.sort(x, dim=1, descending=True, stable=True))
    nnef_torch.export(module, (x,)).save(tmp_path / "model")
    expected = list(module(x))
    native = nnef_torch.load(tmp_path / "model")
    assert "torch.sort" in native.code or "sort(" in native.code
    close_all(list(native(x)), expected)
    monkeypatch.setattr(registry.entry("stable_sort"), "torch", None)
    lowered = nnef_torch.load(tmp_path / "model")
    assert "argmax" in lowered.code
    found = list(lowered(x))
    close_all(found, expected)
    assert found[0].dtype == torch.int64 and found[1].dtype == torch.int64


VALUE_SHAPED = [
    ("nonzero", lambda x: torch.nonzero(x)),
    ("unique", lambda x: torch.unique(x)),
    ("boolean_mask", lambda x: x[x > 0]),
]


@pytest.mark.parametrize("fn", [v[1] for v in VALUE_SHAPED], ids=[v[0] for v in VALUE_SHAPED])
def test_value_dependent_shapes_are_refused(fn) -> None:
    with pytest.raises(nnef_torch.ExportError, match="depends on tensor values"):
        nnef_torch.export(Fn(fn), (randn(3, 4),))


def test_an_empty_slice_only_concatenated_is_dropped(tmp_path) -> None:
    """Phi-3's rotary embedding over the whole head concatenates an empty pass-through part; NNEF tensors are never
    empty, so the part is left out of the `concat`."""
    module = Fn(lambda v: torch.cat([v[:, 4:], v * 2, v[:, 1:]], 1))
    report = export_and_check(module, (randn(3, 4),), tmp_path / "model")
    assert set(report.passed) == {"khronos", "tract", "nnef_torch"}, report.failures
