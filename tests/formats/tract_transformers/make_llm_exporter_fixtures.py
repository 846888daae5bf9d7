"""Regenerate the fixtures written by torch_to_nnef's own LLM exporter (torch_to_nnef_llm): one tiny seeded
Llama with grouped-query heads, saved with save_pretrained beside a character tokenizer built offline, exported by
its CLI `t2n_export_llm_to_tract --local-dir MODEL -e OUT -nv` (run as a subprocess, a stub tract binary) two
ways: its defaults (f32) and `-c min_max_q4_0`. Not made: `--reify-sdpa-operator`, whose file (0.24.12, 2 key/value
heads for 4 query heads) reshapes the query [1, 4, S, 8] to [1, 2, 2, 8], which tract refuses on load
("32*S should be equal to 32").

Run `python tests/formats/tract_transformers/make_llm_exporter_fixtures.py [name ...]` (needs torch_to_nnef_llm,
transformers and tokenizers). Each folder fixtures/<name>/ holds graph.nnef and the .dat files of the
model/model.nnef.tgz it writes (its tokenizer and test .npz files are left out). The tests rebuild the model from
SEED and CONFIG (`build()`).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: the tract_core fixtures' helpers
import torch

from formats.tract_core.make_dynamic_fixtures import _stable, stub_tract  # noqa: E402

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
MAX_BYTES = 120_000  # each fixture folder stays under this
SEED = 31
# hidden 32, intermediate 32, head_dim 8: every Linear's input extent is a multiple of 32 (Q4_0 blocks) and the
# f32 folder of two layers stays small (its eager graph.nnef alone is ~50 KB); 4 query heads over 2 key/value heads
CONFIG = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 64,
          "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "bos_token_id": None, "eos_token_id": None}
CHARACTERS = " etaoinshrdlucmfwypvbgkjqxz.,"  # ids 1..29; 0 is <unk>: fits vocab_size
EXPORTS = {  # fixture name: the CLI flags beyond --local-dir, -e and -nv
    "t2n_llm_llama": [],
    "t2n_llm_llama_q4_0": ["-c", "min_max_q4_0"],
}


def build() -> torch.nn.Module:
    """The exported Llama, in eval mode, its weights drawn from SEED and moved by 0.5 * N(0, 1) each (norm weights
    too): large enough that greedy decoding does not repeat one token."""
    import transformers

    torch.manual_seed(SEED)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIG))
    gen = torch.Generator().manual_seed(SEED + 1000)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=gen))
    return model.eval()


def save_model(folder: Path) -> None:
    """The model as save_pretrained writes it, with a character tokenizer (torch_to_nnef_llm loads one from the
    model folder to encode its sample text)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    build().save_pretrained(folder)
    vocab = {"<unk>": 0, **{c: i + 1 for i, c in enumerate(CHARACTERS)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>").save_pretrained(folder)


def export(name: str, model_dir: Path, tmp: Path) -> int:
    out = tmp / name
    command = [sys.executable, "-c", "from torch_to_nnef_llm.cli import main; main()", "--local-dir",
               str(model_dir), "-e", str(out), "-nv", "--tract-specific-path", str(stub_tract(tmp)),
               *EXPORTS[name]]
    subprocess.run(command, check=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    archive = next(out.rglob("model.nnef.tgz"))
    unpacked = tmp / f"{name}_unpacked"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    graph = unpacked / "graph.nnef"
    graph.write_text(_stable(graph.read_text()))
    size = sum(f.stat().st_size for f in unpacked.rglob("*") if f.is_file())
    if size > MAX_BYTES:
        raise SystemExit(f"{name}: {size} bytes, over {MAX_BYTES}")
    shutil.rmtree(FIXTURES / name, ignore_errors=True)
    shutil.copytree(unpacked, FIXTURES / name)
    return size


def main() -> None:
    only = set(sys.argv[1:])
    unknown = only - set(EXPORTS)
    if unknown:
        raise SystemExit(f"unknown fixtures {sorted(unknown)}; known: {sorted(EXPORTS)}")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        save_model(model_dir)
        for name in EXPORTS:
            if not only or name in only:
                print(f"{name}: {export(name, model_dir, Path(tmp))} bytes")


if __name__ == "__main__":
    main()
