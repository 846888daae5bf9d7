"""4-bit quantization-aware training against min-max Q4_0 on a small Llama, next-token accuracy run by tract.

    python bench/bench_q4_0_qat.py                 # hidden 128, 4 layers, 600 float steps: about 6 CPU minutes
    python bench/bench_q4_0_qat.py --quick         # hidden 64, 2 layers, 150 float steps: about a minute
    python bench/bench_q4_0_qat.py --regime trained  # hidden 96, 3 layers, 2000 steps: about 10 CPU minutes

A `LlamaForCausalLM` is trained from a fixed seed on a synthetic corpus with learnable structure (each sequence is
one of: a sparse first-order Markov chain, an arithmetic progression modulo the vocabulary, a repeated random
span). --regime undertrained (the default): 4 successors per token, 5% of tokens then replaced by random ones, a
model far from the corpus's ceiling. --regime trained: 3 peaked successors, no noise, so the Bayes-optimal
accuracy is computed exactly from the generator and printed, and a smaller model is trained close to it: the
regime where 4-bit rounding error can show. Then, from that float model:

- min-max Q4_0, torch_to_nnef's rule: each linear weight quantized by torch_to_nnef's
  `fp_to_tract_q4_0_with_min_max_calibration` (its codes are written as they are, and checked in the .dat);
- min-max Q4_0, ggml's rule: the float model exported with weights="q4_0" (nnef_torch's own min-max);
- QAT Q4_0: `nnef_torch.quant.prepare_q4_0` (LSQ scales), fine-tuned for --extra steps, written with its codes;
- the fair baseline: the float model fine-tuned for the same --extra steps on the same batches without fake
  quantization, then min-max quantized by torch_to_nnef's rule (so a gain is not just more training).

Each model is written by `nnef_torch.llm.export` and run by tract on held-out sequences (one prefill of the whole
sequence, empty cache): accuracy = how often argmax logits[t] is token t + 1, NLL its mean cross-entropy (nats).
The same models run in torch as a cross-check. Nothing here asserts a figure.
"""
from __future__ import annotations

import argparse
import copy
import math
import os
import time
from pathlib import Path

import numpy as np

STEPS = (1, 2, 3, 5, 7)  # the progressions' strides
PERIODS = range(6, 17)  # the repeated spans' lengths
FULL = {"model": {"hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 384}, "steps": 600, "extra": 150, "batch": 32, "eval": 512}
QUICK = {"model": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "intermediate_size": 192}, "steps": 150, "extra": 40, "batch": 32, "eval": 128}
# successors: the Markov chain's successor probabilities; noise: the share of tokens then replaced at random
REGIMES = {
    "undertrained": {"successors": (0.55, 0.25, 0.12, 0.08), "noise": 0.05, "vocab": 96, "lr": 3e-3,
                     "full": FULL, "quick": QUICK},
    "trained": {"successors": (0.85, 0.1, 0.05), "noise": 0.0, "vocab": 64, "lr": 4e-3,
                "full": {"model": {"hidden_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
                                   "num_key_value_heads": 2, "intermediate_size": 256},
                         "steps": 2000, "extra": 400, "batch": 32, "eval": 512},
                "quick": {"model": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                                    "num_key_value_heads": 2, "intermediate_size": 192},
                          "steps": 300, "extra": 60, "batch": 32, "eval": 128}},
}


# ---------------------------------------------------------------- the corpus


def grammar(seed: int, vocab: int, probs: tuple[float, ...]) -> np.ndarray:
    """The Markov chain's successors [vocab, len(probs)]: distinct tokens, in decreasing probability."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.choice(vocab, len(probs), replace=False) for _ in range(vocab)])


def sequences(rng: np.random.Generator, successors: np.ndarray, count: int, length: int,
              probs: tuple[float, ...], noise_share: float) -> np.ndarray:
    """int64 [count, length] drawn from the corpus's three kinds of sequence, then noised."""
    vocab = successors.shape[0]
    out = np.empty((count, length), np.int64)
    kinds = rng.integers(0, 3, count)
    markov = np.flatnonzero(kinds == 0)
    out[markov, 0] = rng.integers(0, vocab, len(markov))
    for t in range(1, length):
        pick = rng.choice(len(probs), len(markov), p=probs)
        out[markov, t] = successors[out[markov, t - 1], pick]
    for i in np.flatnonzero(kinds == 1):
        out[i] = (rng.integers(vocab) + rng.choice(STEPS) * np.arange(length)) % vocab
    for i in np.flatnonzero(kinds == 2):
        out[i] = np.resize(rng.integers(0, vocab, rng.integers(PERIODS.start, PERIODS.stop)), length)
    noise = rng.random((count, length)) < noise_share
    out[noise] = rng.integers(0, vocab, int(noise.sum()))
    return out


def bayes_ceiling(held_out: np.ndarray, successors: np.ndarray, probs: tuple[float, ...]) -> tuple[float, float]:
    """The noise-free corpus's Bayes-optimal next-token accuracy on `held_out`: the posterior over the generator's
    hypotheses (Markov; each stride; each span length) given each prefix. Returns the expected accuracy (mean of
    the largest posterior predictive probability) and the accuracy of its argmax on these very tokens."""
    vocab, length = successors.shape[0], held_out.shape[1]
    table = np.zeros((vocab, vocab))
    np.put_along_axis(table, successors, np.asarray(probs)[None].repeat(vocab, 0), axis=1)
    expected, right = 0.0, 0
    t = np.arange(length - 1)
    for x in held_out:
        kinds, predictive = [], []  # per hypothesis: log weight [L-1] and predictive [L-1, vocab]
        with np.errstate(divide="ignore"):
            steps_log = np.concatenate([[0.0], np.cumsum(np.log(table[x[:-1], x[1:]]))])[:-1]
        kinds.append(math.log(1 / 3) - math.log(vocab) + steps_log)
        predictive.append(table[x[:-1]])
        diffs = (x[1:] - x[:-1]) % vocab
        for step in STEPS:
            consistent = np.concatenate([[True], np.cumprod(diffs == step).astype(bool)])[:-1]
            kinds.append(np.where(consistent, math.log(1 / 3 / len(STEPS)) - math.log(vocab), -np.inf))
            predictive.append(np.eye(vocab)[(x[:-1] + step) % vocab])
        for period in PERIODS:
            match = np.ones(length, bool)
            match[period:] = x[period:] == x[:-period]
            consistent = np.cumprod(match[:-1]).astype(bool)
            kinds.append(np.where(consistent, math.log(1 / 3 / len(PERIODS)) - np.minimum(t + 1, period)
                                  * math.log(vocab), -np.inf))
            known = np.eye(vocab)[x[np.maximum(t + 1 - period, 0)]]
            predictive.append(np.where((t + 1 >= period)[:, None], known, 1 / vocab))
        log_w = np.stack(kinds)
        weights = np.exp(log_w - log_w.max(0))
        mixture = np.einsum("hl,hlv->lv", weights, np.stack(predictive)) / weights.sum(0)[:, None]
        expected += mixture.max(-1).sum()
        right += int((mixture.argmax(-1) == x[1:]).sum())
    count = held_out.shape[0] * (length - 1)
    return expected / count, right / count


# ---------------------------------------------------------------- training


def train(model, steps: int, lr: float, data_seed: int, corpus, batch: int, length: int,
          warmup: int = 0) -> list[float]:
    """AdamW on next-token cross-entropy, linear warm-up then cosine decay to 0; LSQ scales (QAT) learn at a tenth
    of `lr`, without weight decay. Returns the loss every 10% of the steps."""
    import torch

    scales = [p for n, p in model.named_parameters() if n.endswith(".scale")]
    rest = [p for n, p in model.named_parameters() if not n.endswith(".scale")]
    groups = [{"params": rest, "lr": lr, "weight_decay": 0.01}]
    if scales:
        groups.append({"params": scales, "lr": lr / 10, "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups)
    base = [group["lr"] for group in optimizer.param_groups]
    rng = np.random.default_rng(data_seed)
    model.train()
    losses = []
    for step in range(steps):
        factor = (step + 1) / warmup if step < warmup else 0.5 * (1 + math.cos(math.pi * (step - warmup) /
                                                                             max(1, steps - warmup)))
        for group, start in zip(optimizer.param_groups, base):
            group["lr"] = start * factor
        ids = torch.from_numpy(corpus(rng, batch, length))
        loss = model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if (step + 1) % max(1, steps // 10) == 0:
            losses.append(float(loss.detach()))
    model.eval()
    return losses


# ---------------------------------------------------------------- torch_to_nnef's min-max Q4_0


def torch_to_nnef_q4_0(model) -> tuple[object, list[str]]:
    """A copy of `model` whose Q4_0-able linear weights hold torch_to_nnef's min-max Q4_0, prepared with
    `prepare_q4_0` so that export writes exactly those codes and scales; and notes on the check."""
    import torch
    from torch_to_nnef.tensor.quant import fp_to_tract_q4_0_with_min_max_calibration

    from nnef_torch.format.block_quant import dequantize_q4_0, min_max_q4_0
    from nnef_torch.quant import prepare_q4_0
    from nnef_torch.quant.groupwise_prepare import q4_0_layers

    quantized = prepare_q4_0(model, learn_scale=False)
    same, requantized, blocks = 0, 0, 0
    with torch.no_grad():
        for name, (layer, quantizer) in q4_0_layers(quantized).items():
            weight = model.get_parameter(name).detach()
            theirs = fp_to_tract_q4_0_with_min_max_calibration(weight.clone()).decompress().numpy()
            codes, scales = min_max_q4_0(weight.numpy(), rule="torch_to_nnef")
            ours = dequantize_q4_0(codes, scales)
            same += np.array_equal(ours, theirs)
            ggml = dequantize_q4_0(*min_max_q4_0(theirs, rule="ggml"))
            per_block = (ggml != theirs).reshape(-1, 32).any(axis=1)
            requantized, blocks = requantized + int(per_block.sum()), blocks + per_block.size
            layer.parametrizations.weight.original.copy_(torch.from_numpy(theirs))
            quantizer.scale.copy_(torch.from_numpy(scales.astype(np.float32)))
            if not torch.equal(layer.weight, torch.from_numpy(theirs)):
                raise AssertionError(f"{name}: the prepared weight is not torch_to_nnef's dequantized weight")
    layers = len(q4_0_layers(quantized))
    return quantized, [f"torch_to_nnef's min-max Q4_0: block_quant.min_max_q4_0(rule='torch_to_nnef') decodes to "
                       f"torch_to_nnef's own dequantized weight in {same}/{layers} weights; re-quantizing those "
                       f"values by ggml's rule would change {requantized}/{blocks} blocks, so the baseline is "
                       f"written through prepare_q4_0 with torch_to_nnef's scales"]


def ggml_twin(model):
    """A copy of `model` whose linear weights hold their min-max Q4_0 by ggml's rule, dequantized: the torch twin
    of what export(weights="q4_0") writes for a float model."""
    import torch

    from nnef_torch.format.block_quant import dequantize_q4_0, min_max_q4_0

    twin = copy.deepcopy(model)  # every linear input width is a multiple of 32 and the head is not tied
    with torch.no_grad():
        for layer in twin.modules():
            if not isinstance(layer, torch.nn.Linear):
                continue
            weight = layer.weight
            weight.copy_(torch.from_numpy(dequantize_q4_0(*min_max_q4_0(weight.numpy(), rule="ggml"))))
    return twin


# ---------------------------------------------------------------- export and evaluation


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def dat_mismatches(path: Path, model) -> list[str]:
    """Linear weights whose .dat, decoded, differs from the weight `model` computes with."""
    import torch

    from nnef_torch import read_tensor

    wrong = []
    for name, layer in model.named_modules():
        if isinstance(layer, torch.nn.Linear):
            stored = read_tensor(path / (name.replace(".", "/") + "/weight.dat"))
            if not np.array_equal(stored, layer.weight.detach().numpy()):
                wrong.append(name)
    return wrong


def tract_predictions(path: Path, layout, held_out: np.ndarray) -> tuple[np.ndarray, float]:
    """argmax of tract's logits [N, L] and the mean cross-entropy of the next tokens."""
    import tract

    runnable = tract.nnef().with_tract_transformers().with_tract_extra().load(str(path)).into_runnable()
    caches = [np.zeros((1, layout.kv_heads, 0, layout.head_dim), np.float32) for _ in range(2 * layout.layers)]
    predictions, nll = [], 0.0
    for seq in held_out:
        logits = runnable.run([seq[None], *caches])[0].to_numpy()[0].astype(np.float64)
        predictions.append(logits.argmax(-1))
        logits -= logits.max(-1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        nll -= log_p[np.arange(len(seq) - 1), seq[1:]].sum()
    return np.stack(predictions), nll / (held_out.shape[0] * (held_out.shape[1] - 1))


def torch_predictions(model, held_out: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return np.concatenate([model(input_ids=torch.from_numpy(chunk)).logits.argmax(-1).numpy()
                               for chunk in np.array_split(held_out, max(1, len(held_out) // 64))])


def paired(first: np.ndarray, second: np.ndarray, a: str, b: str) -> str:
    """McNemar's statistic of two models' right/wrong on the same predictions."""
    only_a, only_b = int((first & ~second).sum()), int((~first & second).sum())
    z = (only_a - only_b) / math.sqrt(only_a + only_b) if only_a + only_b else 0.0
    return f"{a} alone right {only_a}, {b} alone right {only_b}, McNemar z = {z:+.2f} (|z| > 1.96: 5% level)"


def accuracy(predictions: np.ndarray, held_out: np.ndarray) -> float:
    return float((predictions[:, :-1] == held_out[:, 1:]).mean())


# ---------------------------------------------------------------- the run


ROWS = (("float", "f32", "float"), ("minmax_t2n", "q4_0", "min-max Q4_0, torch_to_nnef's rule"),
        ("minmax_ggml", "q4_0", "min-max Q4_0, ggml's rule (nnef_torch default)"),
        ("qat", "q4_0", "QAT Q4_0 (prepare_q4_0, LSQ)"), ("extra", "f32", "float + extra steps"),
        ("extra_minmax_t2n", "q4_0", "float + extra steps, then min-max Q4_0 (t2n rule)"))


def run(args: argparse.Namespace, tmp: Path) -> tuple[str, list[str]]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    import nnef_torch.llm
    from nnef_torch.quant import prepare_q4_0

    torch.set_num_threads(args.threads)
    regime = REGIMES[args.regime]
    setting = regime["quick" if args.quick else "full"]
    steps, extra = args.steps or setting["steps"], args.extra if args.extra is not None else setting["extra"]
    vocab, lr, probs = args.vocab or regime["vocab"], args.lr or regime["lr"], regime["successors"]
    successors = grammar(args.seed, vocab, probs)

    def corpus(rng: np.random.Generator, count: int, length: int) -> np.ndarray:
        return sequences(rng, successors, count, length, probs, regime["noise"])

    held_out = corpus(np.random.default_rng(args.seed + 1), args.eval or setting["eval"], args.length)
    ceiling = bayes_ceiling(held_out, successors, probs) if regime["noise"] == 0 else None
    torch.manual_seed(args.seed)
    config = LlamaConfig(vocab_size=vocab, max_position_embeddings=2 * args.length, eos_token_id=None,
                         bos_token_id=None, pad_token_id=None, attn_implementation="sdpa", **setting["model"])
    timings, models = {}, {}
    start = time.perf_counter()
    float_model = LlamaForCausalLM(config)
    float_losses = train(float_model, steps, lr, args.seed + 2, corpus, setting["batch"], args.length,
                         warmup=steps // 20)
    timings["float training"] = time.perf_counter() - start
    models["float"] = float_model
    models["minmax_t2n"], notes = torch_to_nnef_q4_0(float_model)
    models["minmax_ggml"] = ggml_twin(float_model)
    start = time.perf_counter()
    models["qat"] = prepare_q4_0(float_model)
    qat_losses = train(models["qat"], extra, lr / 5, args.seed + 3, corpus, setting["batch"], args.length)
    timings["QAT fine-tuning"] = time.perf_counter() - start
    start = time.perf_counter()
    models["extra"] = copy.deepcopy(float_model)
    extra_losses = train(models["extra"], extra, lr / 5, args.seed + 3, corpus, setting["batch"],
                         args.length)
    timings["float fine-tuning"] = time.perf_counter() - start
    models["extra_minmax_t2n"], _ = torch_to_nnef_q4_0(models["extra"])

    results = {}
    for key, weights, _ in ROWS:
        out = tmp / key
        start = time.perf_counter()
        written = float_model if key == "minmax_ggml" else models[key]  # nnef_torch quantizes it while writing
        layout = nnef_torch.llm.export(written, out, target="tract", weights=weights)
        timings[f"export {key}"] = time.perf_counter() - start
        predictions, nll = tract_predictions(out, layout, held_out)
        in_torch = torch_predictions(models[key], held_out)
        results[key] = {"acc": accuracy(predictions, held_out), "nll": nll, "torch": accuracy(in_torch, held_out),
                        "right": predictions[:, :-1] == held_out[:, 1:],
                        "agree": float((predictions == in_torch).mean()), "mb": size_mb(out)}
        if weights == "q4_0":
            wrong = dat_mismatches(out, models[key])
            notes.append(f"{key}: the written .dat weights decode to the weights torch ran with"
                         + (f" except {', '.join(wrong)}" if wrong else " (every linear weight, exactly)"))
    params = sum(p.numel() for p in float_model.parameters())
    lines = ["| model | tract next-token accuracy | tract NLL (nats) | torch accuracy | tract argmax = torch | "
             "size (MB) |", "| --- | --- | --- | --- | --- | --- |"]
    for key, weights, label in ROWS:
        r = results[key]
        lines.append(f"| {label} [{weights}] | {r['acc']:.4f} | {r['nll']:.4f} | {r['torch']:.4f} | "
                     f"{r['agree']:.4f} | {r['mb']:.3f} |")
    gain = results["qat"]["acc"] - results["extra_minmax_t2n"]["acc"]
    notes.append("corpus ceiling (Bayes-optimal, exact from the generator): " + (
        f"expected accuracy {ceiling[0]:.4f}, its argmax on the held-out tokens {ceiling[1]:.4f}; float model "
        f"{results['float']['acc'] / ceiling[0]:.1%} of it" if ceiling else "not computed (noisy corpus)"))
    notes += [f"QAT - (extra steps + min-max t2n) = {gain * 100:+.2f} accuracy points; QAT - min-max t2n = "
              f"{(results['qat']['acc'] - results['minmax_t2n']['acc']) * 100:+.2f}; float - min-max t2n = "
              f"{(results['float']['acc'] - results['minmax_t2n']['acc']) * 100:+.2f}",
              "paired on the same predictions: " + paired(results["qat"]["right"], results["extra_minmax_t2n"]["right"],
                                                          "QAT", "extra steps + min-max t2n"),
              f"model: LlamaForCausalLM {params / 1e6:.2f}M parameters, {setting['model']}, vocab {vocab}",
              f"corpus: regime {args.regime}, successor probabilities {probs}, noise {regime['noise']}, "
              f"seed {args.seed}, sequences of {args.length}, batch {setting['batch']}; held-out "
              f"{held_out.shape[0]} sequences ({held_out.shape[0] * (args.length - 1)} predictions)",
              f"training: {steps} float steps at lr {lr:g} (loss every 10%: "
              f"{', '.join(f'{x:.3f}' for x in float_losses)}); then {extra} steps at lr {lr / 5:g} on the "
              f"same batches: QAT loss {', '.join(f'{x:.3f}' for x in qat_losses)}; float loss "
              f"{', '.join(f'{x:.3f}' for x in extra_losses)}",
              "seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items())
              + f"; {args.threads} torch thread(s), load average {os.getloadavg()[0]:.2f}"]
    return "\n".join(lines), notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regime", choices=sorted(REGIMES), default="undertrained",
                        help="undertrained: noisy corpus, model far from its ceiling; trained: exact corpus, model "
                             "trained near its Bayes ceiling")
    parser.add_argument("--quick", action="store_true", help="a smaller model and fewer steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, help="float training steps (default: the regime's)")
    parser.add_argument("--extra", type=int, help="QAT / extra fine-tuning steps (default: the regime's)")
    parser.add_argument("--eval", type=int, help="held-out sequences (default: the regime's)")
    parser.add_argument("--vocab", type=int, help="default: the regime's (96 undertrained, 64 trained)")
    parser.add_argument("--length", type=int, default=64, help="tokens per sequence")
    parser.add_argument("--lr", type=float, help="float learning rate, default the regime's (fine-tuning: a fifth)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: the machine is shared)")
    parser.add_argument("--out", help="also write the table and notes to this file")
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        table, notes = run(args, Path(tmp))
    text = table + "\n\n" + "\n".join(f"- {note}" for note in notes)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
