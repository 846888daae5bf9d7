"""Every LightNet optype, one row per op and param setting (`lightnet_op_rows`): a LightNet JSON IR written as the
documentation lays it out, read by nnef_torch with its inputs named, must give the output of a twin written by hand
from the op definitions; saved as NNEF, it must pass the Khronos parser and give the same output in the Khronos
executor (`nnef.Session`), except where a row records why the executor cannot."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from exporter.consumers import close_all, khronos_parse

import nnef_torch
from formats.khronos_session import check_session
from formats.lightnet.lightnet_ir import write
from formats.lightnet.lightnet_op_rows import COVERED, ROWS, Row
from nnef_torch.formats import convert
from nnef_torch.formats.lightnet.optypes import OPTYPES


def outputs_of(module: torch.nn.Module, inputs: list[np.ndarray]) -> list[np.ndarray]:
    with torch.no_grad():
        found = module(*[torch.from_numpy(np.ascontiguousarray(x)) for x in inputs])
    found = found if isinstance(found, (tuple, list)) else [found]
    return [value.numpy() for value in found]


def expected_of(row: Row) -> list[np.ndarray]:
    found = row.twin(*[value for _, value in row.inputs])
    return [np.asarray(value) for value in (found if isinstance(found, list) else [found])]


def test_rows_are_named_once() -> None:
    names = [row.name for row in ROWS]
    assert len(names) == len(set(names)), sorted(name for name in names if names.count(name) > 1)


def test_every_optype_has_a_row_and_a_rule() -> None:
    from nnef_torch.formats.lightnet import rules  # noqa: F401
    from nnef_torch.ops.registry import import_rules
    assert sorted(set(OPTYPES) - COVERED) == []
    assert sorted(set(OPTYPES) - set(import_rules("lightnet"))) == []


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_lightnet_op(row: Row, tmp_path: Path) -> None:
    path = write(tmp_path / "ir", row.document())
    names = [name for name, _ in row.inputs]
    module = nnef_torch.load(path, inputs=names, outputs=row.outputs)
    # tools/il2json's layout (sorted keys, 3-space indent) reads as the same model
    other = write(tmp_path / "ir", row.document(), layout="il2json", name="model_il2json.json")
    assert convert(other, inputs=names, outputs=row.outputs).text.replace("model_il2json", "model") == \
        module.nnef.graph_text
    inputs = [value for _, value in row.inputs]
    expected = expected_of(row)
    close_all(outputs_of(module, inputs), expected, row.rtol, "nnef_torch")
    folder = tmp_path / "nnef"
    module.save(folder)
    khronos_parse(folder)
    # the executor takes integers as int32; a model with no inputs has one that nothing reads
    feed = [x.astype(np.int32) if x.dtype.kind in "iu" else x for x in inputs] or [np.zeros(1, np.float32)]
    check_session(folder, feed, expected, row.rtol, fails=row.session)
