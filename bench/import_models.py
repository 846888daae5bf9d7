"""Benchmark models for the import benchmark: each generator writes an NNEF model folder (graph.nnef text and one
.dat file per variable, seeded random weights) and returns a hand-written torch twin computing the same function.

There is no exporter yet, so the NNEF text is generated here, in the flat standard syntax (no fragments, no operator
expressions). Every model is declared with batch 1. The twins use plain torch (F.conv2d, F.batch_norm, F.linear,
F.layer_norm, ...), with weights copied from the same arrays that were written to the .dat files.

    twin = write_mlp("models/mlp")          # -> models/mlp/graph.nnef, models/mlp/fc1/weight.dat, ...
    module = nnef_torch.load("models/mlp")
    x = example_input("mlp", batch=8)

Each twin maps NNEF labels to its own tensors (`twin.by_label()`), so gradients can be compared label by label.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import nnef_torch

# -- the NNEF text and .dat files --


class GraphWriter:
    """Accumulates the lines of one flat NNEF graph and writes each variable's array as `label + '.dat'`."""

    def __init__(self, folder: str | os.PathLike, name: str, rng: np.random.Generator):
        self.folder = os.fspath(folder)
        self.name = name
        self.rng = rng
        self.lines: list[str] = []
        self.inputs: list[str] = []
        self.arrays: dict[str, np.ndarray] = {}
        self.used: set[str] = set()

    def fresh(self, hint: str) -> str:
        base = hint.replace("/", "_").replace(".", "_")
        name, i = base, 1
        while name in self.used:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        return name

    def external(self, name: str, shape: list[int]) -> str:
        name = self.fresh(name)
        self.inputs.append(name)
        self.lines.append(f"{name} = external<scalar>(shape = {list(shape)});")
        return name

    def variable(self, label: str, array: np.ndarray) -> str:
        array = np.ascontiguousarray(array, dtype=np.float32)
        path = os.path.join(self.folder, label + ".dat")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        nnef_torch.write_tensor(path, array)
        self.arrays[label] = array
        name = self.fresh(label)
        self.lines.append(f"{name} = variable<scalar>(shape = {list(array.shape)}, label = '{label}');")
        return name

    def op(self, hint: str, call: str) -> str:
        name = self.fresh(hint)
        self.lines.append(f"{name} = {call};")
        return name

    def ops(self, hints: list[str], call: str) -> list[str]:
        """An operation with a tensor-array result, e.g. split: `[a, b] = split(...)`."""
        names = [self.fresh(hint) for hint in hints]
        self.lines.append(f"[{', '.join(names)}] = {call};")
        return names

    def finish(self, outputs: list[str]) -> dict[str, np.ndarray]:
        header = [
            "version 1.0;",
            "",
            f"graph {self.name}( {', '.join(self.inputs)} ) -> ( {', '.join(outputs)} )",
            "{",
        ]
        text = "\n".join(header + ["    " + line for line in self.lines] + ["}", ""])
        os.makedirs(self.folder, exist_ok=True)
        with open(os.path.join(self.folder, "graph.nnef"), "w") as handle:
            handle.write(text)
        return self.arrays


def _padding(p: int) -> str:
    return f"[({p}, {p}), ({p}, {p})]"


def _he(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    return (rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)).astype(np.float32)


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], bound: float) -> np.ndarray:
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def _tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(array, dtype=np.float32, copy=True))


class Twin(nn.Module):
    """Base of the hand-written twins: `labels` maps each NNEF label to the twin's state_dict key."""

    labels: dict[str, str]

    def by_label(self) -> dict[str, torch.Tensor]:
        state = dict(self.named_parameters())
        state.update(dict(self.named_buffers()))
        return {label: state[key] for label, key in self.labels.items()}


# -- (a) ResNet-50: bottleneck blocks [3, 4, 6, 3], batch_normalization with mean/variance/offset/scale --

RESNET_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride of the first block)
BN_EPSILON = 1e-5


def _conv_bn(g: GraphWriter, x: str, prefix: str, bn: str, cin: int, cout: int, k: int, stride: int,
             relu: bool, gamma: float = 1.0) -> str:
    rng = g.rng
    w = g.variable(f"{prefix}/filter", _he(rng, (cout, cin, k, k), cin * k * k))
    y = g.op(f"{prefix}", f"conv({x}, {w}, padding = {_padding(k // 2)}, stride = [{stride}, {stride}])")
    mean = g.variable(f"{bn}/mean", (rng.standard_normal((1, cout)) * 0.1).astype(np.float32))
    var = g.variable(f"{bn}/variance", rng.uniform(0.5, 1.5, (1, cout)).astype(np.float32))
    offset = g.variable(f"{bn}/offset", (rng.standard_normal((1, cout)) * 0.1).astype(np.float32))
    scale = g.variable(f"{bn}/scale", (gamma * rng.uniform(0.5, 1.0, (1, cout))).astype(np.float32))
    y = g.op(f"{bn}", f"batch_normalization({y}, {mean}, {var}, {offset}, {scale}, epsilon = {BN_EPSILON})")
    return g.op(f"{bn}_relu", f"relu({y})") if relu else y


def write_resnet50(folder: str | os.PathLike, seed: int = 0, classes: int = 1000) -> ResNet50Twin:
    g = GraphWriter(folder, "resnet50", np.random.default_rng(seed))
    x = g.external("input", [1, 3, 224, 224])
    x = _conv_bn(g, x, "conv1", "bn1", 3, 64, 7, 2, relu=True)
    # the 7x7 stem conv has padding 3 = 7 // 2, as _padding(k // 2) gives
    x = g.op("maxpool", f"max_pool({x}, size = [1, 1, 3, 3], stride = [1, 1, 2, 2], "
                        "padding = [(0, 0), (0, 0), (1, 1), (1, 1)], border = 'ignore')")
    cin = 64
    for s, (width, blocks, stride) in enumerate(RESNET_STAGES):
        for b in range(blocks):
            p = f"layer{s + 1}/{b}"
            st = stride if b == 0 else 1
            y = _conv_bn(g, x, f"{p}/conv1", f"{p}/bn1", cin, width, 1, 1, relu=True)
            y = _conv_bn(g, y, f"{p}/conv2", f"{p}/bn2", width, width, 3, st, relu=True)
            y = _conv_bn(g, y, f"{p}/conv3", f"{p}/bn3", width, width * 4, 1, 1, relu=False, gamma=0.2)
            if b == 0:
                x = _conv_bn(g, x, f"{p}/downsample/conv", f"{p}/downsample/bn", cin, width * 4, 1, st, relu=False)
            y = g.op(f"{p}/add", f"add({y}, {x})")
            x = g.op(f"{p}/out", f"relu({y})")
            cin = width * 4
    x = g.op("pool", f"mean_reduce({x}, axes = [2, 3])")
    x = g.op("flat", f"reshape({x}, shape = [0, -1])")
    w = g.variable("fc/weight", _uniform(g.rng, (classes, cin), 1 / math.sqrt(cin)))
    b = g.variable("fc/bias", _uniform(g.rng, (1, classes), 1 / math.sqrt(cin)))
    out = g.op("logits", f"linear({x}, {w}, {b})")
    return ResNet50Twin(g.finish([out]), classes)


class ConvBN(nn.Module):
    def __init__(self, a: dict[str, np.ndarray], conv: str, bn: str, stride: int):
        super().__init__()
        w = _tensor(a[f"{conv}/filter"])
        cout, cin, k, _ = w.shape
        self.conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)
        self.conv.weight.data = w
        self.bn = nn.BatchNorm2d(cout, eps=BN_EPSILON)
        self.bn.running_mean.copy_(_tensor(a[f"{bn}/mean"]).reshape(-1))
        self.bn.running_var.copy_(_tensor(a[f"{bn}/variance"]).reshape(-1))
        self.bn.weight.data = _tensor(a[f"{bn}/scale"]).reshape(-1)
        self.bn.bias.data = _tensor(a[f"{bn}/offset"]).reshape(-1)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))

    @staticmethod
    def labels(conv: str, bn: str, key: str) -> dict[str, str]:
        return {f"{conv}/filter": f"{key}.conv.weight", f"{bn}/mean": f"{key}.bn.running_mean",
                f"{bn}/variance": f"{key}.bn.running_var", f"{bn}/offset": f"{key}.bn.bias",
                f"{bn}/scale": f"{key}.bn.weight"}


class Bottleneck(nn.Module):
    def __init__(self, a: dict[str, np.ndarray], p: str, stride: int, downsample: bool):
        super().__init__()
        self.c1 = ConvBN(a, f"{p}/conv1", f"{p}/bn1", 1)
        self.c2 = ConvBN(a, f"{p}/conv2", f"{p}/bn2", stride)
        self.c3 = ConvBN(a, f"{p}/conv3", f"{p}/bn3", 1)
        self.down = ConvBN(a, f"{p}/downsample/conv", f"{p}/downsample/bn", stride) if downsample else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.c1(x))
        y = F.relu(self.c2(y))
        y = self.c3(y)
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet50Twin(Twin):
    """torchvision-style ResNet-50 (stride on the 3x3 conv), batch norm in eval mode (running statistics)."""

    def __init__(self, a: dict[str, np.ndarray], classes: int):
        super().__init__()
        self.stem = ConvBN(a, "conv1", "bn1", 2)
        self.labels = ConvBN.labels("conv1", "bn1", "stem")
        blocks = []
        for s, (_width, count, stride) in enumerate(RESNET_STAGES):
            for b in range(count):
                p = f"layer{s + 1}/{b}"
                blocks.append(Bottleneck(a, p, stride if b == 0 else 1, b == 0))
                key = f"blocks.{len(blocks) - 1}"
                for i in (1, 2, 3):
                    self.labels.update(ConvBN.labels(f"{p}/conv{i}", f"{p}/bn{i}", f"{key}.c{i}"))
                if b == 0:
                    self.labels.update(ConvBN.labels(f"{p}/downsample/conv", f"{p}/downsample/bn", f"{key}.down"))
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(2048, classes)
        self.fc.weight.data = _tensor(a["fc/weight"])
        self.fc.bias.data = _tensor(a["fc/bias"]).reshape(-1)
        self.labels.update({"fc/weight": "fc.weight", "fc/bias": "fc.bias"})
        self.eval()

    def train(self, mode: bool = True) -> ResNet50Twin:
        return super().train(False)  # the NNEF graph normalizes with its stored statistics, always

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        x = F.max_pool2d(x, 3, 2, 1)
        x = self.blocks(x)
        x = x.mean((2, 3))
        return self.fc(x)


# -- (b) transformer encoder: post-norm layers, fused QKV projection, layer norm from moments/rsqrt --

def write_transformer(folder: str | os.PathLike, seed: int = 0, layers: int = 4, d_model: int = 256, heads: int = 4,
                      seq: int = 64, d_ff: int = 1024) -> TransformerTwin:
    g = GraphWriter(folder, "transformer", np.random.default_rng(seed))
    rng = g.rng
    dh = d_model // heads

    def linear(x: str, prefix: str, cin: int, cout: int) -> str:
        w = g.variable(f"{prefix}/weight", _uniform(rng, (cout, cin), 1 / math.sqrt(cin)))
        b = g.variable(f"{prefix}/bias", _uniform(rng, (1, cout), 1 / math.sqrt(cin)))
        return g.op(prefix, f"linear({x}, {w}, {b})")

    def layer_norm(x: str, prefix: str) -> str:
        scale = g.variable(f"{prefix}/scale", (1 + 0.1 * rng.standard_normal((1, d_model))).astype(np.float32))
        offset = g.variable(f"{prefix}/offset", (0.1 * rng.standard_normal((1, d_model))).astype(np.float32))
        mean, var = g.fresh(f"{prefix}/mean"), g.fresh(f"{prefix}/var")
        g.lines.append(f"{mean}, {var} = moments({x}, axes = [1]);")
        centered = g.op(f"{prefix}/centered", f"sub({x}, {mean})")
        var_eps = g.op(f"{prefix}/var_eps", f"add({var}, {BN_EPSILON})")
        inv = g.op(f"{prefix}/inv_std", f"rsqrt({var_eps})")
        normed = g.op(f"{prefix}/normed", f"mul({centered}, {inv})")
        scaled = g.op(f"{prefix}/scaled", f"mul({normed}, {scale})")
        return g.op(f"{prefix}/out", f"add({scaled}, {offset})")

    def heads_of(t: str, name: str) -> str:  # [S, D] -> [1, H, S, Dh]
        t = g.op(f"{name}_4d", f"reshape({t}, shape = [-1, {seq}, {heads}, {dh}])")
        return g.op(f"{name}_heads", f"transpose({t}, axes = [0, 2, 1, 3])")

    x = g.external("input", [1, seq, d_model])
    x = g.op("rows", f"reshape({x}, shape = [-1, {d_model}])")  # [S, D]: linear takes rank-2 inputs
    for i in range(layers):
        p = f"layers/{i}"
        qkv = linear(x, f"{p}/attn/qkv", d_model, 3 * d_model)
        q, k, v = g.ops([f"{p}/q", f"{p}/k", f"{p}/v"], f"split({qkv}, axis = 1, ratios = [1, 1, 1])")
        q, k, v = heads_of(q, f"{p}/q"), heads_of(k, f"{p}/k"), heads_of(v, f"{p}/v")
        scores = g.op(f"{p}/qk", f"matmul({q}, {k}, transposeB = true)")
        scores = g.op(f"{p}/scores", f"mul({scores}, {1 / math.sqrt(dh)})")
        probs = g.op(f"{p}/probs", f"softmax({scores}, axes = [3])")
        ctx = g.op(f"{p}/ctx", f"matmul({probs}, {v})")
        ctx = g.op(f"{p}/ctx_t", f"transpose({ctx}, axes = [0, 2, 1, 3])")
        ctx = g.op(f"{p}/ctx_rows", f"reshape({ctx}, shape = [-1, {d_model}])")
        attn = linear(ctx, f"{p}/attn/out", d_model, d_model)
        x = layer_norm(g.op(f"{p}/res1", f"add({x}, {attn})"), f"{p}/norm1")
        h = g.op(f"{p}/ffn_act", f"relu({linear(x, f'{p}/ffn/fc1', d_model, d_ff)})")
        h = linear(h, f"{p}/ffn/fc2", d_ff, d_model)
        x = layer_norm(g.op(f"{p}/res2", f"add({x}, {h})"), f"{p}/norm2")
    out = g.op("output", f"reshape({x}, shape = [-1, {seq}, {d_model}])")
    return TransformerTwin(g.finish([out]), layers, heads)


class TransformerTwin(Twin):
    """Post-norm encoder layers written with F.linear, explicit matmul/softmax attention and F.layer_norm.

    `mirror()` gives the same module with layer norm written as the graph writes it (var_mean, sub, add, rsqrt,
    mul, mul, add): a diagnostic that separates the cost of the graph's formulation from the importer's."""

    describe = "twin with the graph's layer norm (var_mean, sub, add, rsqrt, mul, mul, add)"

    def __init__(self, a: dict[str, np.ndarray], layers: int, heads: int, fused_layer_norm: bool = True):
        super().__init__()
        self.heads = heads
        self.layers = layers
        self.fused_layer_norm = fused_layer_norm
        self.labels = {}
        self.params = nn.ParameterDict()
        for label, array in a.items():
            key = label.replace("/", "_")
            value = _tensor(array)
            if label.endswith("bias") or label.endswith("scale") or label.endswith("offset"):
                value = value.reshape(-1)
            self.params[key] = nn.Parameter(value)
            self.labels[label] = f"params.{key}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        P = self.params
        batch, seq, d = x.shape
        dh = d // self.heads
        for i in range(self.layers):
            p = f"layers_{i}_"
            qkv = F.linear(x, P[p + "attn_qkv_weight"], P[p + "attn_qkv_bias"])
            q, k, v = (t.reshape(batch, seq, self.heads, dh).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
            probs = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (1 / math.sqrt(dh)), dim=-1)
            ctx = torch.matmul(probs, v).transpose(1, 2).reshape(batch, seq, d)
            attn = F.linear(ctx, P[p + "attn_out_weight"], P[p + "attn_out_bias"])
            x = self.layer_norm(x + attn, P[p + "norm1_scale"], P[p + "norm1_offset"])
            h = F.relu(F.linear(x, P[p + "ffn_fc1_weight"], P[p + "ffn_fc1_bias"]))
            h = F.linear(h, P[p + "ffn_fc2_weight"], P[p + "ffn_fc2_bias"])
            x = self.layer_norm(x + h, P[p + "norm2_scale"], P[p + "norm2_offset"])
        return x

    def layer_norm(self, x: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        if self.fused_layer_norm:
            return F.layer_norm(x, x.shape[-1:], scale, offset, BN_EPSILON)
        var, mean = torch.var_mean(x, -1, correction=0, keepdim=True)
        return (x - mean) * torch.rsqrt(var + BN_EPSILON) * scale + offset

    def mirror(self) -> TransformerTwin:
        arrays = {label: tensor.detach().numpy() for label, tensor in self.by_label().items()}
        return TransformerTwin(arrays, self.layers, self.heads, fused_layer_norm=False).train(self.training)


# -- (c) MLP 784-1024-1024-10 with relu --

def write_mlp(folder: str | os.PathLike, seed: int = 0, sizes: tuple[int, ...] = (784, 1024, 1024, 10)) -> MLPTwin:
    g = GraphWriter(folder, "mlp", np.random.default_rng(seed))
    x = g.external("input", [1, sizes[0]])
    for i, (cin, cout) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = g.variable(f"fc{i + 1}/weight", _uniform(g.rng, (cout, cin), 1 / math.sqrt(cin)))
        b = g.variable(f"fc{i + 1}/bias", _uniform(g.rng, (1, cout), 1 / math.sqrt(cin)))
        x = g.op(f"fc{i + 1}", f"linear({x}, {w}, {b})")
        if i < len(sizes) - 2:
            x = g.op(f"relu{i + 1}", f"relu({x})")
    return MLPTwin(g.finish([x]), len(sizes) - 1)


class MLPTwin(Twin):
    def __init__(self, a: dict[str, np.ndarray], count: int):
        super().__init__()
        self.fcs = nn.ModuleList()
        self.labels = {}
        for i in range(count):
            w = _tensor(a[f"fc{i + 1}/weight"])
            fc = nn.Linear(w.shape[1], w.shape[0])
            fc.weight.data, fc.bias.data = w, _tensor(a[f"fc{i + 1}/bias"]).reshape(-1)
            self.fcs.append(fc)
            self.labels.update({f"fc{i + 1}/weight": f"fcs.{i}.weight", f"fc{i + 1}/bias": f"fcs.{i}.bias"})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, fc in enumerate(self.fcs):
            x = fc(x)
            if i < len(self.fcs) - 1:
                x = F.relu(x)
        return x


# -- (d) LSTM unrolled over T steps: unstack over time, one gate projection per input, split into i, f, g, o --

def write_lstm(folder: str | os.PathLike, seed: int = 0, steps: int = 16, inputs: int = 64,
               hidden: int = 128) -> LSTMTwin:
    """Gate order i, f, g, o as in torch.nn.LSTM; h0 = c0 = 0, so step 0 has no recurrent term (and c = i * g).
    Output: the hidden states of all steps, [1, T, hidden]."""
    g = GraphWriter(folder, "lstm", np.random.default_rng(seed))
    bound = 1 / math.sqrt(hidden)
    x = g.external("input", [1, steps, inputs])
    w_ih = g.variable("lstm/weight_ih", _uniform(g.rng, (4 * hidden, inputs), bound))
    w_hh = g.variable("lstm/weight_hh", _uniform(g.rng, (4 * hidden, hidden), bound))
    bias = g.variable("lstm/bias", _uniform(g.rng, (1, 4 * hidden), bound))
    xs = g.ops([f"x{t}" for t in range(steps)], f"unstack({x}, axis = 1)")
    h = c = None
    hs = []
    for t in range(steps):
        z = g.op(f"gx{t}", f"linear({xs[t]}, {w_ih}, {bias})")
        if h is not None:
            gh = g.op(f"gh{t}", f"linear({h}, {w_hh})")
            z = g.op(f"z{t}", f"add({z}, {gh})")
        i, f, gg, o = g.ops([f"i{t}", f"f{t}", f"g{t}", f"o{t}"], f"split({z}, axis = 1, ratios = [1, 1, 1, 1])")
        i, o = g.op(f"{i}_sig", f"sigmoid({i})"), g.op(f"{o}_sig", f"sigmoid({o})")
        gg = g.op(f"g{t}_tanh", f"tanh({gg})")
        ig = g.op(f"ig{t}", f"mul({i}, {gg})")
        if c is None:
            c = ig
        else:
            f = g.op(f"{f}_sig", f"sigmoid({f})")  # (unused at step 0, where c0 = 0)
            fc = g.op(f"fc{t}", f"mul({f}, {c})")
            c = g.op(f"c{t}", f"add({fc}, {ig})")
        tc = g.op(f"c{t}_tanh", f"tanh({c})")
        h = g.op(f"h{t}", f"mul({o}, {tc})")
        hs.append(h)
    out = g.op("output", f"stack([{', '.join(hs)}], axis = 1)")
    return LSTMTwin(g.finish([out]), steps)


class LSTMTwin(Twin):
    """The same cell as a plain torch loop (one F.linear per step for the input and for the recurrent term)."""

    def __init__(self, a: dict[str, np.ndarray], steps: int):
        super().__init__()
        self.steps = steps
        self.weight_ih = nn.Parameter(_tensor(a["lstm/weight_ih"]))
        self.weight_hh = nn.Parameter(_tensor(a["lstm/weight_hh"]))
        self.bias = nn.Parameter(_tensor(a["lstm/bias"]).reshape(-1))
        self.labels = {"lstm/weight_ih": "weight_ih", "lstm/weight_hh": "weight_hh", "lstm/bias": "bias"}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = c = None
        hs = []
        for t in range(self.steps):
            z = F.linear(x[:, t], self.weight_ih, self.bias)
            if h is not None:
                z = z + F.linear(h, self.weight_hh)
            i, f, g, o = z.chunk(4, dim=1)
            ig = torch.sigmoid(i) * torch.tanh(g)
            c = ig if c is None else torch.sigmoid(f) * c + ig
            h = torch.sigmoid(o) * torch.tanh(c)
            hs.append(h)
        return torch.stack(hs, dim=1)


# -- the registry the benchmark and the tests use --

GENERATORS: dict[str, Callable[..., Twin]] = {
    "resnet50": write_resnet50,
    "transformer": write_transformer,
    "mlp": write_mlp,
    "lstm": write_lstm,
}

INPUT_SHAPES: dict[str, tuple[int, ...]] = {  # without the batch dimension
    "resnet50": (3, 224, 224),
    "transformer": (64, 256),
    "mlp": (784,),
    "lstm": (16, 64),
}


def example_input(model: str, batch: int = 1, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn((batch,) + INPUT_SHAPES[model], generator=generator)


def write_model(model: str, folder: str | os.PathLike, seed: int = 0) -> Twin:
    return GENERATORS[model](folder, seed=seed)
