"""The op table is assembled in one place: every module that adds to it is listed in `registry.FACETS`, and a
lookup loads the facet it asks for."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
