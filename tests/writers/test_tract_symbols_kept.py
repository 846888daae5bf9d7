"""Saving a module read from a tract document that declares symbols (S, P): in tract's form the document is kept as
read with the current weights, so the file still runs at every size in tract; a weight under
`torch.nn.utils.parametrize` (LoRA adapters) is saved with its current value."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn.utils import parametrize

import nnef_torch
from nnef_torch.errors import NNEFError

transformers = pytest.importorskip("transformers", reason="the `transformers` package (test extra) is not installed")
tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")


class Shift(torch.nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.delta = torch.nn.Parameter(torch.full(shape, 0.01))

    def forward(self, w):
        return w + self.delta


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    folder = tmp_path_factory.mktemp("llm") / "llama"
    layout = nnef_torch.llm.export(transformers.LlamaForCausalLM(config), folder)
    return folder, layout


def _inputs(layout, s: int, p: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(10 * s + p)
    ids = torch.randint(0, 64, (1, s), generator=generator)
    return [ids, *[torch.randn(1, layout.kv_heads, p, layout.head_dim, generator=generator)
                   for _ in range(2 * layout.layers)]]


def test_a_changed_weight_is_saved_into_the_document_as_read(exported, tmp_path: Path) -> None:
    folder, layout = exported
    module = nnef_torch.load(folder)
    with torch.no_grad():
        module.get_parameter("model.layers.0.mlp.up_proj.weight").mul_(1.5)
    module.save(tmp_path / "out", target="tract")  # no call needed: nothing is re-lowered
    assert (tmp_path / "out" / "graph.nnef").read_text() == (folder / "graph.nnef").read_text()
    runnable = tract.nnef().with_tract_transformers().with_tract_extra().load(str(tmp_path / "out")).into_runnable()
    for s, p in [(3, 0), (1, 6)]:
        inputs = _inputs(layout, s, p)
        with torch.no_grad():
            expected = module(*inputs)[0].numpy()
        got = runnable.run([x.numpy() for x in inputs])[0].to_numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=f"S={s}, P={p}")


def test_a_parametrized_weight_is_saved_with_its_current_value(exported, tmp_path: Path) -> None:
    folder, layout = exported
    module = nnef_torch.load(folder)
    inputs = _inputs(layout, 4, 0)
    module(*inputs)  # the shapes it runs at while parametrized
    owner = module.get_submodule("model.layers.0.self_attn.q_proj")
    weight = owner.weight.detach().clone()
    parametrize.register_parametrization(owner, "weight", Shift(weight.shape))
    module(*inputs)
    with pytest.raises(NNEFError, match="parametrization"):
        module(*_inputs(layout, 2, 3))
    module.save(tmp_path / "out", target="tract")
    saved = nnef_torch.read_tensor(tmp_path / "out" / "model" / "layers" / "0" / "self_attn" / "q_proj" /
                                   "weight.dat")
    np.testing.assert_allclose(saved, (weight + 0.01).numpy(), rtol=0, atol=1e-7)
