"""The execution order of a network's functions, walked from its outputs."""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from nnef_torch.errors import NNEFSemanticError
from nnef_torch.graph_def.proto import ACTIVATION, ProtoFunction

if TYPE_CHECKING:
    from nnef_torch.graph_def.network import ProtoNetwork


def writers(network: ProtoNetwork) -> dict[str, ProtoFunction]:
    """The function that writes each activation; NNEFSemanticError when two functions write one variable, or
    a function writes an input or a parameter."""
    found: dict[str, ProtoFunction] = {}
    for function in network.functions.values():
        for name in function.outputs:
            variable = network.variables.get(name)
            if name in found:
                raise NNEFSemanticError(f"variable '{name}' is written by two functions: '{found[name].name}' "
                                        f"({found[name].type}) and '{function.name}' ({function.type})",
                                        function.location)
            if variable is not None and variable.kind != ACTIVATION:
                raise NNEFSemanticError(f"function '{function.name}' ({function.type}) writes '{name}', which is "
                                        f"a{'n' if variable.kind == 'input' else ''} {variable.kind}",
                                        function.location)
            found[name] = function
    return found


def forward_sequence(network: ProtoNetwork) -> Iterator[ProtoFunction]:
    """Functions that reach an output or an `update`, each once the functions writing its inputs have run (in
    the order the network lists them among those ready at the same time)."""
    written_by = writers(network)
    targets = list(network.outputs) + [update.value for update in network.graph.signature.updates
                                       if isinstance(update.value, str)]
    needed: dict[str, ProtoFunction] = {}
    pending = deque(targets)
    for function in network.functions.values():  # `update` itself writes no activation anyone reads
        if function.type == "update":
            needed[function.name] = function
            pending.extend(function.inputs)
    while pending:
        name = pending.popleft()
        function = written_by.get(name)
        if function is None or function.name in needed:
            continue
        needed[function.name] = function
        pending.extend(function.inputs)
    order = {name: index for index, name in enumerate(network.functions)}
    waiting = {name: {written_by[i].name for i in function.inputs if i in written_by}
               for name, function in needed.items()}
    users: dict[str, list[str]] = {name: [] for name in needed}
    for name, producers in waiting.items():
        for producer in producers:
            users[producer].append(name)
    ready = sorted((name for name, producers in waiting.items() if not producers), key=order.__getitem__)
    queue = deque(ready)
    visited = 0
    while queue:
        name = queue.popleft()
        visited += 1
        yield needed[name]
        for user in sorted(users[name], key=order.__getitem__):
            waiting[user].discard(name)
            if not waiting[user]:
                queue.append(user)
    if visited != len(needed):
        stuck = sorted((name for name, producers in waiting.items() if producers), key=order.__getitem__)
        raise NNEFSemanticError(f"functions {stuck[:5]} wait on each other (a cycle)", needed[stuck[0]].location)
