"""Each torch operation of the table, exported alone: the Khronos parser and shape inference must accept the
document, and every consumer (the Khronos executor, tract, nnef_torch's importer) must reproduce torch's output,
except the consumers a row records as unable to, with the reason. A recorded failure must still happen, so a skip
that is no longer needed is noticed; consumers recorded as crashing the process are not run. The rows marked
`extra` run with NNEF_TORCH_ALL_OPS=1."""
from __future__ import annotations

import os

import pytest

import nnef_torch
from exporter.consumers import export_and_check
from exporter.single_op_rows import ROWS, UNMAPPABLE, Row

pytestmark = pytest.mark.slow

CONSUMERS = ("khronos", "tract", "nnef_torch")
SELECTED = [row for row in ROWS if not row.extra or os.environ.get("NNEF_TORCH_ALL_OPS") == "1"]


def test_rows_are_named_once() -> None:
    names = [row.name for row in ROWS]
    assert len(names) == len(set(names))
    assert all(set(row.skip) | set(row.crashes) <= set(CONSUMERS) for row in ROWS)


@pytest.mark.parametrize("row", SELECTED, ids=lambda row: row.name)
def test_single_op(row: Row, tmp_path) -> None:
    consumers = tuple(c for c in CONSUMERS if c not in row.crashes)
    report = export_and_check(row.module, row.inputs, tmp_path / "model", rtol=row.rtol, consumers=consumers)
    unexpected = {c: why for c, why in report.failures.items() if c not in row.skip}
    assert not unexpected, f"consumers failed: {unexpected}"
    stale = {c: why for c, why in row.skip.items() if c in report.passed}
    assert not stale, f"recorded as failing but passed (remove the skip): {stale}"


@pytest.mark.parametrize("name, module, inputs, reason", UNMAPPABLE, ids=[u[0] for u in UNMAPPABLE])
def test_unmappable_op_raises_export_error(name, module, inputs, reason) -> None:
    with pytest.raises(nnef_torch.ExportError, match=reason):
        nnef_torch.export(module, inputs)
