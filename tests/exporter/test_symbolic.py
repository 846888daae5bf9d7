"""`dynamic_shapes=`: symbolic extents (sequence, time, resolution, cache length) exported from one trace.

Each module is exported once at its example shapes, then run at other values of its symbols against torch by:
nnef_torch (the file loaded with `input_shapes=`), the Khronos executor and strict tract (the standard file with its
`external`s re-declared, NNEF's own way of changing input shapes), and tract on the `target="tract"` file, which
declares the symbols and runs at every size unchanged. What standard NNEF cannot write fails with the ATen
operation, the extent by its `Dim` name and the user's source line.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

import nnef_torch
from exporter.consumers import close_all, khronos_parse, run_khronos, run_tract
from nnef_torch.errors import ExportError

pytestmark = pytest.mark.slow


class Projection(nn.Module):
    """A linear layer over [B, S, 16], split into heads and merged back, with slices from both ends."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x, y):
        b, s, h = x.shape
        z = self.linear(x).view(b, s, 4, h // 4).transpose(1, 2)
        w = z.reshape(b * 4, s, -1)
        return w[:, 1:, :].sum(-1), (y[:, :-1] * 2).relu()


class CausalConv(nn.Module):
    """Causal 1-D convolutions over time [B, C, T]: left padding, dilation, a residual."""

    def __init__(self):
        super().__init__()
        self.first = nn.Conv1d(4, 8, 3)
        self.second = nn.Conv1d(8, 4, 3, dilation=2)

    def forward(self, x):
        h = torch.relu(self.first(F.pad(x, (2, 0))))
        return x + self.second(F.pad(h, (4, 0)))


class UNet(nn.Module):
    """A U-shaped CNN over H x W: down by pooling, up by nearest up-sampling, the skip concatenated."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, padding=1)
        self.middle = nn.Conv2d(8, 8, 3, padding=1)
        self.up = nn.Conv2d(16, 4, 3, padding=1)

    def forward(self, x):
        skip = torch.relu(self.down(x))
        h = torch.relu(self.middle(F.max_pool2d(skip, 2)))
        h = F.interpolate(h, scale_factor=2, mode="nearest")
        return self.up(torch.cat([h, skip], dim=1))


class CachedAttention(nn.Module):
    """One attention layer with a key-value cache: S new positions attend to the P cached ones and themselves;
    the updated caches (P + S positions) are outputs."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.out = nn.Linear(16, 16)

    def forward(self, x, past_k, past_v):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        weights = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, dim=-1)
        y = (weights @ v).transpose(1, 2).reshape(b, s, 16)
        return self.out(y), k, v


B, S, T, P = Dim("B", max=64), Dim("S", min=3, max=512), Dim("T", min=2, max=4096), Dim("P", max=1024)
H, W = Dim("h", min=2, max=256), Dim("w", min=2, max=256)

# name -> (module, example inputs' shapes, dynamic_shapes, the other input shapes it is run at)
CASES = {
    "projection": (Projection, [(2, 8, 16), (2, 8)], ({0: B, 1: S}, {0: B, 1: S}),
                   [[(1, 3, 16), (1, 3)], [(3, 17, 16), (3, 17)], [(5, 40, 16), (5, 40)]]),
    "causal_conv": (CausalConv, [(2, 4, 20)], ({0: B, 2: T},), [[(1, 4, 7)], [(3, 4, 64)], [(1, 4, 333)]]),
    "unet": (UNet, [(1, 3, 8, 12)], ({2: 2 * H, 3: 2 * W},), [[(1, 3, 4, 4)], [(1, 3, 16, 6)], [(1, 3, 30, 22)]]),
    "cached_attention": (CachedAttention, [(2, 4, 16), (2, 2, 6, 8), (2, 2, 6, 8)],
                         ({0: B, 1: S}, {0: B, 2: P}, {0: B, 2: P}),
                         [[(1, 1, 16), (1, 2, 9, 8), (1, 2, 9, 8)], [(2, 7, 16), (2, 2, 1, 8), (2, 2, 1, 8)],
                          [(1, 30, 16), (1, 2, 40, 8), (1, 2, 40, 8)]]),
}


def _module(name: str) -> nn.Module:
    torch.manual_seed(0)
    return CASES[name][0]().eval()


def _inputs(shapes: list[tuple[int, ...]]) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(sum(sum(shape) for shape in shapes))
    return [torch.randn(shape, generator=generator) for shape in shapes]


def _expected(module: nn.Module, inputs: list[torch.Tensor]) -> list[np.ndarray]:
    with torch.no_grad():
        outputs = module(*inputs)
    return [o.numpy() for o in (outputs if isinstance(outputs, tuple) else (outputs,))]


def redeclared(folder: Path, shapes: list[tuple[int, ...]], target: Path) -> Path:
    """A copy of the model whose `external`s declare `shapes`, in order."""
    shutil.copytree(folder, target)
    text = (folder / "graph.nnef").read_text()
    found = iter(shapes)
    text = re.sub(r"(external<\w+>\(shape = )\[[^\]]*\]", lambda m: f"{m.group(1)}{list(next(found))}", text)
    (target / "graph.nnef").write_text(text)
    return target


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each case saved once as standard NNEF and once for tract."""
    folders = {}
    for name, (_, shapes, dynamic, _) in CASES.items():
        root = tmp_path_factory.mktemp(name)
        module, example = _module(name), tuple(_inputs(shapes))
        nnef_torch.save(module, root / "standard", example, dynamic_shapes=dynamic)
        nnef_torch.save(module, root / "tract", example, dynamic_shapes=dynamic, target="tract")
        folders[name] = (root / "standard", root / "tract")
    return folders


@pytest.mark.parametrize("name", sorted(CASES))
def test_only_the_externals_hold_example_extents(name: str, exported: dict[str, tuple[Path, Path]]) -> None:
    standard, _ = exported[name]
    example = [list(shape) for shape in CASES[name][1]]
    text = (standard / "graph.nnef").read_text()
    declared = [eval_list(m) for m in re.findall(r"external<\w+>\(shape = (\[[^\]]*\])", text)]
    assert declared == example
    khronos_parse(standard)


def eval_list(text: str) -> list[int]:
    return [int(item) for item in text.strip("[]").split(",")]


@pytest.mark.parametrize("name", sorted(CASES))
def test_standard_file_runs_at_other_sizes(name: str, exported: dict[str, tuple[Path, Path]],
                                           tmp_path: Path) -> None:
    standard, _ = exported[name]
    module = _module(name)
    for index, shapes in enumerate(CASES[name][3]):
        inputs = _inputs(shapes)
        expected = _expected(module, inputs)
        loaded = nnef_torch.load(standard, input_shapes=dict(zip(_external_names(standard), shapes)))
        with torch.no_grad():
            found = loaded(*inputs)
        close_all([f.numpy() for f in (found if isinstance(found, tuple) else (found,))], expected, 1e-4,
                  f"nnef_torch at {shapes}")
        folder = redeclared(standard, shapes, tmp_path / f"size{index}")
        arrays = [x.numpy() for x in inputs]
        close_all(run_khronos(folder, arrays), expected, 1e-4, f"nnef.Session at {shapes}")
        close_all(run_tract(folder, arrays), expected, 1e-4, f"tract at {shapes}")


def _external_names(folder: Path) -> list[str]:
    return re.findall(r"(\w+) = external<", (folder / "graph.nnef").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_tract_target_runs_at_every_size_from_one_file(name: str, exported: dict[str, tuple[Path, Path]]) -> None:
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    _, for_tract = exported[name]
    text = (for_tract / "graph.nnef").read_text()
    assert "extension tract_symbol" in text and "tract_assert" in text
    runnable = tract.nnef().load(str(for_tract)).into_runnable()
    module = _module(name)
    for shapes in [CASES[name][1], *CASES[name][3]]:
        inputs = _inputs(shapes)
        outputs = runnable.run([x.numpy() for x in inputs])
        found = [outputs[i].to_numpy() for i in range(len(outputs))]
        close_all(found, _expected(module, inputs), 1e-4, f"tract at {shapes}")


def test_dims_and_symbols_name_the_users_dims() -> None:
    model = nnef_torch.export(_module("cached_attention"), tuple(_inputs(CASES["cached_attention"][1])),
                              dynamic_shapes=CASES["cached_attention"][2])
    assert model.dims == {"x": ("B", "S", 16), "past_k": ("B", 2, "P", 8), "past_v": ("B", 2, "P", 8)}
    assert model.symbols == {"B": (0, 64), "P": (0, 1024), "S": (3, 512)}  # torch.export.Dim's own lowest: 0


class CausalMask(nn.Module):
    """A causal mask built from the sequence length: standard NNEF has no operation that reads an extent."""

    def forward(self, x):
        s = x.shape[1]
        mask = torch.ones(s, s).tril()
        return x @ x.transpose(1, 2) * mask


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


class SplitSequence(nn.Module):
    """Unflattening [B*S] into [B, S] needs both extents, which a reshape cannot read."""

    def forward(self, x, y):
        return (x.reshape(-1) * 2).reshape(y.shape[0], y.shape[1])


def test_an_extent_read_as_a_number_names_the_operation_the_dim_and_the_line() -> None:
    with pytest.raises(ExportError) as info:
        nnef_torch.export(CausalMask(), torch.randn(1, 5, 4), dynamic_shapes=({1: S},))
    problem = info.value.problems[0]
    assert "aten.ones" in problem and "extent S" in problem and "target='tract'" in problem
    assert problem.location.file == __file__ and problem.code == "mask = torch.ones(s, s).tril()"


def test_a_reshape_that_needs_two_symbolic_extents_is_refused() -> None:
    with pytest.raises(ExportError) as info:
        nnef_torch.export(SplitSequence(), (torch.randn(2, 5), torch.randn(2, 5)),
                          dynamic_shapes=({0: B, 1: S}, {0: B, 1: S}))
    problem = info.value.problems[0]
    assert "aten.view" in problem or "aten.reshape" in problem
    assert "[B*S]" in problem and "[B, S]" in problem and "target='tract'" in problem


def test_a_recurrence_over_a_symbolic_length_is_refused() -> None:
    """torch's LSTM fixes the time extent while tracing: the export names the Dim and says what torch found."""
    with pytest.raises(ExportError, match="does not allow the dynamic_shapes given: You marked T as dynamic"):
        nnef_torch.export(Recurrent().eval(), torch.randn(1, 5, 4), dynamic_shapes=({1: T},))


def test_dynamic_shapes_and_dynamic_batch_are_exclusive() -> None:
    with pytest.raises(ExportError, match="not both"):
        nnef_torch.export(CausalConv(), torch.randn(2, 4, 20), dynamic_shapes=({0: B},), dynamic_batch=True)


def test_without_symbols_the_export_is_the_fixed_one() -> None:
    module, example = _module("causal_conv"), torch.randn(2, 4, 20)
    assert nnef_torch.export(module, example, dynamic_shapes=({},)).text == nnef_torch.export(module, example).text


class CachedDecoder(nn.Module):
    """A decoder layer over a key-value cache of P positions: S new tokens at positions P .. P+S-1 (an `arange`
    over symbolic bounds), a causal mask built from positions, attention over P + S keys."""

    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(50, 16)
        self.positions = nn.Embedding(64, 16)
        self.qkv = nn.Linear(16, 48)
        self.out = nn.Linear(16, 50)

    def forward(self, ids, past_k, past_v):
        b, s = ids.shape
        p = past_k.shape[2]
        positions = torch.arange(p, p + s)
        h = self.tokens(ids) + self.positions(positions)
        q, k, v = self.qkv(h).view(b, s, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        mask = torch.arange(p + s)[None, :] <= positions[:, None]
        scores = (q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(~mask, float("-inf"))
        y = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(b, s, 16)
        return self.out(y), k, v


DECODER_DIMS = ({1: Dim("S", min=1, max=32)}, {2: Dim("P", min=1, max=31)}, {2: Dim("P", min=1, max=31)})


def _decoder_inputs(s: int, p: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(s * 100 + p)
    return (torch.randint(0, 50, (1, s), generator=generator), torch.randn(1, 2, p, 8, generator=generator),
            torch.randn(1, 2, p, 8, generator=generator))


def test_a_cached_decoder_for_tract_runs_at_every_length_in_tract_and_reads_back(tmp_path: Path) -> None:
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    torch.manual_seed(0)
    module = CachedDecoder().eval()
    dims = DECODER_DIMS[0], {2: DECODER_DIMS[1][2]}, {2: DECODER_DIMS[1][2]}  # one P shared by both caches
    nnef_torch.save(module, tmp_path / "decoder", _decoder_inputs(4, 3), dynamic_shapes=dims, target="tract")
    text = (tmp_path / "decoder" / "graph.nnef").read_text()
    assert "tract_core_range(P, P + S, 1)" in text and "constant" not in text
    runnable = tract.nnef().load(str(tmp_path / "decoder")).into_runnable()
    loaded = nnef_torch.load(tmp_path / "decoder")  # its symbols bound at each call
    for s, p in [(4, 3), (1, 7), (5, 1), (9, 12)]:
        inputs = _decoder_inputs(s, p)
        expected = _expected(module, list(inputs))
        outputs = runnable.run([x.numpy() for x in inputs])
        close_all([outputs[i].to_numpy() for i in range(len(outputs))], expected, 1e-4, f"tract at S={s}, P={p}")
        with torch.no_grad():
            close_all([o.numpy() for o in loaded(*inputs)], expected, 1e-5, f"nnef_torch at S={s}, P={p}")


def test_the_cached_decoder_is_refused_as_standard_nnef_naming_the_arange() -> None:
    with pytest.raises(ExportError) as info:
        nnef_torch.export(CachedDecoder().eval(), _decoder_inputs(4, 3),
                          dynamic_shapes=(DECODER_DIMS[0], {2: DECODER_DIMS[1][2]}, {2: DECODER_DIMS[1][2]}))
    problem = info.value.problems[0]
    assert "aten.arange" in problem and "extent P" in problem and "target='tract'" in problem
    assert problem.code == "positions = torch.arange(p, p + s)"


class TwoLayerLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 10, num_layers=2, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def test_an_lstm_over_a_symbolic_batch_runs_in_tract_and_standard_nnef_names_its_zero_state(tmp_path: Path) -> None:
    """torch makes the initial state with `torch.zeros(layers, batch, hidden)`: a constant of symbolic size, which
    tract's target tiles from one value and standard NNEF cannot write."""
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    torch.manual_seed(0)
    module, dims = TwoLayerLSTM().eval(), ({0: B},)
    with pytest.raises(ExportError) as info:
        nnef_torch.export(module, torch.randn(2, 5, 6), dynamic_shapes=dims)
    assert all("aten.zeros" in problem and "extent B" in problem for problem in info.value.problems)
    nnef_torch.save(module, tmp_path / "lstm", torch.randn(2, 5, 6), dynamic_shapes=dims, target="tract")
    runnable = tract.nnef().load(str(tmp_path / "lstm")).into_runnable()
    loaded = nnef_torch.load(tmp_path / "lstm")
    for batch in (1, 3, 7):
        x = torch.randn(batch, 5, 6)
        expected = _expected(module, [x])
        close_all([runnable.run([x.numpy()])[0].to_numpy()], expected, 1e-4, f"tract at batch {batch}")
        with torch.no_grad():
            close_all([loaded(x).numpy()], expected, 1e-5, f"nnef_torch at batch {batch}")


def test_hugging_face_gpt2_for_tract_matches_transformers_at_every_length(tmp_path: Path) -> None:
    """transformers' own GPT-2 (random weights): learned positions from an `arange`, the causal mask of
    `create_causal_mask` (a cumulative sum, indexing with two index tensors), attention; one file for any S."""
    transformers = pytest.importorskip("transformers", reason="the `transformers` package (test extra) is not "
                                                              "installed")
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64,
                                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()

    class Logits(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids, use_cache=False).logits

    wrapper = Logits()
    nnef_torch.save(wrapper, tmp_path / "gpt2", torch.randint(0, 100, (1, 7)),
                    dynamic_shapes=({1: Dim("S", min=2, max=64)},), target="tract")
    runnable = tract.nnef().load(str(tmp_path / "gpt2")).into_runnable()
    loaded = nnef_torch.load(tmp_path / "gpt2")
    for length in (2, 5, 13, 40):
        ids = torch.randint(0, 100, (1, length), generator=torch.Generator().manual_seed(length))
        expected = _expected(wrapper, [ids])
        close_all([runnable.run([ids.numpy()])[0].to_numpy()], expected, 1e-4, f"tract at S={length}")
        with torch.no_grad():
            close_all([loaded(ids).numpy()], expected, 1e-4, f"nnef_torch at S={length}")


def test_reshape_steps_change_only_the_axis_groups_that_change() -> None:
    """Worked by hand: matched axis groups stay (NNEF copies them), a changed group is reshaped alone with its
    one symbolic extent as -1, groups from the last to the first so earlier axes keep their positions."""
    import sympy

    from nnef_torch.exporter.emitter import Unmappable
    from nnef_torch.exporter.symbolic import reshape_steps

    b, s = sympy.symbols("b s")
    examples = {b: 2, s: 8}
    assert reshape_steps([b, s, 16], [b, s, 4, 4], examples) == [(2, 1, [4, 4])]
    assert reshape_steps([b, 4, s, 4], [4 * b, s, 4], examples) == [(0, 2, [-1])]
    assert reshape_steps([b, s, 16], [b, 16 * s], examples) == [(1, 2, [-1])]
    assert reshape_steps([1, s], [s], examples) == [(0, 2, [-1])]
    assert reshape_steps([b, 6, s], [b, 2, 3, s, 1], examples) == [(2, 1, [-1, 1]), (1, 1, [2, 3])]
    assert reshape_steps([b, s], [b, s], examples) == []
    with pytest.raises(Unmappable, match=r"reshaping \[b\*s\] into \[b, s\]"):
        reshape_steps([b * s, 16], [b, s, 16], examples)
