"""Trace op functions into an fx graph: inputs are `Proxy`s carrying their load-time NNEF shape and torch dtype.

Calling a registered op function on these proxies runs its attribute logic once, now, and records only its torch
calls. Tensors an op function builds while tracing (index tables, kernels) become non-persistent buffers of the
root module, so they follow `.to(device)` and stay out of `state_dict`.

Tracing is on the load path, so the tracer takes shortcuts fx's general machinery cannot: arguments of the plain
types an op function passes (proxies, numbers, strings, dtypes; tuples, lists and dicts of them) convert without fx's
type dispatch, and a torch call on proxies finds its tracer by scanning tuples and lists rather than by pytree.
Anything else goes through fx unchanged, and the nodes made are the ones fx would make.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch.overrides import is_tensor_method_or_property

from nnef_torch.ops.torch_common import DTYPE_KEY, SHAPE_KEY

# argument types fx keeps as they are (a subset of fx's base argument types)
_PLAIN = frozenset({int, float, bool, str, complex, type(None), type(...), torch.dtype, torch.device,
                    torch.memory_format, torch.layout})


class TracedProxy(fx.Proxy):
    """An fx Proxy whose torch calls find their tracer without pytree (see `_tracer_of`)."""

    @classmethod
    def __torch_function__(cls, orig_method: Any, types: Any, args: Any = None, kwargs: Any = None) -> Any:
        args = args if args else ()
        kwargs = kwargs if kwargs else {}
        tracer = _tracer_of(args, _tracer_of(kwargs.values(), None))
        if not isinstance(tracer, OpTracer) or isinstance(orig_method, (torch._C.ScriptMethod,
                                                                        torch._ops.HigherOrderOperator)):
            return super().__torch_function__(orig_method, types, args, kwargs)
        if is_tensor_method_or_property(orig_method):
            return tracer.create_proxy("call_method", orig_method.__name__, args, kwargs)
        return tracer.create_proxy("call_function", orig_method, args, kwargs,
                                   name=tracer.graph._target_to_str(orig_method.__name__))


def _content_key(a: torch.Tensor) -> tuple[Any, ...] | None:
    """What identifies a small CPU constant by value (dtype, shape, bytes); None for others."""
    if a.is_cuda or a.requires_grad or a.numel() > 4096 or a.is_inference():
        return None
    try:
        return a.dtype, a.shape, a.numpy().tobytes()
    except (TypeError, RuntimeError):  # a dtype numpy lacks, a device other than the CPU
        return None


def _tracer_of(values: Any, found: Any) -> Any:
    """The one tracer of the proxies among `values` (nested in tuples and lists), None where there is none;
    False where fx's own search must decide (another container type, several tracers)."""
    for value in values:
        kind = type(value)
        if kind is TracedProxy:
            if found is not None and found is not value.tracer:
                return False
            found = value.tracer
        elif kind is tuple or kind is list:
            found = _tracer_of(value, found)
        elif kind not in _PLAIN and kind is not slice and kind is not torch.Tensor:  # a tensor: a constant
            return False
        if found is False:
            return False
    return found


class OpTracer(fx.Tracer):
    def __init__(self, root: torch.nn.Module):
        super().__init__()
        self.root = root
        self.graph = fx.Graph(tracer_cls=type(self))
        self.tensor_attrs = {}
        self._constants: dict[int, str] = {}  # id of a tensor made while tracing -> its buffer
        self._by_content: dict[tuple[Any, ...], str] = {}  # small constants of equal content share one buffer
        self._by_name: list[torch.Tensor] = []
        self._attr_nodes: dict[str, fx.Node] = {}

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return TracedProxy(node, self)

    def create_arg(self, a: Any) -> Any:
        kind = type(a)
        if kind is TracedProxy:
            return a.node
        if kind in _PLAIN:
            return a
        if kind is tuple:
            return tuple([self.create_arg(item) for item in a])
        if kind is list:
            return [self.create_arg(item) for item in a]
        if kind is dict and all(type(key) is str for key in a):
            return {key: self.create_arg(value) for key, value in a.items()}
        if isinstance(a, torch.Tensor) and not isinstance(a, torch.nn.Parameter):
            name = self._constants.get(id(a))
            key = _content_key(a) if name is None else None
            if key is not None:
                name = self._by_content.get(key)
            if name is None and not any(a is buffer for buffer in self.root.buffers()):
                name = f"_constant{len(self._by_name)}"
                self.root.register_buffer(name, a, persistent=False)
                self._by_name.append(a)  # keeps `a` alive, so that its id is not reused while tracing
                self._constants[id(a)] = name
                if key is not None:
                    self._by_content[key] = name
            if name is not None:
                node = self._attr_nodes.get(name)
                if node is None:  # one node per buffer, however many ops read it
                    node = self._attr_nodes[name] = self.create_node("get_attr", name, (), {})
                return node
        return super().create_arg(a)

    def create_node(self, kind: str, target: Any, args: tuple, kwargs: dict, name: str | None = None,
                    type_expr: Any = None) -> fx.Node:
        """The graph's node; fx's bookkeeping for tracing modules (scopes, preserved metadata) has nothing to
        record here unless a caller preserves node metadata."""
        if (fx_traceback.has_preserved_node_meta() or self.check_mutable_operations or self.record_stack_traces
                or self.module_stack):
            return super().create_node(kind, target, args, kwargs, name, type_expr)
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

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
