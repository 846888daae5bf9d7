"""The default graph and `with graph_def.graph()`: where created networks go; ProtoGraph access by name."""
from __future__ import annotations

import pytest
import torch

from nnef_torch import graph_def


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()


def test_networks_created_inside_a_with_block_are_collected():
    graph_def.reset_default_graph()
    with graph_def.graph() as g:
        a = graph_def.create_graph_from_module("a", _net(), (torch.randn(2, 4),))
        assert graph_def.get_default_graph() is g
    b = graph_def.create_graph_from_module("b", _net(), (torch.randn(2, 4),))
    assert list(g.networks) == ["a"] and g.a is a and g.default_graph() is a
    assert graph_def.get_default_graph().b is b
    fresh = graph_def.reset_default_graph()
    assert fresh.networks == {} and graph_def.get_default_graph() is fresh


def test_networks_by_attribute_and_errors():
    with graph_def.graph() as g:
        graph_def.create_graph_from_module("infer", _net(), (torch.randn(2, 4),))
    assert g.infer is g.networks["infer"]
    with pytest.raises(AttributeError, match="networks: \\['infer'\\]"):
        _ = g.train
    with pytest.raises(Exception, match="already has a network named 'infer'"):
        g.add(g.infer)
