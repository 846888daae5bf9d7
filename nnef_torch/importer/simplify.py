"""Simplifications of the generated fx graph that change no value: a reshape of a reshape reads the first one's
input, and a reshape back to that input's own shape is the input itself (a bias laid out as [1, C] for NNEF and
taken back to (C,) by a convolution costs two calls per forward otherwise)."""
from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx

from nnef_torch.ops.torch_common import SHAPE_KEY


def _is_reshape(node: Any) -> bool:
    return isinstance(node, fx.Node) and ((node.op == "call_method" and node.target == "reshape")
                                          or (node.op == "call_function" and node.target is torch.reshape))


def _target(node: fx.Node) -> tuple[int, ...] | None:
    """The static target shape of a reshape node, or None where it holds -1 or anything not an integer."""
    args = node.args[1:] if node.op == "call_method" else node.args[1:2]
    shape = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    if not all(type(extent) is int and extent >= 0 for extent in shape):
        return None
    return tuple(shape)


def fold_reshapes(graph: fx.Graph) -> None:
    for node in list(graph.nodes):
        if not (_is_reshape(node) and _is_reshape(node.args[0])):
            continue
        source = node.args[0].args[0]
        node.args = (source, *node.args[1:])
        if _target(node) is not None and _target(node) == source.meta.get(SHAPE_KEY):
            node.replace_all_uses_with(source)
            graph.erase_node(node)
