"""The operations beyond the standard library that the package defines as fragments in its own `.nnef` libraries
(the extension library, each front end's and each dialect's declarations): they may have shape rules and torch
implementations too."""
from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "nnef_torch"


def library_fragments() -> set[str]:
    names: set[str] = set()
    for path in [*PACKAGE.rglob("fragments.nnef"), PACKAGE / "stdlib" / "extensions.nnef", *PACKAGE.rglob("formats/*/declarations.nnef")]:
        names.update(re.findall(r"^fragment\s+(\w+)", path.read_text(encoding="utf-8"), flags=re.M))
    return names
