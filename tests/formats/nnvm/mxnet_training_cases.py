"""The training fixture: one step of a small CNN in MXNet's training mode, to check that an imported model trains
as MXNet does: batch statistics in BatchNorm (unless `use_global_stats`), a fixed gamma where `fix_gamma`, the
moving statistics after the step (MXNet moves them with momentum m: s <- m * s + (1 - m) * batch, biased variance),
and every parameter's gradient. Imports MXNet: only `make_fixtures.py` imports it, never a test.

Writes `fixtures/training/cnn-symbol.json`, `cnn-0000.params` and `cnn.npz`: `data`, `head_grad` (the output's
gradient fed to backward), `output` (training mode), `eval_output` (inference), `grad:<param>` and `after:<aux>`.
"""
from __future__ import annotations

from pathlib import Path

import mxnet as mx
import numpy as np

S = mx.sym


def cnn() -> mx.sym.Symbol:
    x = S.var("data")
    x = S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=6, name="conv1")
    x = S.BatchNorm(x, fix_gamma=False, momentum=0.8, eps=1e-5, name="bn1")
    x = S.Activation(x, act_type="relu", name="relu1")
    x = S.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    x = S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=4, name="conv2")
    x = S.BatchNorm(x, momentum=0.9, name="bn2")  # fix_gamma: the default
    x = S.Activation(x, act_type="relu", name="relu2")
    x = S.Convolution(x, kernel=(1, 1), num_filter=4, name="conv3")
    x = S.BatchNorm(x, fix_gamma=False, use_global_stats=True, name="bn3")
    x = S.Flatten(x, name="flatten")
    return S.FullyConnected(x, num_hidden=5, name="fc")


def make_training_fixture(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rs = np.random.RandomState(14)
    symbol = cnn()
    data = rs.standard_normal((4, 3, 8, 8)).astype(np.float32)
    arg_shapes, out_shapes, aux_shapes = symbol.infer_shape(data=data.shape)
    args, grads, aux, params = {}, {}, {}, {}
    for name, shape in zip(symbol.list_arguments(), arg_shapes):
        if name == "data":
            value = data
        elif name.endswith("_gamma"):
            value = rs.uniform(0.5, 3.0, shape)  # a fixed gamma is 1 whatever is stored
        else:
            value = rs.standard_normal(shape) * (0.3 if name.endswith("_weight") else 0.1)
        args[name] = mx.nd.array(value.astype(np.float32))
        grads[name] = mx.nd.zeros(shape)
        if name != "data":
            params["arg:" + name] = args[name].copy()
    for name, shape in zip(symbol.list_auxiliary_states(), aux_shapes):
        value = rs.uniform(0.5, 2.0, shape) if name.endswith("_var") else rs.standard_normal(shape) * 0.2
        aux[name] = mx.nd.array(value.astype(np.float32))
        params["aux:" + name] = aux[name].copy()
    symbol.save(str(folder / "cnn-symbol.json"))
    mx.nd.save(str(folder / "cnn-0000.params"), params)
    inference = symbol.bind(mx.cpu(), args={k: v.copy() for k, v in args.items()},
                            aux_states={k: v.copy() for k, v in aux.items()}, grad_req="null")
    eval_output = inference.forward(is_train=False)[0].asnumpy()
    executor = symbol.bind(mx.cpu(), args=args, args_grad=grads, aux_states=aux, grad_req="write")
    output = executor.forward(is_train=True)[0].asnumpy()
    head = rs.standard_normal(out_shapes[0]).astype(np.float32)
    executor.backward(out_grads=[mx.nd.array(head)])  # MXNet moves the statistics here, in backward
    arrays = {"data": data, "head_grad": head, "output": output, "eval_output": eval_output}
    arrays.update({f"grad:{k}": v.asnumpy() for k, v in grads.items() if k != "data"})
    arrays.update({f"after:{k}": v.asnumpy() for k, v in executor.aux_dict.items()})
    np.savez_compressed(folder / "cnn.npz", **arrays)
    print(f"training/cnn: {len(grads) - 1} gradients, {len(aux)} moving statistics")
