"""The standard library of NNEF operations, kept as NNEF text (stdlib.nnef) and parsed by our own parser, and beside
it the project's extension library (extensions.nnef): fragments in standard operations for what NNEF has no operation
for, shared by the exporter, the front ends and the writers."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

from nnef_torch.format import ast
from nnef_torch.format.parser import parse_fragments

STDLIB_FILE = "stdlib.nnef"
EXTENSIONS_FILE = "extensions.nnef"


def stdlib_text() -> str:
    return resources.files(__package__).joinpath(STDLIB_FILE).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def standard_fragments() -> dict[str, ast.Fragment]:
    """Every standard operation by name (119 in NNEF 1.0.5), type-checked once."""
    # up-edge kept: ir/ and format/quant_file import the library, which ir's checker checks here, on first use
    from nnef_torch.ir.checker import check_library

    fragments = parse_fragments(stdlib_text(), STDLIB_FILE)
    table = {fragment.name: fragment for fragment in fragments}
    check_library(fragments, table)
    return table


def extension_fragments() -> dict[str, ast.Fragment]:
    """The project's extension library (extensions.nnef): each fragment by name, checked once."""
    from nnef_torch.ir.builder import fragment_library  # cycle: ir.builder imports this module
    return fragment_library(__package__, EXTENSIONS_FILE)

