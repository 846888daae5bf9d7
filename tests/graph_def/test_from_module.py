"""create_graph_from_module: any module through the exporter, with a symbolic batch; names; the network runs at
other batch sizes as the module does; two networks of one graph share Parameters by label."""
from __future__ import annotations

import torch

from nnef_torch import graph_def
from nnef_torch.graph_def import NetworkPass


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.head = torch.nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).flatten(1))


def test_network_runs_at_other_batch_sizes_as_the_module():
    torch.manual_seed(0)
    module = Net().eval()
    with graph_def.graph():
        network = graph_def.create_graph_from_module("net", module, (torch.randn(2, 3, 8, 8),))
    for batch in (1, 7):
        x = torch.randn(batch, 3, 8, 8)
        with torch.no_grad():
            torch.testing.assert_close(network(x, batch_size=batch), module(x), rtol=1e-5, atol=1e-5)


def test_names_rename_tensors():
    with graph_def.graph():
        network = graph_def.create_graph_from_module("net", Net().eval(), (torch.randn(2, 3, 8, 8),),
                                                     names={"x": "image"})
    assert network.inputs == ["image"]


def test_training_one_network_moves_the_other():
    torch.manual_seed(0)
    with graph_def.graph() as g:
        train = graph_def.create_graph_from_module("train", Net().eval(), (torch.randn(2, 3, 8, 8),))
    infer = train.promote(NetworkPass(name="infer"))
    g.add(infer)
    model = train.module()
    assert model.conv.weight is infer.module().conv.weight
    before = infer.module().head.weight.detach().clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(4, 3, 8, 8)).square().mean().backward()
    optimizer.step()
    assert not torch.equal(infer.module().head.weight.detach(), before)


def test_parameters_are_copies_of_the_module():
    module = Net().eval()
    with graph_def.graph() as g:
        graph_def.create_graph_from_module("net", module, (torch.randn(2, 3, 8, 8),))
    g.set_parameter("conv/bias", torch.zeros(4))
    assert not torch.equal(module.conv.bias.detach(), torch.zeros(4))
