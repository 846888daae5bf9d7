"""`nnef-torch export-llm MODEL_DIR -o OUT`: a model folder saved by transformers, read offline, written for tract."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from nnef_torch.cli import main

transformers = pytest.importorskip("transformers", reason="the `transformers` package (test extra) is not installed")
tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")


def test_a_saved_model_folder_becomes_a_file_tract_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config).eval()
    model.save_pretrained(tmp_path / "tiny")
    assert main(["export-llm", str(tmp_path / "tiny"), "-o", str(tmp_path / "tiny.tgz")]) == 0
    assert "1 layers, caches [1, 1, P, 16]" in capsys.readouterr().out
    runnable = tract.nnef().with_tract_transformers().with_tract_extra().load(str(tmp_path / "tiny.tgz"))
    ids = torch.randint(0, 64, (1, 5), generator=torch.Generator().manual_seed(5))
    empty = np.zeros((1, 1, 0, 16), np.float32)
    logits = runnable.into_runnable().run([ids.numpy(), empty, empty])[0].to_numpy()
    with torch.no_grad():
        np.testing.assert_allclose(logits, model(ids).logits.numpy(), rtol=1e-4, atol=1e-4)


def test_a_folder_without_safetensors_is_refused_before_reading(tmp_path: Path, capsys: pytest.CaptureFixture
                                                                ) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    (tmp_path / "m" / "pytorch_model.bin").write_bytes(b"\x80\x04")
    assert main(["export-llm", str(tmp_path / "m"), "-o", str(tmp_path / "out")]) == 1
    assert "only safetensors are read" in capsys.readouterr().err
    assert main(["export-llm", str(tmp_path), "-o", str(tmp_path / "out")]) == 1
    assert "no config.json" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
