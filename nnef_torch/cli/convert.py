"""`convert`: a model folder <-> a .tgz/.tar.gz/.tar archive at the format level (no torch), re-encoding the .dat
files in a chosen layout and stripping, keeping or replacing graph.quant. graph.nnef is copied verbatim. A .json
target is written as LightNet's JSON IR and .wts through the LightNet back end (which folds values with torch)."""
from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

import numpy as np

from nnef_torch.cli.common import (
    MODEL_HELP,
    CLIError,
    add_input_shape,
    add_source_options,
    add_verb,
    input_shapes,
    source_options,
)
from nnef_torch.cli.report import summary
from nnef_torch.format import container, tensor_file
from nnef_torch.format.quant_file import QuantSpec
from nnef_torch.format.tensor_file import TensorData
from nnef_torch.ir.graph import Variable
from nnef_torch.reader import open_source, read_graph, read_model, read_variable

LAYOUTS = ("keep", "current", "seed")
CODE_READERS = ("zero_point_linear_quantize", "linear_quantize", "min_max_linear_quantize")  # read current codes
_SEED_LINEAR = ("linear_quantize", "min_max_linear_quantize")


def _fail(variable: Variable, message: str) -> CLIError:
    return CLIError(f"tensor '{variable.label}' (variable '{variable.name}'): {message}")


def _seed_range(variable: Variable, spec: QuantSpec | None) -> dict | None:
    """The seed header quantization equal to a graph.quant entry, or None where the seed layout cannot hold it
    (one unsigned min/max range over the whole tensor)."""
    if spec is None or spec.op not in _SEED_LINEAR:
        return None
    args = spec.args
    if args.get("signed", False) or args.get("symmetric", False):
        return None
    if isinstance(args["min"], list) or isinstance(args["max"], list):
        return None
    return {"op": "linear_quantize", "min": float(args["min"]), "max": float(args["max"]), "bits": int(args["bits"])}


def grid_values(codes: np.ndarray, quantization: dict) -> np.ndarray:
    """Seed-layout codes as float64 values exactly on their grid, so that encoding them gives the same codes."""
    bits = int(quantization["bits"])
    if quantization["op"] == "linear_quantize":
        low, high = float(np.float32(quantization["min"])), float(np.float32(quantization["max"]))
        return codes.astype(np.float64) / float((1 << bits) - 1) * (high - low) + low
    signed = bool(quantization["signed"])
    magnitude_bits = bits - 1 if signed else bits
    r, m = (1 << magnitude_bits) - 1, math.ceil(math.log2(float(np.float32(quantization["max"]))))
    unsigned = codes.astype(np.uint64)
    exponent = m - (r - (unsigned & np.uint64(r)).astype(np.int64))
    sign = np.where(unsigned >> np.uint64(magnitude_bits), -1.0, 1.0) if signed else 1.0
    return sign * np.ldexp(1.0, exponent)


def recode(data: TensorData, raw: bytes | bytearray, variable: Variable, spec: QuantSpec | None,
           layout: str) -> bytes:
    """The bytes of a variable's tensor file in `layout` ('keep' copies them); quantized data stays codes."""
    header = data.header
    codes_kept = header.kind == "quantized" and header.layout == "current" and layout != "seed"
    if codes_kept and (spec is None or spec.op not in CODE_READERS):
        have = f"its graph.quant entry is {spec.op}" if spec is not None else "graph.quant has no entry for it"
        raise _fail(variable, f"the current layout stores quantized codes whose meaning comes from graph.quant, but "
                              f"{have} (expected one of {', '.join(CODE_READERS)})")
    if layout == "keep":
        return bytes(raw)
    if header.kind == "logical" and layout == "seed":
        raise _fail(variable, "the seed layout has no logical item type; use --tensor-layout current or keep")
    if header.kind == "quantized":
        encoded = _recode_codes(data, variable, spec, layout)
    else:
        encoded = tensor_file.encode(data.array, layout=layout)
    _check_same(data, tensor_file.decode(encoded), variable)
    return encoded


def _recode_codes(data: TensorData, variable: Variable, spec: QuantSpec | None, layout: str) -> bytes:
    """Quantized codes in `layout`: the same codes, with their meaning in the header (seed) or graph.quant (current)."""
    header, codes = data.header, data.codes
    assert codes is not None and header.quantization is not None  # decode gives both for quantized files
    if header.layout == "current" and layout == "current":
        return tensor_file.encode(codes, quantization={"signed": header.signed})
    if header.layout == "current":  # codes -> the seed header's range
        quantization = _seed_range(variable, spec)
        if quantization is None:
            entry = f"follow {spec.op}{_args(spec)}" if spec is not None else "have no graph.quant entry"
            raise _fail(variable, f"its codes {entry}, which the seed layout cannot express (it holds one unsigned "
                                  "min/max range per tensor); keep the current layout")
        return tensor_file.encode(grid_values(codes, quantization), quantization=quantization, layout="seed")
    wanted = header.quantization
    if layout == "seed":
        return tensor_file.encode(grid_values(codes, wanted), quantization=wanted, layout="seed")
    # seed codes -> current codes, read back through a graph.quant entry that must say the same
    if wanted["op"] != "linear_quantize":
        raise _fail(variable, "logarithmic codes have no current-layout form; keep the seed layout")
    found = _seed_range(variable, spec)
    if found is None or any(np.float32(found[key]) != np.float32(wanted[key]) for key in ("min", "max", "bits")):
        entry = f'"{variable.name}": linear_quantize(min = {wanted["min"]}, max = {wanted["max"]}, ' \
                f'bits = {wanted["bits"]});'
        raise _fail(variable, "the current layout stores codes whose range comes from graph.quant; it needs the "
                              f"entry {entry} (add it with --quant) or keep the seed layout")
    return tensor_file.encode(codes, quantization={"signed": False})


def _args(spec: QuantSpec) -> str:
    return "(" + ", ".join(f"{key} = {value}" for key, value in spec.args.items()) + ")"


def _check_same(before: TensorData, after: TensorData, variable: Variable) -> None:
    """The re-encoded file holds the same codes (quantized) or the same values and dtype."""
    if before.codes is not None:
        old, new = before.codes, after.codes
    else:
        old, new = before.array, after.array
        if old.dtype != new.dtype:
            new = None
    same = new is not None and old.shape == new.shape and np.array_equal(old, new, equal_nan=old.dtype.kind == "f")
    if not same:
        raise _fail(variable, "re-encoding changed the stored values (a bug in nnef_torch)")


def _read_quant(path: str) -> str:
    try:
        return str(container.read_file(path), "utf-8")
    except UnicodeDecodeError as error:
        raise CLIError(f"{path}: graph.quant is not valid UTF-8 text ({error.reason} at byte {error.start})") from None


def execute(args: argparse.Namespace) -> int:
    target = args.to or ("lightnet" if args.dst.lower().endswith(".json") else "nnef")
    if target == "lightnet":
        return _to_lightnet(args)
    if args.weights is not None:
        raise CLIError("--weights applies to LightNet targets (a .json DST or --to lightnet)")
    quant_text = _read_quant(args.quant) if args.quant else None
    with open_source(args.src, input_shapes=input_shapes(args.input_shape), **source_options(args)) as source:
        if not args.quant and not args.strip_quant:
            quant_text = source.quant_text
        quant_file = args.quant or source.quant_file
        graph = read_graph(source.graph_text, file=source.graph_file, quant_text=quant_text, quant_file=quant_file)
        files = source.files

        def encoder(variables: list[Variable]) -> Callable[[], bytes]:
            variable = variables[0]
            if files is None:  # a converted model: its values, in the current layout unless another is asked for
                layout = "current" if args.tensor_layout == "keep" else args.tensor_layout
                return lambda: tensor_file.encode(source.arrays[variable.label], layout=layout)
            spec = next((graph.quantization[v.name] for v in variables if v.name in graph.quantization), None)
            return lambda: recode(read_variable(files, variable), files.tensor_bytes(variable.label), variable, spec,
                                  args.tensor_layout)

        tensors = [(variables[0].label, encoder(variables)) for variables in graph.shared_variables().values()]
        container.write_model(args.dst, source.graph_text, tensors, quant_text)
        origin = "" if source.format == "nnef" else f" (from {source.format})"
    model = read_model(args.dst)
    kind = "folder" if os.path.isdir(args.dst) else "archive"
    quant = "stripped" if args.strip_quant else f"from {args.quant}" if args.quant else \
        "kept" if quant_text is not None else "none"
    layout = "bytes kept" if args.tensor_layout == "keep" and not origin else \
        f"{'current' if args.tensor_layout == 'keep' else args.tensor_layout} layout"
    print(f"converted {args.src}{origin} -> {args.dst} ({kind}): {len(tensors)} tensor files ({layout}), graph.quant "
          f"{quant}; valid NNEF ({summary(model)})")
    return 0


def _to_lightnet(args: argparse.Namespace) -> int:
    """Write the source as LightNet's JSON IR (and .wts): its graph through the LightNet back end, with the values
    of its variables (quantized codes read through their graph.quant entries)."""
    from nnef_torch.frontends.lightnet.write import lightnet_graph, save_lightnet, wts_path
    from nnef_torch.importer.weights import to_tensor

    nnef_only = [option for option, given in (("--tensor-layout", args.tensor_layout != "keep"),
                                              ("--strip-quant", args.strip_quant), ("--quant", args.quant)) if given]
    if nnef_only:
        raise CLIError(f"{', '.join(nnef_only)} applies to NNEF targets; LightNet has no quantization and no .dat "
                       "layouts")
    shapes = input_shapes(args.input_shape)
    with open_source(args.src, input_shapes=shapes, **source_options(args)) as source:
        graph = lightnet_graph(source.graph_text, file=source.graph_file,
                               input_shapes=(shapes or None) if source.format == "nnef" else None)
        specs = {}
        if source.quant_text is not None and source.files is not None:
            specs = read_graph(source.graph_text, file=source.graph_file, quant_text=source.quant_text,
                               quant_file=source.quant_file, input_shapes=shapes or None).quantization

        def values(variable: Variable) -> object:
            data = source.read_variable(variable)
            return to_tensor(data, specs.get(variable.name), name=variable.name,
                             file=source.tensor_path(variable.label))[0]
        weights = args.weights or "file"
        model = save_lightnet(args.dst, graph, values, weights=weights)
        origin = "" if source.format == "nnef" else f" (from {source.format})"
    stored = f"{len(model.weights)} weights in {wts_path(args.dst)}" if weights == "file" else "weights inline"
    print(f"converted {args.src}{origin} -> {args.dst} (LightNet JSON IR): {len(model.ops)} ops, {stored}; inputs "
          f"{', '.join(model.inputs) or 'none'}, outputs {', '.join(model.outputs)}")
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:
    command = add_verb(
        commands, "convert", "copy a model between a folder and a .tgz/.tar.gz/.tar archive, re-encoding .dat files, "
        "or write a model of another format as NNEF, or any model as LightNet's JSON IR",
        ["convert model/ model.tgz",
         "convert resnet-symbol.json resnet.tgz --params resnet-0000.params --input-shape data=1,3,224,224",
         "convert model.tgz model/ --tensor-layout current",
         "convert model/ seed_model/ --tensor-layout seed",
         "convert model/ float_model.tgz --strip-quant",
         "convert model/ qat_model/ --quant calibrated.quant",
         "convert model.tgz model.json",
         "convert model.json model.tgz --inputs data",
         "convert model/ model.json --weights inline"],
        "The target is an archive when DST ends in .tgz, .tar.gz or .tar, else a folder. graph.nnef is copied\n"
        "verbatim, with one .dat file per variable (other files of the source are not copied). Quantized codes\n"
        "stay codes: where the target layout cannot hold them (logarithmic codes in the current layout, zero-point\n"
        "or per-channel codes in the seed layout) the command stops with an error. The result is checked with\n"
        "nnef_torch's own reader. A model of another format (NNVM or MXNet JSON, LightNet JSON) is converted to\n"
        "NNEF text and .dat files (current layout unless --tensor-layout seed).\n\n"
        "A DST ending in .json (or --to lightnet) is written as LightNet's JSON IR, with the weights in the .wts\n"
        "file of the same stem beside it (or inline with --weights inline); operations LightNet cannot express\n"
        "are listed in one error and nothing is written.")
    command.add_argument("src", help=MODEL_HELP)
    command.add_argument("dst", help="the folder or .tgz/.tar.gz/.tar archive to write, or a LightNet .json file "
                                     "(replaced atomically)")
    command.add_argument("--tensor-layout", choices=LAYOUTS, default="keep",
                         help="keep: copy the .dat bytes (default); current: the item types the Khronos tools write; "
                              "seed: the NNEF 1.0.0 codes (quantized data with its range in the header)")
    quant = command.add_mutually_exclusive_group()
    quant.add_argument("--strip-quant", action="store_true", help="leave graph.quant out")
    quant.add_argument("--quant", metavar="FILE", help="add or replace graph.quant (checked against the graph)")
    command.add_argument("--to", choices=("nnef", "lightnet"),
                         help="the target format (default: lightnet for a DST ending in .json, else nnef)")
    command.add_argument("--weights", choices=("file", "inline"),
                         help="LightNet targets: the weights in a .wts file beside the JSON (file, the default) or "
                              "in its create ops (inline)")
    add_input_shape(command)
    add_source_options(command)
    command.set_defaults(handler=execute)
