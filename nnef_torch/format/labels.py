"""Variable labels (spec 4.1.3) and the tensor files they name (spec 5.1): 'conv1/filter' -> 'conv1/filter.dat'.

A label is checked once, when the `variable` that declares it is lowered, so that an unsafe one is refused at its
line; the container checks again before it touches a file.
"""
from __future__ import annotations

import re

from nnef_torch.errors import Location, NNEFContainerError

LABEL_CHARS = re.compile(r"[A-Za-z0-9_\-./\\]+")  # spec 4.1.3


def label_problem(label: object) -> str | None:
    """What makes `label` unusable as the label of a tensor file inside the model folder, or None."""
    if not isinstance(label, str) or not LABEL_CHARS.fullmatch(label):
        return "must be a non-empty string of letters, digits and _ - . / \\"
    parts = label.replace("\\", "/").split("/")
    if parts[0] == "" and len(parts) > 1:
        return "must name a file inside the model folder, not an absolute path"
    if {"", ".", ".."} & set(parts):
        return "must name a file inside the model folder: its parts between / or \\ may not be empty, '.' or '..'"
    return None


def label_to_relpath(label: str) -> str:
    """The relative path ('/'-separated) of a variable's tensor file; a backslash separates parts like '/'.

    Raises NNEFContainerError for labels that `label_problem` refuses.
    """
    problem = label_problem(label)
    if problem:
        raise NNEFContainerError(f"tensor label {label!r} {problem}", Location(file=str(label)))
    return label.replace("\\", "/") + ".dat"
