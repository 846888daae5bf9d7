"""`export`: a `package.module:factory` module traced with `nnef_torch.save`, then checked with our own reader."""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from typing import TYPE_CHECKING, Any

import nnef_torch
from nnef_torch import formats
from nnef_torch.cli.common import CLIError, add_verb, input_shape
from nnef_torch.cli.report import summary
from nnef_torch.errors import NNEFError
from nnef_torch.format import container
from nnef_torch.format.parser import parse_document
from nnef_torch.formats.json_file import read_json
from nnef_torch.reader import read_model

if TYPE_CHECKING:
    import torch

OPS_FILE_BYTES = 1 << 20  # an --ops file lists operation names: far less than this
INPUT_DTYPES = ("float32", "float16", "float64", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


def resolve(spec: str) -> Any:
    """The object named by 'package.module:attribute' (a dotted attribute path), imported as `python -m` would,
    with the current folder first on sys.path."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise CLIError(f"'{spec}' is not a factory spec: expected package.module:factory (e.g. mymodels:build_net)")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        target = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
            raise CLIError(f"cannot import '{module_name}': no module named '{error.name}' (looked in the current "
                           f"folder {cwd} and on sys.path)") from None
        raise CLIError(f"importing '{module_name}' failed: {type(error).__name__}: {error}") from None
    except Exception as error:  # the user's module raised while being imported
        raise CLIError(f"importing '{module_name}' failed: {type(error).__name__}: {error}") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise CLIError(f"'{module_name}' has no attribute '{attribute}'")
        target = getattr(target, part)
    return target


def build_module(spec: str) -> torch.nn.Module:
    """The nn.Module of a spec: the object itself, or what calling it with no arguments returns."""
    import torch

    target = resolve(spec)
    if isinstance(target, torch.nn.Module):
        return target
    if not callable(target):
        raise CLIError(f"'{spec}' is of type {type(target).__name__}: expected an nn.Module or a callable "
                       "returning one")
    try:
        module = target()
    except Exception as error:  # the user's factory raised
        raise CLIError(f"calling '{spec}()' failed: {type(error).__name__}: {error}") from None
    if not isinstance(module, torch.nn.Module):
        raise CLIError(f"'{spec}()' returned a {type(module).__name__}, not a torch.nn.Module")
    return module


def example_inputs(shapes: list[list[int]], dtypes: list[str], seed: int) -> tuple:
    """One seeded tensor per shape: floats standard normal, integers in 0..3, bools random."""
    import torch

    if len(dtypes) > 1 and len(dtypes) != len(shapes):
        raise CLIError(f"{len(dtypes)} --input-dtype values for {len(shapes)} --input-shape values: give one for "
                       "all inputs or one per input")
    names = dtypes * len(shapes) if len(dtypes) == 1 else dtypes or ["float32"] * len(shapes)
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for dims, name in zip(shapes, names):
        dtype = getattr(torch, name)
        if dtype.is_floating_point:
            tensors.append(torch.randn(dims, generator=generator).to(dtype))
        elif dtype == torch.bool:
            tensors.append(torch.rand(dims, generator=generator) < 0.5)
        else:
            tensors.append(torch.randint(0, 4, dims, generator=generator, dtype=dtype))
    return tuple(tensors)


def forward_shapes(values: list[tuple[str | None, list[int]]], input_names: list[str] | None,
                   module: torch.nn.Module) -> list[list[int]]:
    """--input-shape values in the order of forward's inputs: D0,D1,... each in order, or NAME=D0,D1,... each by
    the input's name (as --input-names names it, else forward's parameter name)."""
    if all(name is None for name, _ in values):
        return [dims for _, dims in values]
    if any(name is None for name, _ in values):
        raise CLIError("--input-shape: give every shape as D0,D1,... in the order of forward's inputs, or every "
                       "shape as NAME=D0,D1,..., not both")
    if input_names is None:
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        input_names = [name for name, parameter in inspect.signature(module.forward).parameters.items()
                       if parameter.kind in kinds]
    given = dict(values)
    unknown = [name for name in given if name not in input_names]
    if unknown:
        raise CLIError(f"--input-shape names {unknown}, which are not inputs of forward (its inputs: {input_names})")
    count = max(input_names.index(name) for name in given) + 1
    missing = [name for name in input_names[:count] if name not in given]
    if missing:
        raise CLIError(f"--input-shape gives no shape for input(s) {missing} of forward (its inputs, in order: "
                       f"{input_names})")
    return [given[name] for name in input_names[:count]]


def quantization_options(values: list[str]) -> dict[str, Any] | None:
    """KEY=VALUE pairs of `quantization=` (true/false become booleans)."""
    if not values:
        return None
    options: dict[str, Any] = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise CLIError(f"--quantization expects KEY=VALUE (e.g. weights=quantized), got '{value}'")
        options[key] = {"true": True, "false": False}.get(text.lower(), text)
    return options


def dynamic_shapes(values: list[str], count: int) -> tuple[dict[int, Any], ...] | None:
    """`--dynamic-dim INPUT:AXIS=NAME[:MIN:MAX]` values as torch.export's dynamic_shapes (one Dim per name,
    shared by every axis that names it)."""
    if not values:
        return None
    from torch.export import Dim  # lazy: torch loads only to trace

    dims: dict[str, Any] = {}
    spec: list[dict[int, Any]] = [{} for _ in range(count)]
    for value in values:
        where, sep, declared = value.partition("=")
        index, colon, axis = where.partition(":")
        parts = declared.split(":")
        try:
            index_, axis_ = int(index), int(axis)
            bounds = [int(part) for part in parts[1:]]
        except ValueError:
            index_ = -1
            bounds = []
        if not sep or not colon or index_ < 0 or not parts[0].isidentifier() or len(bounds) not in (0, 2):
            raise CLIError(f"--dynamic-dim expects INPUT:AXIS=NAME or INPUT:AXIS=NAME:MIN:MAX (e.g. 0:1=S:1:512), "
                           f"got '{value}'")
        if index_ >= count:
            raise CLIError(f"--dynamic-dim '{value}' names input {index_}, but there are {count} input(s)")
        name = parts[0]
        if name not in dims:
            dims[name] = Dim(name, min=bounds[0], max=bounds[1]) if bounds else Dim(name)
        spec[index_][axis_] = dims[name]
    return tuple(spec)


def _read_back_options(path: str, count: int) -> dict[str, Any]:
    """How to read the written model back: a LightNet file does not say which tensors are inputs; the writer
    creates them first, in the module's input order."""
    if formats.detect(path)[0] != "lightnet":
        return {}
    from nnef_torch.formats.lightnet.ir_json import parse_ir  # lazy: the LightNet front end is loaded only when used
    ir = parse_ir(read_json(path), path)
    creates = [op.tensors_out["dst"] for op in ir.ops if op.optype == "create"]
    return {"inputs": creates[:count]}


def _names(value: str | None) -> list[str] | None:
    """--input-names / --output-names: comma-separated names, in order (checked by nnef_torch.save)."""
    return None if value is None else [name.strip() for name in value.split(",")]


def ops_list(path: str | None) -> list[str] | None:
    """--ops FILE: the operation names of a text file, one a line (or separated by spaces or commas); `#` starts a
    comment. The names are checked by nnef_torch.save."""
    if path is None:
        return None
    try:
        text = str(container.read_file(path, max_bytes=OPS_FILE_BYTES), "utf-8")
    except NNEFError as error:
        raise CLIError(f"--ops {path}: {error.message}") from None
    except UnicodeDecodeError as error:
        raise CLIError(f"--ops {path}: not a UTF-8 text file ({error})") from None
    names = [name for line in text.splitlines() for name in line.split("#", 1)[0].replace(",", " ").split()]
    if not names:
        raise CLIError(f"--ops {path}: the file names no operation (one NNEF operation name a line)")
    return names


def execute(args: argparse.Namespace) -> int:
    import warnings

    module = build_module(args.spec)
    module.train(args.train)
    shapes = forward_shapes(args.input_shape, _names(args.input_names), module)
    inputs = example_inputs(shapes, args.input_dtype, args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.export's internal deprecation notices
        nnef_torch.save(module, args.output, inputs, quantization=quantization_options(args.quantization),
                        dynamic_batch=False if args.dynamic_batch is None else args.dynamic_batch,
                        dynamic_shapes=dynamic_shapes(args.dynamic_dim, len(inputs)),
                        target=None if args.target == "standard" else args.target,
                        fold_batch_norm=args.fold_batch_norm, input_names=_names(args.input_names),
                        output_names=_names(args.output_names), ops=ops_list(args.ops))
    options = _read_back_options(args.output, len(inputs))
    if args.target == "tract" and args.dynamic_dim:  # its symbols bound to the example extents
        with container.open_model(args.output) as files:
            names = parse_document(files.graph_text, args.output).graph.params
        options["input_shapes"] = {name: list(x.shape) for name, x in zip(names, inputs)}
    model = read_model(args.output, **options)
    graph = model.graph
    inputs_text = ", ".join(f"{ext.name}{list(ext.shape)}" for ext in graph.signature.externals)
    print(f"exported {args.spec} ({type(module).__name__}, {'train' if args.train else 'eval'} mode) to "
          f"{args.output}: {'valid NNEF' if model.format == 'nnef' else f'valid {model.format} model'}, "
          f"{summary(model)}; inputs {inputs_text} -> outputs {', '.join(graph.outputs)}"
          + ("" if args.dynamic_batch is None else f"; variable batch size (axis {args.dynamic_batch} of every input)"))
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:
    command = add_verb(
        commands, "export", "trace a PyTorch module and write it as NNEF (a folder or a .tgz/.tar.gz/.tar archive)",
        ["export mymodels:build_net -o net.tgz --input-shape 1,3,224,224",
         "export mypackage.vision:model -o model/ --input-shape 1,3,64,64 --input-shape 1,10 \\\n"
         "      --input-dtype float32 --input-dtype int64",
         "export qat_models:tuned -o qat.nnef --input-shape 1,1,28,28 --quantization weights=quantized",
         "export mymodels:build_net -o net.json --input-shape 1,3,224,224   # LightNet JSON IR + net.wts",
         "export mymodels:build_net -o net/ --input-shape 1,3,224,224 --dynamic-batch   # any batch size",
         "export mymodels:decoder -o dec/ --input-shape 1,16,64 --dynamic-dim 0:1=S:1:2048 --target tract",
         "export mymodels:build_net -o net/ --input-shape 1,3,224,224 --fold-batch-norm --ops accelerator_ops.txt"],
        "SPEC is package.module:factory, imported with the current folder on sys.path (as `python -m` does):\n"
        "a callable returning an nn.Module, or an nn.Module object. The module runs in eval mode unless --train.\n"
        "The written model is read back and checked with nnef_torch's own reader.")
    command.add_argument("spec", metavar="SPEC", help="package.module:factory")
    command.add_argument("-o", "--output", required=True, metavar="OUT",
                         help="a folder or a .tgz/.tar.gz/.tar archive (NNEF), or a .json file (LightNet JSON IR, "
                              "with its .wts beside it)")
    command.add_argument("--input-shape", action="append", type=input_shape, required=True,
                         metavar="[NAME=]D0,D1,...",
                         help="shape of one positional input of forward (repeat for each input, in order), or "
                              "NAME=D0,D1,... by the input's name (--input-names, else forward's parameter name)")
    command.add_argument("--input-dtype", action="append", default=[], choices=INPUT_DTYPES, metavar="DTYPE",
                         help=f"dtype of each input, or one for all (default float32; one of "
                              f"{', '.join(INPUT_DTYPES)})")
    command.add_argument("--seed", type=int, default=0, help="seed of the example inputs (default 0)")
    command.add_argument("--train", action="store_true", help="keep training mode (batch-norm statistics updated)")
    command.add_argument("--quantization", action="append", default=[], metavar="KEY=VALUE",
                         help="an option of nnef_torch.save's quantization= (op, inline, weights), may be repeated")
    command.add_argument("--dynamic-batch", nargs="?", type=int, const=0, metavar="AXIS",
                         help="write a variable batch size (NNEF): only the inputs' declarations hold the batch "
                              "extent, along axis AXIS of every input (default 0); run another batch size with "
                              "`run --batch-size N` or nnef_torch.load(..., batch_size=N)")
    command.add_argument("--dynamic-dim", action="append", default=[], metavar="INPUT:AXIS=NAME[:MIN:MAX]",
                         help="make an axis of an input symbolic (repeat for each; axes naming one symbol share it): "
                              "the graph reads at any extent there (nnef_torch.save's dynamic_shapes=)")
    command.add_argument("--target", choices=("standard", "tract"), default="standard",
                         help="standard NNEF (default), or the file tract reads, with the symbols declared")
    command.add_argument("--fold-batch-norm", action="store_true",
                         help="fold each inference batch norm into the convolution or linear layer before it "
                              "(nnef_torch.save's fold_batch_norm=)")
    command.add_argument("--input-names", metavar="A,B",
                         help="names of the graph's inputs, in order (nnef_torch.save's input_names=)")
    command.add_argument("--output-names", metavar="Y",
                         help="names of the graph's outputs, in order (nnef_torch.save's output_names=)")
    command.add_argument("--ops", metavar="FILE",
                         help="write only the NNEF operations listed in FILE (one name a line, # comments; "
                              "external and variable are always allowed), as an accelerator's importer needs: "
                              "fragments outside the list (linear, gelu_erf, ...) are expanded into their bodies, and "
                              "an operation still outside it stops the export, naming it (nnef_torch.save's ops=)")
    command.set_defaults(handler=execute)
