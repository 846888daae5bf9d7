"""Torch module paths for the initializers torch.onnx named itself (`onnx::Conv_23`: a weight it transposed, or a
convolution with its batch norm folded in): the legacy exporter names each node after the module that wrote it
(`/layer1/layer1.0/conv1/Conv`), so such an initializer, read by one node, is named after that module and its role
there (`layer1.0.conv1.weight`). Names the file gives itself are kept."""
from __future__ import annotations

import re
from typing import Any

# operator -> input position -> the role torch gives that tensor in the module
ROLES: dict[str, dict[int, str]] = {
    "Conv": {1: "weight", 2: "bias"}, "ConvTranspose": {1: "weight", 2: "bias"}, "Gemm": {1: "weight", 2: "bias"},
    "MatMul": {1: "weight"}, "PRelu": {1: "weight"},
    "BatchNormalization": {1: "weight", 2: "bias", 3: "running_mean", 4: "running_var"},
    "LayerNormalization": {1: "weight", 2: "bias"}, "InstanceNormalization": {1: "weight", 2: "bias"},
    "GroupNormalization": {1: "weight", 2: "bias"},
    "LSTM": {1: "weight_ih", 2: "weight_hh", 3: "bias"}, "GRU": {1: "weight_ih", 2: "weight_hh", 3: "bias"},
    "RNN": {1: "weight_ih", 2: "weight_hh", 3: "bias"},
}
_OWN_NAME = re.compile(r"^\w+(\.\w+)*$")  # a state_dict-like path the file gave


def module_path(node_name: str) -> str | None:
    """'layer1.0.conv1' from '/layer1/layer1.0/conv1/Conv'; None for a name that is not such a scope path."""
    parts = node_name.split("/")
    if len(parts) < 3 or parts[0] != "" or not all(parts[1:-1]):
        return None
    path = ""
    for part in parts[1:-1]:
        path = part if not path or part.startswith(path + ".") else f"{path}.{part}"
    return path if _OWN_NAME.match(path) else None


def torch_names(graph: Any) -> dict[str, str]:
    """Initializer name -> the module path name for those torch.onnx named itself (see the module docstring)."""
    initializers = {tensor.name for tensor in graph.initializer}
    readers: dict[str, list[tuple[Any, int]]] = {}
    for node in graph.node:
        for position, name in enumerate(node.input):
            if name in initializers:
                readers.setdefault(name, []).append((node, position))
    named: dict[str, str] = {}
    taken = set(initializers)
    for name in initializers:
        if _OWN_NAME.match(name) or len(readers.get(name, ())) != 1:
            continue
        node, position = readers[name][0]
        role = ROLES.get(node.op_type, {}).get(position)
        path = module_path(node.name) if role else None
        if path is not None and f"{path}.{role}" not in taken:
            named[name] = f"{path}.{role}"
            taken.add(named[name])
    return named
