"""Every standard operation has a torch implementation and at least one table row testing it."""
from __future__ import annotations

import importlib

from fragment_libraries import library_fragments
from ops.torch_harness import OpCase

from nnef_torch.ir.deviations import LENIENT_OPS
from nnef_torch.ops import registry
from nnef_torch.stdlib import standard_fragments

TABLES = ("test_torch_elementwise", "test_torch_reduce", "test_torch_tensor", "test_torch_conv", "test_torch_pool",
          "test_torch_sampling")
SIGNATURE_OPS = {"external", "variable", "update"}  # the importer maps these to arguments, Parameters and buffers


def _rows() -> list[OpCase]:
    rows = []
    for name in TABLES:
        module = importlib.import_module(f"ops.{name}")
        for value in vars(module).values():
            if isinstance(value, list):
                rows.extend(item for item in value if isinstance(item, OpCase))
    return rows


def test_every_standard_operation_has_a_torch_implementation():
    missing = sorted(name for name in standard_fragments()
                     if name not in SIGNATURE_OPS and (registry.entry(name, "torch") is None or registry.entry(name, "torch").torch is None))
    assert not missing


def test_every_implementation_has_test_rows():
    # the implementations of front-end fragments (lightnet_sort1d, ...) are tested with their front end
    tested = {row.op for row in _rows()}
    standard = set(registry.torch_ops()) & set(standard_fragments())
    assert not sorted(standard - tested)
    assert len(standard) == len(standard_fragments()) - len(SIGNATURE_OPS)
    assert set(registry.torch_ops()) - standard <= library_fragments() | LENIENT_OPS  # and what producers write
