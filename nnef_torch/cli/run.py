"""`run`: import a model with `nnef_torch.load`, feed it inputs (files or seeded random), write and check outputs."""
from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

import nnef_torch
from nnef_torch import formats
from nnef_torch.cli.common import (
    MODEL_HELP,
    CLIError,
    add_input_shape,
    add_source_options,
    add_strict,
    add_verb,
    input_shapes,
    load_array,
    load_arrays,
    save_arrays,
    source_options,
)
from nnef_torch.cli.report import add_batch_size

if TYPE_CHECKING:
    import torch

DTYPES = ("float32", "float16", "float64", "bfloat16")
_KINDS = {"scalar": ("f", "a float array"), "integer": ("iu", "an integer array"), "logical": ("b", "a bool array")}


def read_inputs(values: Sequence[str], externals: Sequence) -> dict[str, np.ndarray]:
    """Arrays given on the command line by input name: NAME=file.npy, or one .npz holding every input by name
    (a lone file.npy is accepted for a graph with one input)."""
    names = [ext.name for ext in externals]
    arrays: dict[str, np.ndarray] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            path = value
            if path.lower().endswith(".npz"):
                found = load_arrays(path)
                unknown = sorted(set(found) - set(names))
                if unknown:
                    raise CLIError(f"{path}: arrays {unknown} are not inputs of the graph (inputs: {names})")
                arrays.update(found)
                continue
            if len(names) != 1:
                raise CLIError(f"--input {value}: the graph has {len(names)} inputs {names}; write NAME=file.npy "
                               "or give one .npz holding every input by name")
            name = names[0]
        if name not in names:
            raise CLIError(f"--input {value}: the graph has no input '{name}' (inputs: {names})")
        arrays[name] = load_array(path)
    missing = [name for name in names if name not in arrays]
    if arrays and missing:
        raise CLIError(f"no value for input(s) {missing}: give every input, or none for random inputs")
    return arrays


def given_shapes(values: Sequence[str]) -> dict[str, list[int]]:
    """The shapes of the inputs given by name (NAME=file.npy, or a .npz): a model of another format often does not
    declare its input shapes, and the arrays say them."""
    shapes: dict[str, list[int]] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if sep:
            shapes[name] = list(load_array(path).shape)
        elif value.lower().endswith(".npz"):
            shapes.update({key: list(array.shape) for key, array in load_arrays(value).items()})
    return shapes


def random_inputs(externals: Sequence, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs of the graph's shapes: floats standard normal, integers in 0..3, logicals fair coins."""
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for ext in externals:
        shape = tuple(ext.shape)
        if ext.dtype == "integer":
            arrays[ext.name] = rng.integers(0, 4, size=shape, dtype=np.int64)
        elif ext.dtype == "logical":
            arrays[ext.name] = rng.random(shape) < 0.5
        else:
            arrays[ext.name] = rng.standard_normal(shape).astype(np.float32)
    return arrays


def check_inputs(arrays: Mapping[str, np.ndarray], externals: Sequence) -> None:
    """Every array has its input's exact shape and a matching kind of item."""
    for ext in externals:
        array = arrays[ext.name]
        kinds, what = _KINDS[ext.dtype]
        if array.dtype.kind not in kinds:
            raise CLIError(f"input '{ext.name}' is {ext.dtype}: expected {what}, found dtype {array.dtype}")
        if tuple(array.shape) != tuple(ext.shape):
            dims = ",".join(str(d) for d in array.shape) or "(rank 0)"
            raise CLIError(f"input '{ext.name}' has shape {list(array.shape)}, the graph declares {list(ext.shape)} "
                           f"(to run another shape, pass --input-shape {ext.name}={dims})")


def describe_array(array: np.ndarray) -> str:
    values = array.astype(np.float64)
    return (f"shape {list(array.shape)} {array.dtype}  min {values.min():.6g}  max {values.max():.6g}  "
            f"mean {values.mean():.6g}")


def compare(outputs: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray], path: str, atol: float,
            rtol: float) -> list[str]:
    """Print max abs/rel difference per output; return the names of outputs out of tolerance."""
    missing = [name for name in outputs if name not in reference]
    if missing:
        raise CLIError(f"reference {path} has no array for output(s) {missing} (it holds {sorted(reference)})")
    failed = []
    for name, found in outputs.items():
        expected = reference[name]
        if tuple(expected.shape) != tuple(found.shape):
            print(f"  {name}: shape {list(found.shape)} but the reference has {list(expected.shape)}  MISMATCH")
            failed.append(name)
            continue
        a, b = found.astype(np.float64), expected.astype(np.float64)
        diff = np.abs(a - b)
        both_nan = np.isnan(a) & np.isnan(b)
        diff[both_nan] = 0.0
        rel = diff / np.maximum(np.abs(b), np.finfo(np.float64).tiny)
        ok = bool(np.all((diff <= atol + rtol * np.abs(b)) | both_nan))
        max_abs = float(diff.max(initial=0.0))
        max_rel = float(np.where(diff == 0.0, 0.0, rel).max(initial=0.0))
        print(f"  {name}: max abs diff {max_abs:.3g}, max rel diff {max_rel:.3g}  {'ok' if ok else 'MISMATCH'}")
        if not ok:
            failed.append(name)
    return failed


def execute(args: argparse.Namespace) -> int:
    import torch

    dtype = getattr(torch, args.dtype) if args.dtype else None
    check_device(args.device)
    reference = load_arrays(args.reference) if args.reference else None  # a bad reference fails before any work
    shapes = input_shapes(args.input_shape, args.model, source_options(args))
    if args.input and (args.format or formats.detect(args.model)[0]) != "nnef":
        shapes = {**given_shapes(args.input), **shapes}
    module = nnef_torch.load(args.model, device=args.device, dtype=dtype, input_shapes=shapes,
                             batch_size=args.batch_size, lenient=not args.strict, **source_options(args))
    graph = module.nnef_graph
    externals = graph.signature.externals
    arrays = read_inputs(args.input, externals) or random_inputs(externals, args.seed)
    check_inputs(arrays, externals)
    float_dtype = dtype or torch.float32
    tensors = []
    for ext in externals:
        tensor = torch.from_numpy(np.ascontiguousarray(arrays[ext.name]))
        tensor = tensor.to(float_dtype) if ext.dtype == "scalar" else tensor.to(torch.int64) \
            if ext.dtype == "integer" else tensor
        tensors.append(tensor.to(args.device) if args.device else tensor)
    with torch.no_grad():
        result = module(*tensors)
    values = result if isinstance(result, (tuple, list)) else (result,)
    outputs = {name: _numpy(value) for name, value in zip(graph.outputs, values)}

    source = "from " + ", ".join(args.input) if args.input else f"random (seed {args.seed})"
    print(f"{args.model}: ran graph {graph.name} on inputs {source}")
    for name, array in outputs.items():
        print(f"  {name}: {describe_array(array)}")
    if args.output:
        save_arrays(args.output, outputs)
        print(f"outputs written to {args.output}")
    if reference is not None:
        print(f"compared with {args.reference} (atol {args.atol:g}, rtol {args.rtol:g}):")
        failed = compare(outputs, reference, args.reference, args.atol, args.rtol)
        if failed:
            raise CLIError(f"{len(failed)} of {len(outputs)} output(s) differ from the reference beyond atol "
                           f"{args.atol:g} + rtol {args.rtol:g} * |reference|: {', '.join(failed)}")
    return 0


def check_device(name: str | None) -> None:
    """A device torch knows and this machine has."""
    import torch

    if name is None:
        return
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise CLIError(f"--device {name}: {error}") from None
    if device.type == "meta":
        raise CLIError("--device meta holds no data: running needs a real device")
    backend = getattr(torch, device.type, None)
    available = getattr(backend, "is_available", None)
    if device.type != "cpu" and callable(available) and not available():
        raise CLIError(f"--device {name}: no {device.type} device is available on this machine")


def _numpy(value: torch.Tensor) -> np.ndarray:
    import torch
    value = value.detach().cpu()
    return (value.float() if value.dtype == torch.bfloat16 else value).numpy()


def add_parsers(commands: argparse._SubParsersAction) -> None:
    command = add_verb(
        commands, "run", "import a model with nnef_torch.load and run it once on given or random inputs",
        ["run model.tgz                                   # random inputs (seed 0), prints a summary",
         "run model/ --input input=image.npy -o outputs.npz",
         "run model/ --input inputs.npz --reference expected.npz --atol 1e-4",
         "run model/ --input-shape input=8,3,224,224 --seed 3 --dtype float64",
         "run model/ --input-shape 8,3,224,224            # the inputs' shapes in the graph's order",
         "run model/ --batch-size 7                       # a model exported with --dynamic-batch"],
        "Inputs are float standard normal, integer 0..3 and logical random by default, in the graph's shapes.\n"
        "Outputs go to an .npz by output name; --reference compares them and exits with 1 on a mismatch.")
    command.add_argument("model", help=MODEL_HELP)
    command.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy|FILE.npz",
                         help="an input's value from a .npy file, or one .npz holding every input by name "
                              "(may be repeated)")
    add_input_shape(command)
    add_batch_size(command)
    add_source_options(command)
    add_strict(command)
    command.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    command.add_argument("-o", "--output", metavar="OUT.npz", help="write the outputs, by output name")
    command.add_argument("--reference", metavar="REF.npz", help="compare every output with this .npz (by name)")
    command.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (default 1e-5)")
    command.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance (default 1e-4)")
    command.add_argument("--dtype", choices=DTYPES, help="floating dtype of variables and inputs (default: as stored)")
    command.add_argument("--device", help="torch device to run on, e.g. cpu or cuda (default cpu)")
    command.set_defaults(handler=execute)
