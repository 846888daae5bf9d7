"""Regenerate the tract_transformers fixtures: tiny seeded Hugging Face decoders (Llama with grouped-query heads,
Qwen2, GPT-2) exported by torch_to_nnef's `TractNNEF` target with `tract_transformers_sdpa`, in the KV-cache I/O
convention of `bench/llm_torch_to_nnef.py` (S and P dynamic), f32 and one with Q4_0 weights.

Run `python tests/formats/tract_transformers/make_fixtures.py [name ...]` (needs torch_to_nnef and transformers;
tract, when installed, checks each export). Running it twice writes the same bytes (it runs itself again with
PYTHONHASHSEED=0: torch_to_nnef numbers some tensor names in set order).

Each folder (fixtures/<name>/) holds graph.nnef and its .dat files. The tests rebuild each model from its seed
(`build(name)`) and compare with it and with tract running the same folder.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
FIXTURES = HERE / "fixtures"
MAX_BYTES = 100_000  # each fixture folder stays under this


def _llama(hidden: int = 16, intermediate: int = 24):
    import transformers

    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=32, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5))


def _llama_q4():
    """Q4_0 blocks hold 32 items: every Linear's input extent a multiple of 32."""
    return _llama(hidden=32, intermediate=32)


def _qwen2():
    import transformers

    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=True))


def _gpt2():
    import transformers

    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=32, n_embd=16, n_layer=2, n_head=2, n_positions=64, n_inner=32, bos_token_id=0,
        eos_token_id=0))


@dataclasses.dataclass(frozen=True)
class Spec:
    """One fixture: the model it is made from, the seed of its weights, and the weights torch_to_nnef writes."""

    make: Callable[[], torch.nn.Module]
    seed: int
    weights: str = "f32"


SPECS = {
    "llama_gqa": Spec(_llama, 21),
    "qwen2": Spec(_qwen2, 22),
    "gpt2": Spec(_gpt2, 23),
    "llama_gqa_q4_0": Spec(_llama_q4, 24, "q4_0"),
}


def bench_module():
    """`bench/llm_torch_to_nnef.py`, the export helper and the I/O convention."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    import llm_torch_to_nnef

    return llm_torch_to_nnef


def build(name: str) -> torch.nn.Module:
    """The fixture's model, in eval mode, with the weights drawn from its seed (norm weights and biases moved off
    their defaults too)."""
    spec = SPECS[name]
    torch.manual_seed(spec.seed)
    model = spec.make()
    gen = torch.Generator().manual_seed(spec.seed + 1000)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    return model.eval()


def operations(text: str) -> Counter:
    """How many times the graph body invokes each operation."""
    body = text[text.index("graph "):]
    return Counter(re.findall(r"=\s*([A-Za-z_]\w*)\s*[(<]", body))


def _stable(text: str) -> str:
    """graph.nnef without the entries that change from run to run or with unrelated packages."""
    lines = [line for line in text.splitlines(True) if not any(
        key in line for key in ('"export_date"', '"export_cmd"', '"py_version"', '"transformers_version"'))]
    return "".join(lines).replace(",\n  ];", "\n  ];")


def export(name: str) -> Counter:
    spec = SPECS[name]
    target = FIXTURES / name
    with tempfile.TemporaryDirectory() as tmp:
        made = bench_module().export_with_torch_to_nnef(build(name), Path(tmp) / "model", weights=spec.weights)
        graph = made / "graph.nnef"
        graph.write_text(_stable(graph.read_text()))
        size = sum(f.stat().st_size for f in made.iterdir())
        if size > MAX_BYTES:
            raise SystemExit(f"{name}: {size} bytes, over {MAX_BYTES}")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(made, target)
    return operations((target / "graph.nnef").read_text())


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])
    unknown = only - set(SPECS)
    if unknown:
        raise SystemExit(f"unknown fixtures {sorted(unknown)}; known: {sorted(SPECS)}")
    for name in SPECS:
        if not only or name in only:
            print(f"{name}: {dict(sorted(export(name).items()))}")


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":  # torch_to_nnef names some tensors in set order: fix the hash seed
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], {**os.environ, "PYTHONHASHSEED": "0"})
    main()
