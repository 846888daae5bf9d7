"""The op table is assembled in one place: every module that adds to it is listed in `registry.FACETS`, and a
lookup loads the facet it asks for. A dialect's table is layered on the standard one, which never sees its ops."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from nnef_torch.ops import registry

PACKAGE = Path(registry.__file__).resolve().parents[1]
DECORATORS = re.compile(r"^@(shape_rule|torch_op|torch_module|export_rule|import_rule|write_rule|lowering_rule)\(",
                        re.MULTILINE)


def test_every_module_that_adds_to_the_table_is_listed():
    listed = {module for modules in registry.FACETS.values() for module in modules}
    adding = set()
    for path in PACKAGE.rglob("*.py"):
        if DECORATORS.search(path.read_text(encoding="utf-8")):
            adding.add(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
    assert sorted(adding - listed) == []


def test_a_lookup_loads_only_its_facet():
    code = ("import sys; from nnef_torch.ops import registry; e = registry.entry('conv'); "
            "print(e.shape is not None, e.torch is None, 'torch' in sys.modules, bool(registry.export_rules()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "False", "True"]


def test_a_dialect_table_sees_the_standard_ops():
    conv = registry.entry("conv", "torch")
    assert registry.entry("conv", "torch", dialect="tract_core") is conv
    assert registry.entry("tract_core_einsum", "torch", dialect="tract_core").torch is not None
    assert {"conv", "tract_core_erf"} <= set(registry.shape_rules("tract_core"))
    assert {"conv", "tract_core_erf"} <= set(registry.torch_ops("tract_core"))


def test_the_standard_table_does_not_see_dialect_ops():
    registry.require("dialect:tract_core")  # loaded, still not standard
    assert registry.entry("tract_core_einsum", "torch") is None
    assert registry.entry("tract_core_erf") is None
    assert not any(name.startswith("tract_core_") for name in registry.shape_rules())
    assert not any(name.startswith("tract_core_") for name in registry.torch_ops())
    assert registry.lowering_rule_of("tract_core_cast", None) is None
    assert registry.lowering_rule_of("tract_core_cast", "tract_core") is not None


def test_registering_a_dialect_op_twice_raises():
    registry.require("dialect:tract_core")
    with pytest.raises(RuntimeError, match="'tract_core_erf' already has a shape rule in the tract_core table"):
        registry.shape_rule("tract_core_erf", dialect="tract_core")(lambda x: x)
    with pytest.raises(RuntimeError, match="'tract_core_cast' already has a lower rule in the tract_core table"):
        registry.lowering_rule("tract_core_cast", dialect="tract_core")(lambda *args: None)


def test_the_extension_line_chooses_the_table():
    assert registry.dialect_of(("tract_registry", "tract_core")) == "tract_core"
    assert registry.dialect_of(("KHR_enable_fragment_definitions", "tract_registry", "tract_core")) == "tract_core"
    assert registry.dialect_of(("tract_core",)) is None
    assert registry.dialect_of(("KHR_enable_fragment_definitions",)) is None
    with pytest.raises(ValueError, match="no op table for dialect 'tract_nn'"):
        registry.entry("conv", dialect="tract_nn")
