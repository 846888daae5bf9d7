"""`nnef_torch.llm.export(weights=...)`: float16 and tract's Q4_0 blocks, min-max or from 4-bit quantization-aware
training. tract runs each file; its logits equal a torch twin of the stored weights (the model with each weight
replaced by what the file holds), and greedy decoding in tract equals decoding in `nnef_torch.load` of the file."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from llm.test_export import greedy, make, module_step, tract_step
from nnef_torch.format.block_quant import dequantize_q4_0, min_max_q4_0
from nnef_torch.llm import export
from nnef_torch.quant import prepare_q4_0

pytest.importorskip("transformers", reason="the `transformers` package (test extra) is not installed")
pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")

PROMPT = torch.randint(0, 96, (1, 9), generator=torch.Generator().manual_seed(9))


def tract_logits(path: Path, layout) -> np.ndarray:
    return tract_step(path)(PROMPT, layout.empty_cache())[0]


def twin_logits(model: torch.nn.Module, replace) -> np.ndarray:
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for name, parameter in twin.named_parameters():
            parameter.copy_(replace(name, parameter))
        return twin(PROMPT).logits.numpy()


def dat_bytes(path: Path, name: str) -> int:
    return (path / (name.replace(".", "/") + ".dat")).stat().st_size


def test_float16_weights_halve_the_file_and_compute_in_float32(tmp_path: Path) -> None:
    model = make("llama")
    layout = export(model, tmp_path / "f16", weights="f16")
    expected = twin_logits(model, lambda name, p: p.half().float())
    np.testing.assert_allclose(tract_logits(tmp_path / "f16", layout), expected, rtol=1e-4, atol=1e-4)
    weight = model.model.layers[0].mlp.up_proj.weight
    assert dat_bytes(tmp_path / "f16", "model.layers.0.mlp.up_proj.weight") < weight.numel() * 2 + 200
    assert greedy(module_step(nnef_torch.load(tmp_path / "f16")), layout, PROMPT, 8) == \
           greedy(tract_step(tmp_path / "f16"), layout, PROMPT, 8)


def test_q4_0_stores_linear_weights_in_tract_blocks_under_5_bits_per_weight(tmp_path: Path) -> None:
    model = make("llama")
    layout = export(model, tmp_path / "q4", weights="q4_0")
    linear = {f"{name}.weight" for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}

    def stored(name: str, p: torch.Tensor) -> torch.Tensor:
        if name not in linear:
            return p
        return torch.from_numpy(dequantize_q4_0(*min_max_q4_0(p.detach().numpy())))
    np.testing.assert_allclose(tract_logits(tmp_path / "q4", layout), twin_logits(model, stored), rtol=1e-4,
                               atol=1e-4)
    for name in linear:
        count = model.get_parameter(name).numel()
        assert dat_bytes(tmp_path / "q4", name) * 8 / count <= 5.0, name
    embedding = model.model.embed_tokens.weight
    assert dat_bytes(tmp_path / "q4", "model.embed_tokens.weight") >= embedding.numel() * 4  # gathered: float
    assert greedy(module_step(nnef_torch.load(tmp_path / "q4")), layout, PROMPT, 8) == \
           greedy(tract_step(tmp_path / "q4"), layout, PROMPT, 8)


def test_gpt2_conv1d_layers_are_blocked_along_their_input_and_a_tied_head_stays_float(tmp_path: Path) -> None:
    model = make("gpt2")  # lm_head shares the token embedding, which is read by rows
    layout = export(model, tmp_path / "gpt2", weights="q4_0")
    assert dat_bytes(tmp_path / "gpt2", "transformer.wte.weight") >= model.transformer.wte.weight.numel() * 4
    conv1d = {f"{name}.weight" for name, m in model.named_modules() if type(m).__name__ == "Conv1D"}
    assert len(conv1d) == 8 and all(type(m).__name__ != "Linear" for m in model.modules() if m is not model.lm_head)

    def stored(name: str, p: torch.Tensor) -> torch.Tensor:  # [in, out]: blocks of 32 along `in`
        if name not in conv1d:
            return p
        return torch.from_numpy(dequantize_q4_0(*min_max_q4_0(p.detach().t().contiguous().numpy()))).t()
    np.testing.assert_allclose(tract_logits(tmp_path / "gpt2", layout), twin_logits(model, stored), rtol=1e-4,
                               atol=1e-4)
    for name in conv1d:  # past the 128-byte header: 18 bytes per 32 weights
        assert (dat_bytes(tmp_path / "gpt2", name) - 128) * 8 / model.get_parameter(name).numel() == 4.5, name
    assert greedy(module_step(nnef_torch.load(tmp_path / "gpt2")), layout, PROMPT, 6) == \
           greedy(tract_step(tmp_path / "gpt2"), layout, PROMPT, 6)


def test_trained_4_bit_codes_are_written_as_they_were_trained(tmp_path: Path) -> None:
    """After a few steps of 4-bit QAT (learned scales), tract computes what the prepared model computes."""
    model = prepare_q4_0(make("llama"))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = torch.randint(0, 96, (4, 12), generator=torch.Generator().manual_seed(0))
    for _ in range(3):
        loss = model(data, labels=data).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    layout = export(model, tmp_path / "qat", weights="q4_0")
    with torch.no_grad():
        expected = model(PROMPT).logits.numpy()
    np.testing.assert_allclose(tract_logits(tmp_path / "qat", layout), expected, rtol=1e-4, atol=1e-4)
    assert len([m for m in model.modules() if torch.nn.utils.parametrize.is_parametrized(m)]) == 15  # unchanged: 7 linears a layer and the head
