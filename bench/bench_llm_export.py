"""nnef_torch.llm.export against torch_to_nnef_llm's exporter on a Llama decoder with a KV cache, for tract.

    python bench/bench_llm_export.py --out bench/results/llm_export.txt   # ~100M parameters (hidden 768, 12 layers)
    python bench/bench_llm_export.py --quick    # a tiny config (2 layers, hidden 64), ~2 minutes

One Hugging Face `LlamaForCausalLM` with seeded random weights is saved as safetensors with a character tokenizer
built offline. Each exporter writes it with f32 and q4_0 weights, each export in a fresh subprocess (its first
run) after loading the model untimed: ours by `nnef_torch.llm.export`; torch_to_nnef's as its CLI
`t2n_export_llm_to_tract -d MODEL -e OUT -nv [-c min_max_q4_0]` does (`LLMExporter.load` then `dump`, its
defaults, a stub tract binary). Measured: export time, the child's peak RSS (ru_maxrss) and its peak during the
export call alone (VmHWM after a reset), the size of the model file. Then each file runs greedy generation in
tract (prefill of --prompt tokens with an empty cache, then --decode steps feeding back the caches, matched by
name): prefill ms, median and min ms per decoded token, timed on a second generation after a warm-up one. The
tokens are compared with `generate(do_sample=False)` of the model (f32) or of its q4_0 twin (q4_0).
Ratio = ours / torch_to_nnef: below 1, ours is smaller or faster. Nothing here asserts a timing.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FULL = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "num_key_value_heads": 4,
        "intermediate_size": 2048, "vocab_size": 32000, "max_position_embeddings": 1024}
QUICK = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 128}
EXPORTERS = {"ours": "nnef_torch.llm.export", "t2n": "torch_to_nnef_llm LLMExporter.load + dump"}
WEIGHTS = ("f32", "q4_0")
T2N_COMPRESSION = {"f32": None, "q4_0": "min_max_q4_0"}  # its registry's Linear-only Q4_0 (embedding kept f32)
TRACT_VERSION = "0.23.8"
RESULT = "RESULT "


def stub_tract(folder: Path) -> Path:
    """A script that prints a tract version: torch_to_nnef wants a binary, and would download one (no IO check)."""
    path = folder / "tract"
    path.write_text(f"#!/bin/sh\necho tract {TRACT_VERSION}\n")
    path.chmod(0o755)
    return path


def save_char_tokenizer(folder: Path) -> None:
    """A character-level tokenizer (ids 32..126, 0 unknown) built offline: torch_to_nnef_llm loads one from the
    model folder and encodes a sample text for its example inputs."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, **{chr(i): i for i in range(32, 127)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>").save_pretrained(folder)


# ---------------------------------------------------------------- the child: one export, first run


def export_once(exporter: str, model_dir: str, out: str, weights: str) -> dict:
    import torch
    from transformers import LlamaForCausalLM

    if exporter == "ours":
        import nnef_torch.llm

        model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        reset_peak_rss()
        start = time.perf_counter()
        nnef_torch.llm.export(model, out, target="tract", weights=weights)
    else:
        from torch_to_nnef_llm.exporter import LLMExporter

        # what `t2n_export_llm_to_tract -d MODEL_DIR -e OUT -nv --tract-specific-path STUB [-c min_max_q4_0]`
        # runs (dump_llm): load the folder (model and tokenizer), then prepare and export with the CLI's defaults
        exporter_ = LLMExporter.load(local_dir=Path(model_dir))
        reset_peak_rss()
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            exporter_.dump(export_dirpath=Path(out), tract_specific_path=stub_tract(Path(tmp)), no_verify=True,
                           compression_method=T2N_COMPRESSION[weights], log_level=logging.WARNING)
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {"export_s": seconds, "peak_mb": peak_kb / 1024}
    during = peak_rss_kb()
    if during is not None:
        result["export_peak_mb"] = during / 1024
    return result


def reset_peak_rss() -> None:
    """Reset the kernel's peak RSS of this process (Linux: 5 into /proc/self/clear_refs), so that VmHWM then
    counts the export alone, not the model load whose peak is the same for both exporters."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_rss_kb() -> int | None:
    """VmHWM in kB, or None where /proc is missing."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def child_main(args: argparse.Namespace) -> int:
    try:
        result = export_once(args.child, args.model_dir, args.export_to, args.weights)
    except Exception as error:  # noqa: BLE001 - reported to the parent, which shows it in the table
        result = {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:200]}
    print(RESULT + json.dumps(result), flush=True)
    return 0


def run_child(exporter: str, model_dir: Path, out: Path, weights: str, timeout: float) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", exporter, "--model-dir", str(model_dir),
               "--export-to", str(out), "--weights", weights]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"export took more than {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:200]}"}
    return json.loads(lines[-1][len(RESULT):])


# ---------------------------------------------------------------- availability, sizes, tract generation


def unavailable(exporter: str) -> str | None:
    """Why `exporter` cannot run here, or None."""
    try:
        if exporter == "ours":
            import nnef_torch.llm

            if not hasattr(nnef_torch.llm, "export"):
                return "nnef_torch.llm.export does not exist yet"
        else:
            import tokenizers  # noqa: F401
            import torch_to_nnef_llm.exporter  # noqa: F401
    except ImportError as error:
        return f"not importable: {error}"
    return None


def size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in files) / 2**20


def model_file(path: Path) -> Path:
    """What tract loads: our folder, or torch_to_nnef_llm's model/model.nnef.tgz (beside its tokenizer/ and tests/)."""
    inner = path / "model" / "model.nnef.tgz"
    return inner if inner.exists() else path


def canonical(name: str) -> str:
    """One name for both conventions: ours input_ids, cache_key_0 -> logits, new_cache_key_0; torch_to_nnef_llm's
    input_ids, in_cache_key_0 -> outputs, out_cache_key_0."""
    for prefix in ("in_", "out_", "new_"):
        name = name.removeprefix(prefix)
    return "logits" if name == "outputs" else name


def tract_generate(path: Path, prompt: np.ndarray, decode: int, cache_shape: tuple[int, int, int],
                   layers: int) -> tuple[list[int], float, list[float]]:
    """Greedy tokens, prefill ms and per-step decode ms of the file at `path` run in tract."""
    import tract

    model = tract.nnef().with_tract_transformers().with_tract_extra().load(str(model_file(path)))
    inputs = [canonical(model.input_name(i)) for i in range(model.input_count())]
    outputs = [canonical(model.output_name(i)) for i in range(model.output_count())]
    outputs[0] = "logits"  # tract names an output after the node computing it (ours: linear_N_...), first in both
    runnable = model.into_runnable()
    io = (runnable, inputs, outputs)
    greedy(io, prompt, decode, cache_shape, layers)  # warm-up: the first call at a new shape costs more
    return greedy(io, prompt, decode, cache_shape, layers)


def greedy(io, prompt: np.ndarray, decode: int, cache_shape: tuple[int, int, int],
           layers: int) -> tuple[list[int], float, list[float]]:
    runnable, inputs, outputs = io
    kv_heads, _, head_dim = cache_shape
    caches = {f"cache_{kind}_{i}": np.zeros((1, kv_heads, 0, head_dim), np.float32)
              for i in range(layers) for kind in ("key", "value")}
    ids, tokens, steps, prefill_ms = prompt, [], [], 0.0
    for step in range(decode + 1):
        start = time.perf_counter()
        values = runnable.run([ids if name == "input_ids" else caches[name] for name in inputs])
        named = dict(zip(outputs, (value.to_numpy() for value in values)))
        elapsed = (time.perf_counter() - start) * 1e3
        if step == 0:
            prefill_ms = elapsed
        else:
            steps.append(elapsed)
        caches = {name: named[name] for name in caches}
        tokens.append(int(named["logits"][0, -1].argmax()))  # torch_to_nnef_llm keeps the last position only
        ids = np.array([[tokens[-1]]], dtype=np.int64)
    return tokens, prefill_ms, steps


def stored_twin(model, folder: Path):
    """`model` with each weight that our folder stores as Q4_0 (`<name with />.dat` of 128 + numel / 32 * 18
    bytes) replaced by its decoded values: 32-value blocks of a float16 scale then 16 bytes, low nibbles holding
    values 0-15 and high nibbles 16-31, each (nibble - 8) * scale (GGML's Q4_0, which tract reads)."""
    import copy

    import torch

    twin = copy.deepcopy(model)
    with torch.no_grad():
        for name, parameter in twin.named_parameters():
            path = folder / (name.replace(".", "/") + ".dat")
            if not path.is_file() or path.stat().st_size != 128 + parameter.numel() // 32 * 18:
                continue
            blocks = np.frombuffer(path.read_bytes()[128:], np.uint8).reshape(-1, 18)
            scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
            codes = np.concatenate([blocks[:, 2:] & 0xF, blocks[:, 2:] >> 4], axis=1).astype(np.float32) - 8
            parameter.copy_(torch.from_numpy((codes * scale).reshape(parameter.shape)))
    return twin


def q4_0_twin(model):
    """`model` with each Linear weight (input width a multiple of 32) replaced by its Q4_0 min-max round trip,
    computed by torch_to_nnef's quantizer: the float model torch_to_nnef's q4_0 file stores."""
    import copy

    import torch
    from torch_to_nnef.tensor.quant import fp_to_tract_q4_0_with_min_max_calibration

    twin = copy.deepcopy(model)
    with torch.no_grad():
        for module in twin.modules():
            if isinstance(module, torch.nn.Linear) and module.in_features % 32 == 0:
                dense = module.weight.detach().clone()
                module.weight.copy_(fp_to_tract_q4_0_with_min_max_calibration(dense).dequantize())
    return twin


def reference_tokens(model, prompt: np.ndarray, count: int) -> list[int]:
    import torch

    with torch.no_grad():
        out = model.generate(torch.from_numpy(prompt), max_new_tokens=count, min_new_tokens=count,
                             do_sample=False, pad_token_id=0)
    return out[0, prompt.shape[1]:].tolist()


def leading_agreement(tokens: list[int], reference: list[int]) -> int:
    count = 0
    for ours, theirs in zip(tokens, reference):
        if ours != theirs:
            break
        count += 1
    return count


# ---------------------------------------------------------------- the parent: one run, one table


def measure(args: argparse.Namespace, tmp: Path) -> tuple[dict, dict, list[str]]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(args.seed)
    config = LlamaConfig(**(QUICK if args.quick else FULL), eos_token_id=None, bos_token_id=None)
    model = LlamaForCausalLM(config).eval()
    model_dir = tmp / "model"
    model.save_pretrained(model_dir)
    save_char_tokenizer(model_dir)
    params = sum(p.numel() for p in model.parameters())
    layers, kv_heads = config.num_hidden_layers, config.num_key_value_heads
    head_dim = config.hidden_size // config.num_attention_heads
    prompt = np.random.default_rng(args.seed).integers(0, config.vocab_size, (1, args.prompt), dtype=np.int64)
    references = {("ours", "f32"): reference_tokens(model, prompt, args.decode + 1),
                  ("t2n", "q4_0"): reference_tokens(q4_0_twin(model), prompt, args.decode + 1)}
    references["t2n", "f32"] = references["ours", "f32"]
    notes = [f"model: LlamaForCausalLM, {params / 1e6:.1f}M parameters, {json.dumps(QUICK if args.quick else FULL)}",
             f"generate(do_sample=False) tokens: {references['ours', 'f32']}",
             f"t2n q4_0 twin (Linear weights through torch_to_nnef's Q4_0 min-max round trip) generate() tokens: "
             f"{references['t2n', 'q4_0']}",
             "tokens agreeing: f32 rows against generate() of the model; q4_0 rows against generate() of a torch "
             "twin holding what that exporter stores (ours: its .dat files decoded with numpy; t2n: its quantizer's "
             "round trip). The weights are random, so agreement of a q4_0 file with the f32 model means nothing",
             "torch_to_nnef_llm at its CLI defaults: eager attention (no tract_transformers_sdpa: "
             "reify_sdpa_operator off), num_logits_to_keep=1 (logits [1, 1, V], the last position only: all greedy "
             "decoding needs; ours returns [1, S, V]), -c min_max_q4_0 for q4_0 (nn.Linear weights, the embedding "
             "stays f32), -nv (no tract IO check, stub tract binary); its export time includes the test npz files "
             "and modes.json it writes by default; file size counts model/model.nnef.tgz only"]
    results: dict = {}
    why_not = {name: unavailable(name) for name in EXPORTERS}
    for name, reason in why_not.items():
        if reason:
            notes.append(f"{name}: skipped, {reason}")
    for weights in WEIGHTS:
        for name in EXPORTERS:
            if why_not[name]:
                continue
            out = tmp / f"{name}_{weights}"
            result = run_child(name, model_dir, out, weights, args.timeout)
            results[name, weights] = result
            if "error" in result:
                notes.append(f"{name} {weights}: export fails: {result['error']}")
                continue
            result["size_mb"] = size_mb(model_file(out))
            if (name, weights) == ("ours", "q4_0"):
                references[name, weights] = reference_tokens(stored_twin(model, out), prompt, args.decode + 1)
                notes.append(f"ours q4_0 twin (its stored Q4_0 weights decoded) generate() tokens: "
                             f"{references[name, weights]}")
            try:
                tokens, prefill, steps = tract_generate(out, prompt, args.decode, (kv_heads, 0, head_dim), layers)
            except Exception as error:  # noqa: BLE001 - a file tract refuses is a result
                result["tract_error"] = str(error).splitlines()[0][:200]
                notes.append(f"{name} {weights}: tract fails: {result['tract_error']}")
                continue
            result.update(prefill_ms=prefill, decode_ms=statistics.median(steps), decode_min_ms=min(steps),
                          tokens=tokens, agree=leading_agreement(tokens, references[name, weights]))
            if tokens != references[name, weights]:
                notes.append(f"{name} {weights}: tract tokens {tokens}")
    return results, why_not, notes


ROWS = (("export time (s)", "export_s", "{:.2f}"), ("peak RSS of the export process (MB)", "peak_mb", "{:.0f}"),
        ("peak RSS during the export call (MB)", "export_peak_mb", "{:.0f}"), ("file size (MB)", "size_mb", "{:.2f}"),
        ("tract prefill (ms)", "prefill_ms", "{:.1f}"), ("tract decode, median ms/token", "decode_ms", "{:.2f}"),
        ("tract decode, min ms/token", "decode_min_ms", "{:.2f}"), ("tokens agreeing with generate()", "agree", "{}"))


def table(results: dict, total_tokens: int) -> str:
    lines = ["| metric | weights | ours | torch_to_nnef | ours / t2n |", "| --- | --- | --- | --- | --- |"]
    for weights in WEIGHTS:
        for label, key, form in ROWS:
            cells = []
            for name in EXPORTERS:
                result = results.get((name, weights))
                if result is None:
                    cells.append("skipped")
                elif key in result:
                    text = form.format(result[key])
                    cells.append(f"{text}/{total_tokens}" if key == "agree" else text)
                else:
                    cells.append("fails")
            values = [results.get((name, weights), {}).get(key) for name in EXPORTERS]
            ratio = (f"{values[0] / values[1]:.2f}" if key != "agree" and None not in values and values[1]
                     else "")
            lines.append(f"| {label} | {weights} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny Llama config instead of ~100M parameters")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens (the prefill)")
    parser.add_argument("--decode", type=int, default=32, help="decode steps after the prefill")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed for one export")
    parser.add_argument("--out", help="also write the table and notes to this markdown file")
    parser.add_argument("--child", choices=sorted(EXPORTERS), help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--export-to", help=argparse.SUPPRESS)
    parser.add_argument("--weights", choices=WEIGHTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    header = (f"$ python bench/bench_llm_export.py {' '.join(argv if argv is not None else sys.argv[1:])}\n"
              f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {os.cpu_count()} CPUs; uptime before: {load}\n"
              f"prompt {args.prompt} tokens, then {args.decode} decode steps\n")
    with tempfile.TemporaryDirectory() as tmp:
        results, _, notes = measure(args, Path(tmp))
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    text = (header + f"uptime after: {load}\n\n" + table(results, args.decode + 1) + "\n\n"
            + "\n".join(f"- {note}" for note in notes))
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
