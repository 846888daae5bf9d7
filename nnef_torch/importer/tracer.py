"""Trace op functions into an fx graph: inputs are `Proxy`s carrying their load-time NNEF shape and torch dtype.

Calling a registered op function on these proxies runs its attribute logic once, now, and records only its torch
calls. Tensors an op function builds while tracing (index tables, kernels) become non-persistent buffers of the
root module, so they follow `.to(device)` and stay out of `state_dict`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx as fx

from nnef_torch.ops.torch_common import DTYPE_KEY, SHAPE_KEY


class OpTracer(fx.Tracer):
    def __init__(self, root: torch.nn.Module):
        super().__init__()
        self.root = root
        self.graph = fx.Graph(tracer_cls=type(self))
        self.tensor_attrs = {}
        self._constants: dict[int, str] = {}

    def create_arg(self, a: Any) -> Any:
        if isinstance(a, torch.Tensor) and not isinstance(a, torch.nn.Parameter):
            name = self._constants.get(id(a))
            if name is None and not any(a is buffer for buffer in self.root.buffers()):
                name = f"_constant{len(self._constants)}"
                self.root.register_buffer(name, a, persistent=False)
                self._constants[id(a)] = name
            if name is not None:
                return self.create_node("get_attr", name, (), {})
        return super().create_arg(a)

    def placeholder(self, name: str, shape: Sequence[int], dtype: torch.dtype, optional: bool = False) -> fx.Proxy:
        """A positional input of `forward`; an `optional` one defaults to None (an input nothing reads)."""
        proxy = self.create_proxy("placeholder", name, (None,) if optional else (), {}, name=name)
        annotate(proxy, shape, dtype)
        return proxy

    def get_attr(self, target: str, shape: Sequence[int], dtype: torch.dtype, name: str | None = None) -> fx.Proxy:
        proxy = self.create_proxy("get_attr", target, (), {}, name=name)
        annotate(proxy, shape, dtype)
        return proxy


def annotate(proxy: fx.Proxy, shape: Sequence[int] | None, dtype: torch.dtype | None) -> None:
    proxy.node.meta[SHAPE_KEY] = tuple(shape) if shape is not None else None
    proxy.node.meta[DTYPE_KEY] = dtype
