"""The `tract_transformers` dialect: the language-model operations of tract's transformers registry (sonos/tract,
`transformers/src/ops/`) that torch_to_nnef's `TractNNEF` target writes (`tract_transformers_sdpa`,
`tract_transformers_rms_norm`, ...).

A document that declares `extension tract_registry tract_transformers;` (beside `tract_core`) sees the declarations
of `declarations.nnef` and reads with this dialect's op table, layered on tract_core's (`registry.LAYERED_ON`): its
ops, then tract_core's, then the standard ones. The ops keep their names in the IR and have shape rules and
differentiable torch implementations (`ops.py`); the tract_core reader prepares the document
(`nnef_torch.formats.tract_core.prepare`) and its writer writes them back for tract (`save(target="tract")`).
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

from nnef_torch.format import ast
from nnef_torch.format.parser import parse_fragments
from nnef_torch.ops.registry import require

DIALECT = "tract_transformers"
DECLARATIONS_FILE = "declarations.nnef"
HEADER = "extension tract_registry tract_transformers;"


@lru_cache(maxsize=1)
def declarations() -> dict[str, ast.Fragment]:
    require("dialect:" + DIALECT)  # the dialect's ops in its op table
    text = resources.files(__package__).joinpath(DECLARATIONS_FILE).read_text(encoding="utf-8")
    return {fragment.name: fragment for fragment in parse_fragments(text, DECLARATIONS_FILE)}


__all__ = ["DIALECT", "HEADER", "declarations"]
