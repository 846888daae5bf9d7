"""Variable labels -> attribute paths of the module (`conv1/filter` -> `conv1.filter`, its state_dict key).

A label's `/` (or `\\`) and `.` separate submodules. Segments that generated code cannot spell (Python keywords,
empty segments) or that a module already uses as an attribute (`half`, `forward`) get a trailing `_`, and a label
whose path would clash with another's (`a` and `a/b`, `a/b` and `a.b`) falls back to one flat, unique attribute
name, so every label keeps its own tensor.
"""
from __future__ import annotations

import functools
import keyword
import re
from collections.abc import Iterable, Mapping

_SEPARATORS = re.compile(r"[/\\.]")


def label_paths(labels: Iterable[str], names: Mapping[str, str] | None = None) -> dict[str, str]:
    """Map each label (first spelling of each case-insensitive key) to a unique dotted attribute path; where
    `names` gives a label another name (a front end's own, which no label can hold), the path follows that."""
    paths: dict[str, str] = {}
    leaves: set[str] = set()
    modules: set[str] = set()
    for label in labels:
        name = (names or {}).get(label, label)
        path = ".".join(_segment(part) for part in _SEPARATORS.split(name))
        if _clashes(path, leaves, modules):
            path = _unique("_".join(_segment(part) for part in _SEPARATORS.split(name)), leaves, modules)
        parts = path.split(".")
        modules.update(".".join(parts[:i]) for i in range(1, len(parts)))
        leaves.add(path)
        paths[label] = path
    return paths


def _segment(part: str) -> str:
    if not part:
        return "_"
    return part + "_" if keyword.iskeyword(part) or part in _reserved() else part


@functools.lru_cache(maxsize=1)
def _reserved() -> frozenset[str]:
    """Names a module already uses (`half`, `forward`, `graph`, ...): a tensor cannot take them."""
    # cycle: importer.build imports this module, and importer.module imports importer.build
    from nnef_torch.importer.build import OP_MODULES, QUANTIZERS
    from nnef_torch.importer.module import NNEFModule
    return frozenset(dir(NNEFModule)) | {"meta", "training", "_graph", "_code", QUANTIZERS, OP_MODULES}


def _clashes(path: str, leaves: set[str], modules: set[str]) -> bool:
    parts = path.split(".")
    prefixes = {".".join(parts[:i]) for i in range(1, len(parts))}
    return path in leaves or path in modules or bool(prefixes & leaves)


def _unique(name: str, leaves: set[str], modules: set[str]) -> str:
    candidate, n = name, 1
    while candidate in leaves or candidate in modules:
        candidate, n = f"{name}_{n}", n + 1
    return candidate
