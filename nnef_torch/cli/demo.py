"""`demo`: both directions on the model shipped in the package: import, fine-tune with its quantizers on (straight-
through gradients), export with the exporter, check the files with our own reader, re-import, compare."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from importlib import resources
from typing import TYPE_CHECKING

import nnef_torch
from nnef_torch.cli.common import CLIError, add_verb
from nnef_torch.cli.report import quantization_line, summary, variables_line
from nnef_torch.reader import read_model

if TYPE_CHECKING:  # torch is imported inside the verb: `import nnef_torch.cli` stays cheap
    import torch

DEMO_MODEL = "tiny_cnn"
SIDE = 16  # the model's images are 1 x 16 x 16


def demo_model_path() -> str:
    """The small model shipped inside the package."""
    return str(resources.files("nnef_torch").joinpath("models", DEMO_MODEL))


def stroke_images(count: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Images in [0, 1] of one bright stroke on dim noise; the class (0..3) is the stroke's orientation: horizontal,
    vertical, diagonal, anti-diagonal. Position and length are random, so only orientation tells the classes apart."""
    import torch

    labels = torch.randint(0, 4, (count,), generator=generator)
    images = torch.rand(count, 1, SIDE, SIDE, generator=generator) * 0.3
    steps = {0: (0, 1), 1: (1, 0), 2: (1, 1), 3: (1, -1)}
    for index, label in enumerate(labels.tolist()):
        length = int(torch.randint(5, 11, (1,), generator=generator))
        dy, dx = steps[label]
        rows = torch.arange(length) * dy
        cols = torch.arange(length) * dx
        top = int(torch.randint(0, SIDE - int(rows.max()), (1,), generator=generator))
        left = int(torch.randint(-int(cols.min()), SIDE - int(cols.max()), (1,), generator=generator))
        images[index, 0, rows + top, cols + left] += 0.5 + 0.2 * torch.rand(1, generator=generator)
    return images.clamp(0.0, 1.0), labels


def evaluate(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """Mean negative log-likelihood of the model's probabilities, and accuracy."""
    import torch

    with torch.no_grad():
        probabilities = model(images)
    loss = torch.nn.functional.nll_loss(probabilities.clamp_min(1e-12).log(), labels)
    return float(loss), float((probabilities.argmax(1) == labels).float().mean())


def fine_tune(model: torch.nn.Module, generator: torch.Generator, steps: int, batch: int, lr: float,
              progress: bool | None) -> None:
    import torch
    from tqdm.auto import tqdm

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    disable = None if progress is None else not progress  # None: a bar on a terminal only
    with tqdm(range(steps), desc="fine-tuning", unit="step", file=sys.stderr, disable=disable, leave=True) as bar:
        for _ in bar:
            images, labels = stroke_images(batch, generator)
            probabilities = model(images)
            loss = torch.nn.functional.nll_loss(probabilities.clamp_min(1e-12).log(), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            bar.set_postfix(loss=f"{loss.detach().item():.3f}")


def run_demo(args: argparse.Namespace) -> int:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small runs fastest on one thread (no pool waking, no oversubscription)
    try:
        return _demo(args)
    finally:
        torch.set_num_threads(threads)


def _demo(args: argparse.Namespace) -> int:
    import warnings

    import torch

    start = time.perf_counter()
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    path = demo_model_path()
    original = read_model(path)
    print(f"model: {path}")
    print(f"  {summary(original)}; {variables_line(original)}; {quantization_line(original)}")

    model = nnef_torch.load(path)
    lines = [line for line in model.code.strip().splitlines() if line.strip()]
    print(f"imported with nnef_torch.load: generated forward ({len(lines)} lines), first lines:")
    print("\n".join("  | " + line for line in lines[:6]))
    print(f"  fake quantizers (on while training, straight-through gradients): {', '.join(model.quantizers())}")

    test_images, test_labels = stroke_images(256, generator)
    loss_before, accuracy_before = evaluate(model, test_images, test_labels)
    fine_tune(model, generator, args.steps, args.batch, args.lr, args.progress)
    loss_after, accuracy_after = evaluate(model, test_images, test_labels)
    print(f"fine-tuned {args.steps} Adam steps (lr {args.lr:g}, batch {args.batch}) on synthetic stroke images:")
    print(f"  loss     {loss_before:.4f} -> {loss_after:.4f}")
    print(f"  accuracy {accuracy_before:.1%} -> {accuracy_after:.1%}  (256 held-out images)")

    with tempfile.TemporaryDirectory(prefix="nnef_torch_demo_") as scratch:
        out = args.out or f"{scratch}/tiny_cnn_tuned"
        example = test_images[:1]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.export's internal deprecation notices
            exported = nnef_torch.export(model, (example,))  # the exporter (nnef_torch.save on a plain module)
        exported.save(out)
        written = read_model(out)
        print(f"exported with nnef_torch.export to {out}" + (" (a temporary folder)" if not args.out else ""))
        print(f"  read back with nnef_torch.reader.read_model: valid NNEF, {summary(written)}")
        reloaded = nnef_torch.load(out)
        with torch.no_grad():
            difference = float((reloaded(test_images) - model(test_images)).abs().max())
        print(f"  re-imported with nnef_torch.load: max abs difference from the fine-tuned model {difference:.3g} "
              "on 256 images")
        if not difference <= 1e-5:
            raise CLIError(f"the re-imported model differs from the fine-tuned one by {difference:.3g} (a bug)")
    print(f"done in {time.perf_counter() - start:.1f} s")
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:
    command = add_verb(
        commands, "demo", "import the model shipped in the package, fine-tune it, export it, check and re-import it",
        ["demo", "demo --steps 60 --seed 1 --out tuned_model/"],
        "tiny_cnn: a 16x16 one-channel CNN with 4 classes and graph.quant entries. It is fine-tuned on synthetic\n"
        "images (the class is the orientation of a bright stroke) with its fake quantizers on, then exported.")
    command.add_argument("--steps", type=int, default=40, help="Adam steps (default 40)")
    command.add_argument("--batch", type=int, default=64, help="images per step (default 64)")
    command.add_argument("--lr", type=float, default=0.02, help="learning rate (default 0.02)")
    command.add_argument("--seed", type=int, default=0, help="seed of the data and of torch (default 0)")
    command.add_argument("--out", metavar="DIR", help="keep the exported model here (default: a temporary folder)")
    command.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                         help="show the progress bar (default: on a terminal)")
    command.set_defaults(handler=run_demo)
