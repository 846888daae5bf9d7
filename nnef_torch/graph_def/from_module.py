"""A network from any torch module, through the exporter."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import nnef_torch
from nnef_torch.graph_def.graph import get_default_graph
from nnef_torch.graph_def.network import ProtoNetwork
from nnef_torch.graph_def.passes import NetworkPass


def create_graph_from_module(name: str, module: Any, example_inputs: Any, names: Mapping[str, str] | None = None,
                             *, variable_batch_size: bool = True) -> ProtoNetwork:
    """Export `module` on `example_inputs` (with a symbolic batch by default) and add it as network `name` to the
    default graph (the innermost `with graph_def.graph()`). `names` renames tensors: {traced name: new name}.
    The network's parameters are copies of the module's, shared by label with the graph's other networks."""
    from nnef_torch.exporter.emitter import exporter_fragments  # lazy: keeps torch out of reading

    model = nnef_torch.export(module, example_inputs, dynamic_batch=variable_batch_size)
    owner = get_default_graph()
    for label, value in model.tensors.items():
        owner.set_parameter(label, value.detach().clone())
    network = ProtoNetwork(owner, name, model.graph, exporter_fragments())
    if names:
        renaming = NetworkPass(name=name)
        for old, new in names.items():
            renaming.rename(old, new)
        network = network.promote(renaming)
    return owner.add(network)
