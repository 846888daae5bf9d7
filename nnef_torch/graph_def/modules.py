"""A network's generated torch module, holding its ProtoGraph's shared tensors."""
from __future__ import annotations

from typing import TYPE_CHECKING

from nnef_torch.errors import NNEFError
from nnef_torch.options import ReadOptions
from nnef_torch.reader import ModelSource

if TYPE_CHECKING:
    from nnef_torch.graph_def.network import ProtoNetwork
    from nnef_torch.importer.module import NNEFModule


def build_module(network: ProtoNetwork, batch_size: int | None) -> NNEFModule:
    """Generate the module of `network` (inputs' first axis re-declared to `batch_size` when given), then give it
    the owner's tensor of each label: one Parameter per label across networks, so training one network trains
    the others. Fixed parameters (`NetworkPass.fix_parameters`) and buffers hold the same data without
    gradients."""
    from nnef_torch.importer.load import load_source  # lazy: keeps torch out of reading
    from nnef_torch.importer.module import place

    owner = network.owner
    labels = [variable.label for variable in network.parameters.values() if variable.label is not None]
    missing = [label for label in labels if owner is None or not owner.has_parameter(label)]
    if missing:
        raise NNEFError(f"network '{network.name}' has no data for {len(missing)} variable(s), such as "
                        f"'{missing[0]}' (loaded with exclude_parameter=True? give parameters= or set them with "
                        "ProtoGraph.set_parameter)")
    source = ModelSource(f"graph_def:{network.name}", "nnef", network.document(), network.quant_text(),
                         f"{network.name} (graph_def graph.quant)",
                         state=network.state, options=ReadOptions(format="nnef", batch_size=batch_size))
    module = load_source(source, device="meta")
    for slot in module.nnef.slots.values():
        trainable = not slot.state and slot.key not in network.fixed
        shared = owner.shared_tensor(slot.label, trainable=not slot.state)
        place(module, slot.path, shared.detach(), trainable)
        if trainable:  # the very Parameter object, so that one optimizer step moves every network
            holder, _, leaf = slot.path.rpartition(".")
            (module.get_submodule(holder) if holder else module).register_parameter(leaf, shared)
    return module
