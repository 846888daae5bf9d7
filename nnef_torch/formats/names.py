"""Names the front ends give: a variable's label from a parameter's name in the file, the graph's name from the
file's."""
from __future__ import annotations

import re

from nnef_torch.format.labels import label_problem


def label_base(name: str) -> str:
    """`name` as it is if a label can hold it, else with every character a label cannot hold replaced by '_'."""
    return name if label_problem(name) is None else \
        "".join(c if c.isascii() and (c.isalnum() or c in "_-.") else "_" for c in name)


class Labels:
    """The NNEF label of each parameter: its name, with the characters labels cannot hold (anything but ASCII
    letters, digits and _ - . /) replaced by '_', made unique ignoring case with a suffix. The module keeps such a
    parameter under its own name where that is a dotted path of Python identifiers (MXNet allows any name: 'é_w')."""

    def __init__(self) -> None:
        self.by_name: dict[str, str] = {}
        self._taken: set[str] = set()  # the labels given, lower-cased
        self._counters: dict[str, int] = {}  # the last suffix given to each base

    def label(self, name: str) -> str:
        if name in self.by_name:
            return self.by_name[name]
        base = label_base(name)
        label, n = base, self._counters.get(base.lower(), 0)
        while label.lower() in self._taken or label_problem(label) is not None:
            n += 1
            label = f"{base}_{n}"
        self._counters[base.lower()] = n
        self._taken.add(label.lower())
        self.by_name[name] = label
        return label

    def names(self) -> dict[str, str]:
        """label -> name, for the names the labels could not keep that can name a module's tensor."""
        return {label: name for name, label in self.by_name.items()
                if label != name and all(part.isidentifier() for part in re.split(r"[/\\.]", name))}


def graph_name(name: str) -> str:
    """An NNEF identifier made from a file's name: ASCII letters, digits and '_', starting with a letter."""
    base = "".join(c if c.isascii() and c.isalnum() or c == "_" else "_" for c in name) or "G"
    return base if base[0].isalpha() else "G_" + base
