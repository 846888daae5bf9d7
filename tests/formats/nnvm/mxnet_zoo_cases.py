"""The model-zoo fixtures: Gluon model-zoo networks with seeded parameters (`zoo_params`), run at the smallest input
each architecture accepts (SqueezeNet, DenseNet and Inception end in fixed-size average pooling).

This module imports MXNet: only the fixture generator imports it, never a test.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mxnet as mx
import numpy as np
from mxnet.gluon.model_zoo import vision

from formats.nnvm.zoo_params import checksum, zoo_input, zoo_params


@dataclass(frozen=True)
class Net:
    name: str  # the model-zoo name
    input_shape: tuple[int, ...]
    seed: int
    real_params: bool = False  # commit MXNet's own .params file too (small nets only)


NETS = {net.name: net for net in (
    Net("resnet18_v1", (2, 3, 32, 32), 1801),
    Net("resnet18_v2", (2, 3, 32, 32), 1802),
    Net("mobilenet0.25", (2, 3, 32, 32), 2501, real_params=True),
    Net("mobilenetv2_0.25", (2, 3, 32, 32), 2502),
    Net("squeezenet1.1", (1, 3, 209, 209), 1101),  # ends in 13x13 average pooling
    Net("densenet121", (1, 3, 221, 221), 1211),  # ends in 7x7 average pooling
    Net("vgg11_bn", (1, 3, 32, 32), 1111),
    Net("inceptionv3", (1, 3, 299, 299), 3001),  # ends in 8x8 average pooling
)}


def run_net(net: Net, prefix: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Build the net with seeded parameters, run it in inference mode and export it to `prefix`-symbol.json
    (and `prefix`-0000.params). Returns the parameter shapes ({'arg': {...}, 'aux': {...}}) and the arrays to
    keep (the output and the checksums)."""
    block = vision.get_model(net.name, classes=10)
    block.initialize(mx.init.Zero())
    block.hybridize()
    x = mx.nd.array(zoo_input(net.input_shape, net.seed))
    block(x)  # completes the deferred shapes
    symbol = block(mx.sym.var("data"))
    aux_names = set(symbol.list_auxiliary_states())
    params = block.collect_params()
    shapes = {"arg": {}, "aux": {}}
    for name, param in params.items():
        shapes["aux" if name in aux_names else "arg"][name] = list(param.shape)
    values = zoo_params({name: param.shape for name, param in params.items()}, net.seed)
    for name, param in params.items():
        param.set_data(mx.nd.array(values[name]))
    output = block(x).asnumpy()
    block.export(prefix, epoch=0)
    arrays = {"output0": output, "param_checksum": np.float64(checksum(values)),
              "input_checksum": np.float64(checksum({"data": x.asnumpy()}))}
    return shapes, arrays
