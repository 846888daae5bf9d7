"""An NNabla-style `graph_def` API over NNEF models: a ProtoGraph of named networks sharing parameters by label,
networks as functions and variables, execution order, rewriting passes, and batch sizes chosen at use.

    g = nnef_torch.graph_def.load("model.tgz", batch_size=32)
    y = g(x)                                   # the default network, as a generated torch module
    for f in g.default_graph().forward_sequence():
        print(f.name, f.type, f.inputs, f.outputs)
    backbone = g.default_graph().promote(NetworkPass().use_up_to("features"))
    nnef_torch.graph_def.save("model/", [train, infer])   # graph.nnef + infer.nnef, one .dat per label
"""
from nnef_torch.graph_def.files import load, save
from nnef_torch.graph_def.from_module import create_graph_from_module
from nnef_torch.graph_def.graph import ProtoGraph, get_default_graph, graph, reset_default_graph
from nnef_torch.graph_def.network import ProtoNetwork
from nnef_torch.graph_def.passes import NetworkPass
from nnef_torch.graph_def.proto import ACTIVATION, BUFFER, INPUT, PARAMETER, ProtoFunction, ProtoVariable

__all__ = ["ACTIVATION", "BUFFER", "INPUT", "PARAMETER", "NetworkPass", "ProtoFunction", "ProtoGraph",
           "ProtoNetwork", "ProtoVariable", "create_graph_from_module", "get_default_graph", "graph", "load",
           "reset_default_graph", "save"]
