"""Export a PyTorch model for an accelerator runtime, and check the files with the tools such a toolchain uses.

A small MobileNet-like classifier (conv-BN-ReLU6 stem, depthwise separable blocks, average pool, linear; eval mode)
is exported with `nnef_torch.save(model, folder, (x,), fold_batch_norm=True, ops=ACCELERATOR_OPS)` for one fixed
input shape: each batch norm folded into the convolution before it, as accelerators run them, and only operations
of the list an accelerator's importer maps (AMD MIVisionX's NNEF importer: 28 names, no fragments; a fragment
outside the list would be expanded, and an operation the list cannot express would stop the export). The folder
is then read by the Khronos parser with shape inference, run by the Khronos reference executor (`nnef.Session`) and
by tract, and each output is compared with torch's. Then an 8-bit variant for integer hardware: batch norm folded
into the convolutions (by `fold_batch_norm` below, before quantizing: see why there), `nnef_torch.quant.prepare`
with per-tensor 8-bit weights and activations, `calibrate`, and an export with graph.quant and int8 weight codes in
the .dat files (the same operation list), which tract runs in integer arithmetic.
Each consumer is optional: a missing package is reported as skipped.

    python examples/export_for_accelerator.py [--out FOLDER] [--size PIXELS]

It runs on one CPU thread in about ten seconds (6 s of CPU time on a 2-core machine, imports included) and writes
to a temporary folder unless `--out` is given.
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

import nnef_torch
from nnef_torch.quant import FakeQuantize, QuantConfig, calibrate, prepare

CLASSES = 10
# the operations AMD MIVisionX's NNEF importer maps (model_compiler/python/nnef_to_nnir.py), besides external and
# variable; it has no fragments and raises on any other name
ACCELERATOR_OPS = ["conv", "deconv", "batch_normalization", "avg_pool", "max_pool", "mean_reduce", "relu", "add",
                   "mul", "sub", "div", "min", "max", "matmul", "linear", "softmax", "local_response_normalization",
                   "slice", "concat", "leaky_relu", "sigmoid", "reshape", "squeeze", "unsqueeze", "transpose", "copy",
                   "clamp", "nearest_upsample"]


def conv_bn_relu6(inputs: int, outputs: int, kernel: int = 3, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, kernel, stride, kernel // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(outputs), nn.ReLU6())


def separable(inputs: int, outputs: int, stride: int) -> nn.Sequential:
    """Depthwise 3x3 then pointwise 1x1, each with batch norm and ReLU6."""
    return nn.Sequential(conv_bn_relu6(inputs, inputs, 3, stride, groups=inputs), conv_bn_relu6(inputs, outputs, 1))


class TinyMobileNet(nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.stem = conv_bn_relu6(3, 16, stride=2)
        self.blocks = nn.Sequential(separable(16, 32, 1), separable(32, 64, 2), separable(64, 64, 1))
        # a fixed-size avg_pool rather than AdaptiveAvgPool2d (mean_reduce): tract 0.23 cannot mean_reduce a
        # quantized tensor, and the input shape is fixed anyway
        self.pool = nn.AvgPool2d(size // 4)
        self.classifier = nn.Linear(64, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.blocks(self.stem(x))).flatten(1))


def make_model(size: int) -> nn.Module:
    """Random weights (the point is the export path) with batch-norm statistics away from the identity, as a
    trained model has them, so that folding them is not a no-op."""
    model = TinyMobileNet(size)
    with torch.no_grad():
        for layer in model.modules():
            if isinstance(layer, nn.BatchNorm2d):
                layer.running_mean.uniform_(-0.2, 0.2)
                layer.running_var.uniform_(0.5, 2.0)
                layer.weight.uniform_(0.5, 1.5)
                layer.bias.uniform_(-0.1, 0.1)
    return model.eval()


def fold_batch_norm(model: nn.Module) -> nn.Module:
    """A copy with every conv-BN pair replaced by one convolution (what integer accelerators run). The 8-bit path
    folds the module itself, before `prepare`: its quantizers then observe the folded weights and the folded
    convolutions' outputs. An export's `fold_batch_norm=True` cannot do this fold: it folds a batch norm only where
    it is the convolution's only user, and `prepare` quantizes each convolution's output before its batch norm
    runs; it keeps the module's function, s * Q(weight), which needs per-channel weight quantizers, where tract's
    integer convolution takes per-tensor ones; and the model integer hardware runs is Q(s * weight), the folded
    weight quantized."""
    model = copy.deepcopy(model)
    for block in model.modules():
        if isinstance(block, nn.Sequential) and len(block) > 1:
            conv, norm = block[0], block[1]
            if isinstance(conv, nn.Conv2d) and isinstance(norm, nn.BatchNorm2d):
                block[0], block[1] = fuse_conv_bn_eval(conv, norm), nn.Identity()
    return model


# The consumers. Each returns None (with a line in `skipped`) when its package is not installed.

def installed(package: str, skipped: list[str]) -> bool:
    if importlib.util.find_spec(package) is None:
        skipped.append(f"skipped: {package} not installed")
        return False
    return True


def defined_fragments(folder: Path) -> list[str]:
    """Fragments the export defines in graph.nnef: Khronos tools expand them when told their names."""
    return re.findall(r"^fragment (\w+)", (folder / "graph.nnef").read_text(), flags=re.M)


def khronos_shapes(folder: Path, skipped: list[str]) -> dict[str, tuple[int, ...]] | None:
    """The Khronos parser with shape inference: the shape of every graph output."""
    if not installed("nnef", skipped):
        return None
    import nnef
    graph = nnef.load_graph(str(folder), lowered=defined_fragments(folder))
    nnef.infer_shapes(graph)
    return {name: tuple(graph.tensors[name].shape) for name in graph.outputs}


def khronos_run(folder: Path, images: torch.Tensor, skipped: list[str]) -> np.ndarray | None:
    """The Khronos reference executor, one image at a time (the graph's batch is 1)."""
    if not installed("nnef", skipped):
        return None
    import nnef

    from nnef_torch.stdlib import standard_fragments
    # the executor runs compound standard ops (clamp, batch_normalization, linear...) only when it expands them;
    # expanded, these ones hit executor bugs, and it has native kernels for them
    native = {"max_pool", "max_pool_with_index", "avg_pool", "rms_pool", "separable_conv", "separable_deconv",
              "nearest_upsample", "nearest_downsample", "area_downsample"}
    lowered = defined_fragments(folder) + [name for name, fragment in standard_fragments().items()
                                           if fragment.body is not None and name not in native]
    outputs = []
    with nnef.Session(str(folder), lowered=lowered) as session:
        for image in images:
            result = session(np.ascontiguousarray(image[None].numpy()))
            outputs.append(np.asarray(result[0] if isinstance(result, (list, tuple)) else result)[0])
    return np.stack(outputs)


def tract_run(folder: Path, images: torch.Tensor, skipped: list[str]) -> np.ndarray | None:
    """tract, one image at a time; quantized outputs are converted back to float."""
    if not installed("tract", skipped):
        return None
    import tract
    runnable = tract.nnef().without_tract_core().load(str(folder)).into_runnable()
    outputs = [runnable.run([np.ascontiguousarray(image[None].numpy())])[0] for image in images]
    return np.stack([o.convert_to(tract.tensor.DatumType.F32).to_numpy()[0] for o in outputs])


def max_difference(found: np.ndarray | None, expected: np.ndarray) -> float | None:
    return None if found is None else float(np.abs(found - expected).max())


def graph_summary(folder: Path) -> str:
    """The operation histogram of graph.nnef's body."""
    operations = Counter(re.findall(r"=\s*(\w+)\s*[<(]", (folder / "graph.nnef").read_text()))
    variables = operations.pop("variable", 0)
    operations.pop("external", None)
    return ", ".join(f"{name} x{count}" for name, count in operations.most_common()) + f"; {variables} variables"


def export_float(model: nn.Module, folder: Path, images: torch.Tensor, skipped: list[str]) -> dict[str, Any]:
    nnef_torch.save(model, folder, (images[:1],), fold_batch_norm=True, ops=ACCELERATOR_OPS)
    with torch.no_grad():
        expected = model(images).numpy()
    reimported = nnef_torch.load(folder)
    with torch.no_grad():
        ours = reimported(images).numpy()
    return {"folder": folder, "operations": graph_summary(folder), "shapes": khronos_shapes(folder, skipped),
            "scale": float(np.abs(expected).max()),
            "differences": {"khronos": max_difference(khronos_run(folder, images, skipped), expected),
                            "tract": max_difference(tract_run(folder, images, skipped), expected),
                            "nnef_torch": max_difference(ours, expected)}}


def export_8_bit(model: nn.Module, folder: Path, images: torch.Tensor, calibration: torch.Tensor,
                 skipped: list[str]) -> dict[str, Any]:
    folded = fold_batch_norm(model)
    # per-tensor 8-bit weights (signed, symmetric) and activations (unsigned): what tract computes with
    quantized = prepare(folded, QuantConfig(bits=8, weights={"per_channel": False}))
    calibrate(quantized, calibration.split(8))
    quantized.eval()
    nnef_torch.save(quantized, folder, (images[:1],), quantization={"weights": "quantized"}, ops=ACCELERATOR_OPS)
    with torch.no_grad():
        expected, float_output, original = quantized(images).numpy(), folded(images).numpy(), model(images).numpy()
    output_quantizer = cast(FakeQuantize, quantized.get_submodule("classifier.output_quantizer"))
    step = float(output_quantizer.scale)  # one step of the 8-bit output
    entries = (folder / "graph.quant").read_text().count(";")
    result = {"folder": folder, "model": quantized, "graph_quant_entries": entries,
              "shapes": khronos_shapes(folder, skipped),  # the Khronos parser reads graph.quant and the int8 codes
              "output_step": step, "fold_difference": float(np.abs(float_output - original).max()),
              "quantization_error": float(np.abs(expected - float_output).max() / np.abs(float_output).max()),
              "tract_error": None, "tract_steps_max": None, "tract_steps_mean": None, "tract_same_class": None}
    try:
        found = tract_run(folder, images, skipped)
    except Exception as error:  # noqa: BLE001  (reported: tract's support for quantized ops is partial)
        result["tract_error"] = str(error).splitlines()[0] if str(error) else type(error).__name__
        return result
    if found is not None:
        steps = np.abs(found - expected) / step
        result.update(tract_steps_max=float(steps.max()), tract_steps_mean=float(steps.mean()),
                      tract_same_class=float((found.argmax(1) == expected.argmax(1)).mean()))
    return result


def report(result: dict[str, Any]) -> None:
    def figure(value: float | None, unit: str = "") -> str:
        return "skipped" if value is None else f"{value:.3g}{unit}"

    exported = result["float"]
    print(f"float export: {exported['folder']}\n  operations: {exported['operations']}")
    print(f"  Khronos parser + shape inference: "
          f"{'skipped' if exported['shapes'] is None else 'ok, outputs ' + str(exported['shapes'])}")
    print(f"  max |output - torch| (outputs up to {exported['scale']:.3g}): "
          + ", ".join(f"{name} {figure(value)}" for name, value in exported["differences"].items()))
    quantized = result["quantized"]
    print(f"8-bit export (batch norm folded: max |diff| {quantized['fold_difference']:.2g}): {quantized['folder']}")
    print(f"  Khronos parser: {'skipped' if quantized['shapes'] is None else 'ok'}; "
          f"{quantized['graph_quant_entries']} graph.quant entries, int8 weight codes; 8-bit vs float model: max "
          f"|diff| {100 * quantized['quantization_error']:.2g}% of the output range, output step "
          f"{quantized['output_step']:.3g}")
    if quantized["tract_error"] is not None:
        print(f"  tract could not run it: {quantized['tract_error']}")
    else:
        print(f"  tract (integer arithmetic) vs torch fake quantization: max {figure(quantized['tract_steps_max'])} "
              f"steps, mean {figure(quantized['tract_steps_mean'])}, same class "
              f"{figure(None if quantized['tract_same_class'] is None else 100 * quantized['tract_same_class'], '%')}")
    for line in result["skipped"]:
        print(line)


def run(out: Path, size: int, count: int) -> dict[str, Any]:
    torch.manual_seed(0)
    model = make_model(size)
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(count, 3, size, size, generator=generator)
    calibration = torch.randn(32, 3, size, size, generator=generator)
    skipped: list[str] = []
    result = {"float": export_float(model, out / "mobilenet", images, skipped),
              "quantized": export_8_bit(model, out / "mobilenet_int8", images, calibration, skipped),
              "skipped": sorted(set(skipped))}
    report(result)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns what it measured (the folders only outlive the call when `--out` is given)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the exports (default: a temp dir)")
    parser.add_argument("--size", type=int, default=64, help="input height and width (a multiple of 4)")
    parser.add_argument("--images", type=int, default=8, help="how many test images each consumer runs")
    args = parser.parse_args(argv)
    if args.size % 4 or args.size < 4:
        parser.error(f"--size must be a positive multiple of 4, not {args.size}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        return run(args.out, args.size, args.images)
    with tempfile.TemporaryDirectory(prefix="nnef_accelerator_") as folder:
        return run(Path(folder), args.size, args.images)


if __name__ == "__main__":
    # tensors this small gain nothing from more threads, and on a busy machine OpenMP's idle threads spin
    torch.set_num_threads(1)
    main(sys.argv[1:])
