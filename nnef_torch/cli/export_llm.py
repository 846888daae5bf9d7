"""`export-llm`: a Hugging Face decoder-only model folder (config.json and safetensors weights) written for tract
with a key-value cache (`nnef_torch.llm.export`)."""
from __future__ import annotations

import argparse
from pathlib import Path

from nnef_torch.cli.common import CLIError, add_verb


def execute(args: argparse.Namespace) -> int:
    folder = Path(args.model_dir)
    if not (folder / "config.json").is_file():
        raise CLIError(f"{folder} is not a Hugging Face model folder: it has no config.json (save one with "
                       "model.save_pretrained(folder))")
    if not any(folder.glob("*.safetensors")):
        raise CLIError(f"{folder} has no .safetensors weights; only safetensors are read (pickled .bin weights "
                       "can run code): convert them with model.save_pretrained(folder, safe_serialization=True)")
    try:
        import transformers
    except ImportError:
        raise CLIError("export-llm needs the `transformers` package: pip install transformers") from None
    import torch

    from nnef_torch import llm  # lazy: the command line imports torch only in the verbs that need it

    print(f"reading {folder}", flush=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, use_safetensors=True,
                                                              dtype=torch.float32)
    layout = llm.export(model, args.output, weights=args.weights, progress=True if args.progress else None)
    print(f"wrote {args.output}: {layout.layers} layers, caches [1, {layout.kv_heads}, P, {layout.head_dim}], "
          f"vocabulary {layout.vocab}, weights {args.weights}; inputs input_ids, cache_key_i, cache_value_i; "
          "outputs logits, new_cache_key_i, new_cache_value_i (S and P symbolic, P = 0 on the first call)")
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:
    command = add_verb(
        commands, "export-llm", "write a Hugging Face decoder-only language model for tract, with a key-value cache",
        ["export-llm ./SmolLM2-135M -o smollm.tgz",
         "export-llm ./my-llama -o llama_q4/ --weights q4_0"],
        "MODEL_DIR is a folder that transformers' from_pretrained reads offline (config.json and .safetensors\n"
        "weights): Llama, Qwen2, GPT-2, Mistral, Phi-3, SmolLM and the families that share their blocks.\n"
        "The file runs every step of generation: inputs input_ids [1, S], then cache_key_i and cache_value_i\n"
        "[1, KV_HEADS, P, HEAD_DIM] per layer; outputs logits [1, S, VOCAB], then new_cache_key_i and\n"
        "new_cache_value_i [1, KV_HEADS, P + S, HEAD_DIM]. Start with empty caches (P = 0).")
    command.add_argument("model_dir", metavar="MODEL_DIR", help="a Hugging Face model folder")
    command.add_argument("-o", "--output", required=True, metavar="OUT", help="a folder or a .tgz archive")
    command.add_argument("--weights", choices=("f32", "f16", "q4_0"), default="f32",
                         help="how weights are stored: f32 (default), f16, or q4_0 (tract's 4-bit blocks for the "
                              "linear layers, 4.5 bits per weight)")
    command.add_argument("--progress", action="store_true", help="a line per export phase, with its time")
    command.set_defaults(handler=execute)
