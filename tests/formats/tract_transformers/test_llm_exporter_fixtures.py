"""Files written by torch_to_nnef's own LLM exporter, torch_to_nnef_llm's `t2n_export_llm_to_tract` (fixtures/
t2n_llm_*, made by make_llm_exporter_fixtures.py): read at several (S, P), P = 0 included, each equals tract
running the same folder, and the f32 one the transformers model rebuilt from its seed; greedy decoding feeding the
caches back gives tract's tokens; saved in tract's form, tract runs the saved folder to the same outputs.

The I/O is matched by the file's own names: input_ids, in_cache_{key,value}_i -> outputs (the last position's
logits only: num_logits_to_keep=1), out_cache_{key,value}_i."""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from formats.tract_transformers.make_llm_exporter_fixtures import CONFIG, EXPORTS, FIXTURES, build

pytestmark = pytest.mark.filterwarnings("ignore::nnef_torch.errors.NNEFDeviationWarning")

F32, Q4_0 = "t2n_llm_llama", "t2n_llm_llama_q4_0"
SIZES = [(1, 0), (5, 0), (1, 6), (3, 4)]  # (S, P)
CASES = [(name, s, p) for name in EXPORTS for s, p in SIZES]
RTOL, ATOL = 1e-4, 1e-5
LAYERS, KV_HEADS, HEAD_DIM = CONFIG["num_hidden_layers"], CONFIG["num_key_value_heads"], CONFIG["head_dim"]


def _id(case: tuple[str, int, int]) -> str:
    return f"{case[0]}-S{case[1]}-P{case[2]}"


@cache
def _io_names(folder: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The graph's input and output names, as graph.nnef declares them."""
    found = re.search(r"^graph\s+\w+\s*\(([^)]*)\)\s*->\s*\(([^)]*)\)", (folder / "graph.nnef").read_text(), re.M)
    assert found, "no graph declaration"
    return tuple(found[1].replace(" ", "").split(",")), tuple(found[2].replace(" ", "").split(","))


def _inputs(s: int, p: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    named = {"input_ids": rng.integers(0, CONFIG["vocab_size"], (1, s), dtype=np.int64)}
    for i in range(LAYERS):
        for kind in ("key", "value"):
            named[f"in_cache_{kind}_{i}"] = rng.standard_normal((1, KV_HEADS, p, HEAD_DIM)).astype(np.float32)
    return named


@cache
def _loaded(folder: Path) -> torch.nn.Module:
    return nnef_torch.load(folder)


def _ours(module: torch.nn.Module, folder: Path, named: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    inputs, outputs = _io_names(folder)
    with torch.no_grad():
        values = module(*(torch.from_numpy(named[name]) for name in inputs))
    return dict(zip(outputs, (value.numpy() for value in values), strict=True))


@cache
def _tract_runnable(folder: Path):
    tract = pytest.importorskip("tract")
    model = tract.nnef().with_tract_transformers().with_tract_extra().load(str(folder))
    inputs = [model.input_name(i) for i in range(model.input_count())]
    outputs = [model.output_name(i) for i in range(model.output_count())]
    return model.into_runnable(), inputs, outputs


def _tract(folder: Path, named: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    runnable, inputs, tract_outputs = _tract_runnable(folder)
    outputs = _io_names(folder)[1]
    # tract names the first output after the node computing it; the caches keep the file's names
    assert tract_outputs[1:] == list(outputs[1:])
    values = runnable.run([named[name] for name in inputs])
    return dict(zip(outputs, (value.to_numpy() for value in values), strict=True))


@cache
def _transformers() -> torch.nn.Module:
    return build()


def _transformers_run(named: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The rebuilt model with the given past keys and values, the last position's logits kept."""
    from transformers import DynamicCache

    model = _transformers()
    past = DynamicCache(config=model.config)
    for i in range(LAYERS):
        keys, values = (torch.from_numpy(named[f"in_cache_{kind}_{i}"]) for kind in ("key", "value"))
        past.update(keys[:, :, :0], values[:, :, :0], i)  # set up empty, then holding the given past
        past.layers[i].keys, past.layers[i].values = keys, values
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(named["input_ids"]), past_key_values=past, use_cache=True)
    result = {"outputs": out.logits[:, -1:].numpy()}
    for i, layer in enumerate(out.past_key_values.layers[:LAYERS]):
        result[f"out_cache_key_{i}"], result[f"out_cache_value_{i}"] = layer.keys.numpy(), layer.values.numpy()
    return result


def _assert_all_close(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], rtol: float = RTOL,
                      atol: float = ATOL) -> None:
    assert got.keys() == expected.keys()
    for name, value in got.items():
        assert value.shape == expected[name].shape, f"{name}: {value.shape} vs {expected[name].shape}"
        np.testing.assert_allclose(value, expected[name], rtol=rtol, atol=atol, err_msg=name)


def test_io_convention():
    for name in EXPORTS:
        inputs, outputs = _io_names(FIXTURES / name)
        caches = [f"cache_{kind}_{i}" for i in range(LAYERS) for kind in ("key", "value")]
        assert inputs == ("input_ids", *(f"in_{c}" for c in caches))
        assert outputs == ("outputs", *(f"out_{c}" for c in caches))


@pytest.mark.parametrize("case", CASES, ids=map(_id, CASES))
def test_matches_tract(case):
    name, s, p = case
    folder = FIXTURES / name
    named = _inputs(s, p, seed=10 * s + p)
    ours = _ours(_loaded(folder), folder, named)
    assert ours["outputs"].shape == (1, 1, CONFIG["vocab_size"])  # num_logits_to_keep=1
    assert ours["out_cache_key_0"].shape == (1, KV_HEADS, p + s, HEAD_DIM)
    _assert_all_close(ours, _tract(folder, named))


@pytest.mark.parametrize("s, p", SIZES, ids=[f"S{s}-P{p}" for s, p in SIZES])
def test_f32_matches_transformers(s, p):
    folder = FIXTURES / F32
    named = _inputs(s, p, seed=10 * s + p)
    _assert_all_close(_ours(_loaded(folder), folder, named), _transformers_run(named))


def _greedy(run, prompt: np.ndarray, count: int) -> list[int]:
    """`count` greedy tokens: a prefill with empty caches, then one token at a time, the caches fed back."""
    named = {"input_ids": prompt, **{name: value[:, :, :0] for name, value in _inputs(1, 0, 0).items()
                                     if name != "input_ids"}}
    tokens: list[int] = []
    for _ in range(count):
        out = run(named)
        tokens.append(int(out["outputs"][0, -1].argmax()))
        named = {"input_ids": np.array([[tokens[-1]]], np.int64),
                 **{name.replace("out_", "in_", 1): value for name, value in out.items() if name != "outputs"}}
    return tokens


@pytest.mark.parametrize("name", list(EXPORTS))
def test_greedy_decoding_matches_tract(name):
    folder = FIXTURES / name
    prompt = np.random.default_rng(5).integers(0, CONFIG["vocab_size"], (1, 4), dtype=np.int64)
    ours = _greedy(lambda named: _ours(_loaded(folder), folder, named), prompt, 8)
    assert len(set(ours)) > 2  # the weights are strong enough to move the choice
    assert ours == _greedy(lambda named: _tract(folder, named), prompt, 8)
    if name == F32:
        with torch.no_grad():
            generated = _transformers().generate(torch.from_numpy(prompt), attention_mask=torch.ones(1, 4),
                                                 max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)
        assert ours == generated[0, 4:].tolist()


@pytest.mark.parametrize("name", list(EXPORTS))
def test_save_tract_form_runs_in_tract(tmp_path, name):
    folder = FIXTURES / name
    module = nnef_torch.load(folder)
    named = _inputs(2, 3, seed=1)
    expected = _ours(module, folder, named)  # the call binds S and P: the saved document has these shapes
    saved = tmp_path / "saved"
    module.save(saved, target="tract")
    assert (saved / "graph.nnef").read_text() == (folder / "graph.nnef").read_text()  # kept as read
    _assert_all_close(_tract(saved, named), expected)
    _assert_all_close(_ours(nnef_torch.load(saved), saved, named), expected)
