"""The documentation's operation coverage tables: generated from the op table, in sync, and checked against independent lists."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tools.coverage import (
    END,
    FRONTEND_START,
    PAGES,
    START,
    SUMMARY_START,
    coverage_markdown,
    frontend_markdown,
    replace_section,
    update,
)

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\|[^|]*\| `(\w+)` \| ([^|]+) \| ([^|]+) \|$", re.M)


def _rows() -> dict[str, tuple[str, str]]:
    return {name: (importing.strip(), exported.strip()) for name, importing, exported in ROW.findall(coverage_markdown())}


def test_documentation_tables_are_the_generated_ones():
    operations, formats, readme = (ROOT / page for page in PAGES)
    assert START in operations.read_text(encoding="utf-8") and END in operations.read_text(encoding="utf-8")
    assert FRONTEND_START.format(format="nnvm") in formats.read_text(encoding="utf-8")
    assert FRONTEND_START.format(format="lightnet") in formats.read_text(encoding="utf-8")
    assert FRONTEND_START.format(format="onnx") in formats.read_text(encoding="utf-8")
    assert SUMMARY_START.format(format="onnx") in readme.read_text(encoding="utf-8")
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        assert update(text) == text, f"{page} is stale: run `python tools/coverage.py --update`"


def test_every_operation_the_khronos_parser_defines_is_listed_and_imports():
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    rows = _rows()
    defined = set()
    for name in nnef.StandardOperations:  # the set also names avg_unpool/max_unpool, which its parser rejects
        try:
            nnef.parse_string(f"version 1.0;\ngraph G( x ) -> ( y )\n{{\n    x = external(shape = [1]);\n"
                              f"    y = {name}(x);\n}}\n")
        except nnef.Error as error:
            if "undefined operation" in str(error):
                continue
        defined.add(name)
    assert defined == set(rows)
    assert all(importing != "**missing**" for importing, _ in rows.values())


def test_export_column_names_real_torch_operations():
    rows = _rows()
    named = {name.strip("`") for _, exported in rows.values() if exported != "-" for name in exported.split(", ")}
    assert {"conv2d", "linear", "relu", "batch_norm", "max_pool2d", "nnef_torch.fake_quantize"} <= named
    import nnef_torch.quant.functional  # noqa: F401  (registers torch.ops.nnef_torch.fake_quantize)

    def exists(name: str) -> bool:
        namespace, _, op = name.rpartition(".")
        return hasattr(getattr(torch.ops, namespace or "aten"), op)
    assert [name for name in named if not exists(name)] == []


def test_replace_section_needs_the_markers():
    with pytest.raises(ValueError, match="op-coverage"):
        replace_section("# no table here\n", "| x |\n")


def test_onnx_table_names_real_operators_of_the_default_domain():
    onnx = pytest.importorskip("onnx")
    known = {schema.name for schema in onnx.defs.get_all_schemas_with_history() if schema.domain in ("", "ai.onnx")}
    listed = set(re.findall(r"`(\w+)`", frontend_markdown("onnx").split("| NNEF operation |", 1)[1]))
    from nnef_torch.ops import registry
    operators = set(registry.import_targets("onnx")) | set(registry.import_refusals("onnx"))
    assert operators <= listed and operators - known == set()
