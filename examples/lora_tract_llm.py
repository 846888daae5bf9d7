"""Add LoRA adapters to a language model read from a tract NNEF file, fine-tune them, merge them and run the result
in tract.

The model stands in for one a user was handed: a small random-weight transformers `LlamaForCausalLM` (2 layers,
width 64, vocabulary 96; no download) written by `nnef_torch.llm.export(model, folder, weights="q4_0")`, the file
tract runs with a key-value cache (inputs `input_ids` [1, S] and `cache_key_i` / `cache_value_i` [1, KV, P, D];
outputs `logits` and `new_cache_*`; S and P are tract symbols; linear weights in tract's Q4_0 blocks). The example
- reads it with `nnef_torch.load` (Q4_0 weights become float32 Parameters named as transformers names them,
  `model.layers.0.self_attn.q_proj.weight`), and freezes every Parameter;
- adds a rank-4 LoRA adapter to each attention and MLP projection of every layer with
  `torch.nn.utils.parametrize` on the submodule holding the weight (W -> W + B @ A * alpha / r, B starting at zero):
  the generated code reads the weight as an attribute, so it computes with the adapted one, and nothing else in
  the module changes;
- trains only the adapters on a synthetic task: continue a fixed cycle of 8 tokens (`CYCLE`), next-token loss;
- merges them (`parametrize.remove_parametrizations(..., leave_parametrized=True)`: the weight Parameter now holds
  W + BA) and saves the module, its weights in Q4_0 again, quantized from the merged values;
- decodes greedily in tract (caches fed back) and with `nnef_torch.load` of the shipped folder, from a 3-token prompt
  at each position of the cycle, before and after training, and counts the tokens that follow the cycle.

While a weight is parametrized, the module runs at the input shapes it was already called with (a new shape needs
plain Parameters), so the adapters are trained at one shape and merged before decoding. `save(out, target="tract")`
writes the graph as read, its symbols kept, with the current weights.

    python examples/lora_tract_llm.py [--out FOLDER] [--steps N] [--rank R]

It runs on one CPU thread in about 25 s of CPU time, imports and the export included (45 s of wall time on a busy
2-core machine), and writes to a temporary folder unless `--out` is given.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.utils import parametrize

import nnef_torch

CONFIG: dict[str, Any] = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
CYCLE = [10, 23, 47, 5, 71, 33, 88, 60]  # the pattern taught: after each token, the next one (cyclically)
ADAPTED = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")
WINDOW = 16  # training sequence length
PROMPT, NEW = 3, 12  # decoding: 3 tokens of the cycle, then 12 generated


class LoRA(torch.nn.Module):
    """The parametrization W -> W + B @ A * scale, with A [r, in] random and B [out, r] zero: the adapted model
    starts as the model read."""

    def __init__(self, weight: torch.Tensor, rank: int, alpha: float, generator: torch.Generator):
        super().__init__()
        out_features, in_features = weight.shape
        self.A = torch.nn.Parameter(torch.randn(rank, in_features, generator=generator) / in_features ** 0.5)
        self.B = torch.nn.Parameter(torch.zeros(out_features, rank))
        self.scale = alpha / rank

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight + (self.B @ self.A) * self.scale


def make_model_file(folder: Path) -> Any:
    """The file a user has: a transformers Llama with random weights, exported for tract with Q4_0 weights."""
    import transformers

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIG)).eval()
    return nnef_torch.llm.export(model, folder, weights="q4_0")


def add_adapters(module: torch.nn.Module, rank: int, alpha: float) -> list[str]:
    """Freeze every Parameter, then parametrize each adapted projection's weight; returns their names."""
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    generator = torch.Generator().manual_seed(0)
    adapted = []
    for name, parameter in list(module.named_parameters()):
        owner, _, leaf = name.rpartition(".")
        if leaf == "weight" and owner.endswith(ADAPTED):
            parametrize.register_parametrization(module.get_submodule(owner), "weight",
                                                 LoRA(parameter, rank, alpha, generator))
            adapted.append(name)
    return adapted


def merge_adapters(module: torch.nn.Module, adapted: list[str]) -> None:
    """Write W + BA into each adapted weight Parameter and drop the adapters."""
    for name in adapted:
        parametrize.remove_parametrizations(module.get_submodule(name.rpartition(".")[0]), "weight",
                                            leave_parametrized=True)


def windows(count: int, seed: int) -> torch.Tensor:
    """`count` windows of WINDOW tokens of the repeated cycle, at random offsets."""
    offsets = torch.randint(0, len(CYCLE), (count,), generator=torch.Generator().manual_seed(seed))
    cycle = torch.tensor(CYCLE)
    return torch.stack([cycle[(int(o) + torch.arange(WINDOW)) % len(CYCLE)] for o in offsets])


def loss_of(module: torch.nn.Module, ids: torch.Tensor, empty: list[torch.Tensor]) -> torch.Tensor:
    logits = module(ids[None], *empty)[0]
    return F.cross_entropy(logits[0, :-1], ids[1:])


def fine_tune(module: torch.nn.Module, empty: list[torch.Tensor], steps: int, lr: float = 1e-2) -> list[float]:
    """Adam on the adapters, one window per step (the file's input_ids are [1, S])."""
    optimizer = torch.optim.Adam([p for p in module.parameters() if p.requires_grad], lr=lr)
    losses = []
    for ids in windows(steps, seed=1):
        optimizer.zero_grad()
        loss = loss_of(module, ids, empty)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def greedy(step: Any, empty: list[Any], prompt: list[int], count: int) -> list[int]:
    """`count` tokens decoded greedily by `step(ids, caches) -> (logits, caches)`, from an empty cache."""
    ids, caches, tokens = np.array([prompt], dtype=np.int64), empty, []
    for _ in range(count):
        logits, caches = step(ids, caches)
        tokens.append(int(np.asarray(logits)[0, -1].argmax()))
        ids = np.array([[tokens[-1]]], dtype=np.int64)
    return tokens


def module_step(module: torch.nn.Module) -> Any:
    def step(ids: np.ndarray, caches: list[Any]) -> tuple[np.ndarray, list[Any]]:
        with torch.no_grad():
            out = module(torch.as_tensor(ids), *[torch.as_tensor(c) for c in caches])
        return out[0].numpy(), list(out[1:])
    return step


def tract_step(folder: Path) -> Any:
    import tract

    runnable = tract.nnef().with_tract_transformers().with_tract_extra().load(str(folder)).into_runnable()

    def step(ids: np.ndarray, caches: list[Any]) -> tuple[np.ndarray, list[Any]]:
        out = [o.to_numpy() for o in runnable.run([ids, *[np.asarray(c) for c in caches]])]
        return out[0], out[1:]
    return step


def decode_all(step: Any, empty: list[Any]) -> list[list[int]]:
    """Greedy continuations of a PROMPT-token prompt starting at each position of the cycle."""
    return [greedy(step, empty, [CYCLE[(start + i) % len(CYCLE)] for i in range(PROMPT)], NEW)
            for start in range(len(CYCLE))]


def followed(continuations: list[list[int]]) -> float:
    """The share of generated tokens equal to the cycle's continuation of their prompt."""
    hits = sum(token == CYCLE[(start + PROMPT + i) % len(CYCLE)]
               for start, tokens in enumerate(continuations) for i, token in enumerate(tokens))
    return hits / (len(CYCLE) * NEW)


def ship(module: nnef_torch.NNEFModule, source: Path, out: Path) -> list[str]:
    """`module.save(out, target="tract")`: tract's form keeps the read graph.nnef (with the symbols S and P) and
    writes each weight in Q4_0 again, quantized from its current value. Returns the .dat files that changed."""
    module.save(out, target="tract")
    return [name.replace(".", "/") + ".dat" for name, _ in module.named_parameters()
            if (out / (name.replace(".", "/") + ".dat")).read_bytes() !=
            (source / (name.replace(".", "/") + ".dat")).read_bytes()]


def run(out: Path, steps: int, rank: int) -> dict[str, Any]:
    source = out / "llama_q4_0"
    layout = make_model_file(source)
    print(f"exported a random-weight Llama for tract with Q4_0 weights: {source}")
    module = nnef_torch.load(source)
    empty = layout.empty_cache(0)  # P = 0: [1, KV, 0, D] zeros
    train_ids = windows(1, seed=0)[0]
    with torch.no_grad():  # the first call binds the symbols: S = WINDOW, P = 0, the training shapes
        initial = loss_of(module, train_ids, empty).item()
    before = decode_all(module_step(module), empty)
    print(f"before training: loss {initial:.3f}, cycle followed by {100 * followed(before):.0f}% of greedy tokens")

    # after the first call: while a weight is parametrized, only shapes already called run (see the docstring)
    adapted = add_adapters(module, rank, alpha=2.0 * rank)
    trained = sum(p.numel() for p in module.parameters() if p.requires_grad)
    print(f"LoRA rank {rank} on {len(adapted)} weights ({trained} trainable values); every Parameter read is frozen")
    losses = fine_tune(module, empty, steps)
    # the frozen head of a random model (weights ~ 0.02) keeps logits small: the loss cannot go far below 3
    print(f"fine-tuned {steps} steps: loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.3f} (mean of the last 10)")
    with torch.no_grad():
        adapted_logits = module(train_ids[None], *empty)[0]
        merge_adapters(module, adapted)
        merged_difference = (module(train_ids[None], *empty)[0] - adapted_logits).abs().max().item()
    merged = decode_all(module_step(module), empty)
    print(f"merged (float32): |logits - adapted logits| <= {merged_difference:.2g}; "
          f"cycle followed by {100 * followed(merged):.0f}%")

    shipped = out / "llama_q4_0_lora"
    changed = ship(module, source, shipped)
    print(f"shipped {shipped}: {len(changed)} .dat files changed (the adapted weights, Q4_0 again)")
    reread = decode_all(module_step(nnef_torch.load(shipped)), empty)
    result: dict[str, Any] = {
        "source": source, "folder": shipped, "adapted": adapted, "changed": changed, "losses": losses,
        "initial_loss": initial, "merged_difference": merged_difference, "before": before, "merged": merged,
        "reread": reread, "followed_before": followed(before), "followed_merged": followed(merged),
        "followed_reread": followed(reread), "tract": None, "tract_before": None, "followed_tract": None}
    try:
        import tract  # noqa: F401
    except ImportError:
        print("tract is not installed: skipped running the shipped file in tract")
        return result
    result["tract_before"] = decode_all(tract_step(source), empty)
    result["tract"] = decode_all(tract_step(shipped), empty)
    result["followed_tract_before"] = followed(result["tract_before"])
    result["followed_tract"] = followed(result["tract"])
    print(f"tract: cycle followed by {100 * result['followed_tract_before']:.0f}% with the file read, "
          f"{100 * result['followed_tract']:.0f}% with the shipped one; same tokens as nnef_torch.load(shipped): "
          f"{'yes' if result['tract'] == reread else 'no'}")
    print(f"  prompt {CYCLE[:PROMPT]} -> tract {result['tract'][0]}")
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns what it measured (its folders only outlive the call when `--out` is given)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the models (default: a temp dir)")
    parser.add_argument("--steps", type=int, default=120, help="fine-tuning steps (one window each)")
    parser.add_argument("--rank", type=int, default=4, help="LoRA rank")
    args = parser.parse_args(argv)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        return run(args.out, args.steps, args.rank)
    with tempfile.TemporaryDirectory(prefix="nnef_lora_") as folder:
        return run(Path(folder), args.steps, args.rank)


if __name__ == "__main__":
    torch.set_num_threads(1)  # tensors this small gain nothing from more threads
    main(sys.argv[1:])
