"""`convert`: a model folder <-> a .tgz/.tar.gz/.tar archive at the format level (no torch), re-encoding the .dat
files in a chosen layout and stripping, keeping or replacing graph.quant. graph.nnef is copied verbatim. A .json
target is written as LightNet's JSON IR and .wts through the LightNet back end (which folds values with torch)."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator

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
from nnef_torch.format.container.progress import on_terminal, progress_default
from nnef_torch.format.recode import LAYOUTS, recode
from nnef_torch.ir.graph import Variable
from nnef_torch.reader import open_source, read_document, read_model, read_variable
from nnef_torch.writers import FORMATS, WRITERS, check_options, writer_for


def _read_quant(path: str) -> str:
    try:
        return str(container.read_file(path), "utf-8")
    except UnicodeDecodeError as error:
        raise CLIError(f"{path}: graph.quant is not valid UTF-8 text ({error.reason} at byte {error.start})") from None


def execute(args: argparse.Namespace) -> int:
    if writer_for(args.dst, args.to).name == "lightnet":
        return _to_lightnet(args)
    if args.weights is not None:
        raise CLIError("--weights applies to LightNet targets (a .json DST or --to lightnet)")
    quant_text = _read_quant(args.quant) if args.quant else None
    with open_source(args.src, input_shapes=input_shapes(args.input_shape, args.src, source_options(args)),
                     progress=args.progress, **source_options(args)) as source:
        if not args.quant and not args.strip_quant:
            quant_text = source.quant_text
        quant_file = args.quant or source.quant_file
        graph = read_document(source.document, quant_text=quant_text, quant_file=quant_file)
        files = source.files

        def encoder(variables: list[Variable]) -> Callable[[], bytes]:
            variable = variables[0]
            if files is None:  # a converted model: its values, in the current layout unless another is asked for
                layout = "current" if args.tensor_layout == "keep" else args.tensor_layout
                return lambda: tensor_file.encode(source.arrays[variable.label], layout=layout)
            spec = next((graph.quantization[v.name] for v in variables if v.name in graph.quantization), None)
            return lambda: recode(read_variable(files, variable), files.tensor_bytes(variable.label), spec,
                                  args.tensor_layout, label=variable.label, name=variable.name)

        tensors = [(variables[0].label, encoder(variables)) for variables in graph.shared_variables().values()]
        container.write_model(args.dst, source.graph_text, _counted(tensors, args.progress, args.dst), quant_text)
        origin = "" if source.format == "nnef" else f" (from {source.format})"
    if args.progress or args.progress is None and on_terminal():
        print(f"checking {args.dst}", file=sys.stderr)
    with progress_default(args.progress):
        model = read_model(args.dst)
    kind = "folder" if os.path.isdir(args.dst) else "archive"
    quant = "stripped" if args.strip_quant else f"from {args.quant}" if args.quant else \
        "kept" if quant_text is not None else "none"
    layout = "bytes kept" if args.tensor_layout == "keep" and not origin else \
        f"{'current' if args.tensor_layout == 'keep' else args.tensor_layout} layout"
    print(f"converted {args.src}{origin} -> {args.dst} ({kind}): {len(tensors)} tensor files ({layout}), graph.quant "
          f"{quant}; valid NNEF ({summary(model)})")
    return 0


def _counted(tensors: list[tuple[str, Callable[[], bytes]]], progress: bool | None,
             dst: str) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """The tensors to write, each counted on a bar on stderr as it is encoded (progress None: on a terminal)."""
    from tqdm.auto import tqdm
    disable = not (progress or progress is None and on_terminal())
    with tqdm(total=len(tensors), unit="tensor", desc=f"writing {dst}", disable=disable, file=sys.stderr) as bar:
        for label, encode in tensors:
            def counted(encode: Callable[[], bytes] = encode) -> bytes:
                data = encode()
                bar.update(1)
                return data
            yield label, counted


def _to_lightnet(args: argparse.Namespace) -> int:
    """Write the source as LightNet's JSON IR (and .wts) through the LightNet writer, with the values of its
    variables (quantized codes read through their graph.quant entries)."""
    from nnef_torch.formats.lightnet.write import wts_path  # lazy: the LightNet back end is loaded only when used
    from nnef_torch.writers.source import opened_source  # lazy: keeps torch out of reading

    nnef_only = [option for option, given in (("--tensor-layout", args.tensor_layout != "keep"),
                                              ("--strip-quant", args.strip_quant), ("--quant", args.quant)) if given]
    if nnef_only:
        raise CLIError(f"{', '.join(nnef_only)} applies to NNEF targets; LightNet has no quantization and no .dat "
                       "layouts")
    writer = WRITERS["lightnet"]
    weights = args.weights or "file"
    with open_source(args.src, input_shapes=input_shapes(args.input_shape, args.src, source_options(args)),
                     **source_options(args)) as source:
        model = writer.load().write(opened_source(source), args.dst, **check_options(writer, {"weights": weights}))
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
    command.add_argument("--to", choices=FORMATS,
                         help="the target format (default: lightnet for a DST ending in .json, else nnef)")
    command.add_argument("--weights", choices=("file", "inline"),
                         help="LightNet targets: the weights in a .wts file beside the JSON (file, the default) or "
                              "in its create ops (inline)")
    command.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                         help="show progress on stderr: reading an archive, writing the tensors, checking the result "
                              "(default: on a terminal)")
    add_input_shape(command)
    add_source_options(command)
    command.set_defaults(handler=execute)
