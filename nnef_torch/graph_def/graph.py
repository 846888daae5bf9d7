"""`ProtoGraph`: named networks that share their parameters by label, and the default graph that collects the
networks created inside `with graph_def.graph():`."""
from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from nnef_torch.errors import NNEFOptionError
from nnef_torch.graph_def.network import ProtoNetwork


class ProtoGraph:
    """Networks by name (`graph.networks['train']`, or `graph.train`), the first added being the default, and
    the data of their parameters and buffers by label (case-insensitive, as NNEF labels compare)."""

    def __init__(self, networks: Mapping[str, ProtoNetwork] | None = None,
                 parameters: Mapping[str, Any] | None = None):
        self.networks: OrderedDict[str, ProtoNetwork] = OrderedDict()
        self._values: dict[str, Any] = {}  # lower-case label -> array or tensor, as given
        self._labels: dict[str, str] = {}  # lower-case label -> its first spelling
        self._shared: dict[str, Any] = {}  # lower-case label -> the torch tensor every network's module holds
        for label, value in (parameters or {}).items():
            self.set_parameter(label, value)
        for network in (networks or {}).values():
            self.add(network)

    # -- networks --
    def add(self, network: ProtoNetwork) -> ProtoNetwork:
        if network.name in self.networks:
            raise NNEFOptionError(f"the graph already has a network named '{network.name}'")
        network.owner = self
        self.networks[network.name] = network
        return network

    def default_graph(self) -> ProtoNetwork:
        """The first network added (the one a saved model keeps in graph.nnef)."""
        if not self.networks:
            raise NNEFOptionError("the graph has no networks")
        return next(iter(self.networks.values()))

    def __getattr__(self, name: str) -> ProtoNetwork:
        networks = self.__dict__.get("networks", {})
        if name in networks:
            return networks[name]
        raise AttributeError(f"ProtoGraph has no attribute or network '{name}' (networks: {list(networks)})")

    def __call__(self, *inputs: Any, batch_size: int | None = None) -> Any:
        """Run the default network."""
        return self.default_graph()(*inputs, batch_size=batch_size)

    # -- shared data --
    def has_parameter(self, label: str) -> bool:
        return label.lower() in self._values

    def set_parameter(self, label: str, value: Any) -> None:
        """Give the variables labelled `label` (in every network) this value (array or tensor)."""
        key = label.lower()
        self._labels.setdefault(key, label)
        self._values[key] = value
        shared = self._shared.get(key)
        if shared is not None:
            import torch
            with torch.no_grad():
                new = torch.as_tensor(np.asarray(value) if not isinstance(value, torch.Tensor) else value)
                if tuple(new.shape) == tuple(shared.shape):
                    shared.copy_(new.to(shared.dtype))
                else:
                    del self._shared[key]  # a new shape: modules built from now on get a new tensor
                    for network in self.networks.values():
                        network._modules.clear()

    def parameter(self, label: str) -> Any:
        """The current value of `label`: the shared torch tensor once a module holds it, else the data read."""
        key = label.lower()
        if key in self._shared:
            return self._shared[key]
        if key not in self._values:
            raise KeyError(label)
        return self._values[key]

    @property
    def parameters(self) -> dict[str, Any]:
        """Every parameter and buffer by label."""
        return {self._labels[key]: self.parameter(key) for key in self._values}

    def shared_tensor(self, label: str, trainable: bool) -> Any:
        """The one torch tensor of `label` that every network's module holds (a Parameter when trainable)."""
        import torch
        key = label.lower()
        if key not in self._shared:
            value = self._values[key]
            tensor = value.detach() if isinstance(value, torch.Tensor) else torch.from_numpy(np.array(value))
            self._shared[key] = torch.nn.Parameter(tensor, requires_grad=True) if trainable else tensor
        return self._shared[key]

    def __repr__(self) -> str:
        return f"ProtoGraph(networks {list(self.networks)}, {len(self._values)} parameters)"


_local = threading.local()


def _stack() -> list[ProtoGraph]:
    if not hasattr(_local, "stack"):
        _local.stack = [ProtoGraph()]
    return _local.stack


@contextlib.contextmanager
def graph() -> Iterator[ProtoGraph]:
    """A new ProtoGraph collecting the networks created inside the `with` block (create_graph_from_module)."""
    collecting = ProtoGraph()
    _stack().append(collecting)
    try:
        yield collecting
    finally:
        _stack().remove(collecting)


def get_default_graph() -> ProtoGraph:
    """The graph networks are created in: the innermost `with graph()`, else the global default."""
    return _stack()[-1]


def reset_default_graph() -> ProtoGraph:
    """Start a new, empty global default graph (the networks of the old one are no longer collected)."""
    stack = _stack()
    stack[0] = ProtoGraph()
    return stack[0]
