"""What every verb of the command line shares: its error type, argument types, array files, help layout."""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import warnings
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from nnef_torch import formats
from nnef_torch.errors import NNEFDeviationWarning, NNEFShapeWarning
from nnef_torch.format import container

PROG = "nnef-torch"
MODEL_HELP = ("a model: an NNEF folder, graph.nnef file or .tar/.tgz/.tar.gz archive, or a file of another format "
              "(NNVM graph JSON, MXNet -symbol.json, LightNet JSON IR)")
FORMATS = ("nnef", *formats.FORMATS)


class CLIError(Exception):
    """A problem with the user's input found by the command line itself; printed as `nnef-torch: error: ...`."""


def add_verb(commands: argparse._SubParsersAction, name: str, summary: str, examples: list[str],
             details: str = "") -> argparse.ArgumentParser:
    """A subcommand whose --help ends with `examples` (one command line each)."""
    epilog = "examples:\n" + "\n".join(f"  {PROG} {line}" for line in examples)
    return commands.add_parser(name, help=summary, description=summary + (f"\n\n{details}" if details else ""),
                               epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)


def shape(text: str) -> list[int]:
    """argparse type of 'D0,D1,...' (positive extents)."""
    try:
        dims = [int(dim) for dim in text.split(",")] if text.strip() else []
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected D0,D1,... (integers), got '{text}'") from None
    if any(dim <= 0 for dim in dims):
        raise argparse.ArgumentTypeError(f"extents must be positive, got '{text}'")
    return dims


def named_shape(text: str) -> tuple[str, list[int]]:
    """argparse type of 'NAME=D0,D1,...'."""
    name, sep, dims = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=D0,D1,..., got '{text}'")
    return name, shape(dims)


def input_shape(text: str) -> tuple[str | None, list[int]]:
    """argparse type of 'NAME=D0,D1,...' (an input by name) or 'D0,D1,...' (the inputs in order)."""
    if "=" in text:
        return named_shape(text)
    return None, shape(text)


def add_input_shape(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-shape", action="append", default=[], type=input_shape, metavar="[NAME=]D0,D1,...",
                        help="replace the shape of a graph input: NAME=D0,D1,..., or D0,D1,... once per input in "
                             "the graph's order (may be repeated)")


def add_strict(parser: argparse.ArgumentParser) -> None:
    """--strict (and its opposite, the default --lenient): how a verb reads a file that deviates from the spec."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--strict", action="store_true",
                       help="refuse the deviations from the spec that real producers write (docs/tract_core.md, "
                            "'Deviations read'): each is an error, exit status 1")
    group.add_argument("--lenient", action="store_false", dest="strict",
                       help="read them, one warning each on standard error (the default)")


@contextlib.contextmanager
def warnings_reported() -> Iterator[list[Warning]]:
    """Show each of nnef_torch's located warnings (a deviation from the spec read leniently, a shape read
    otherwise) once, as a compiler shows a warning: `file:line:column: warning: ... [rule]` on standard error.
    Yields the list of the warnings shown; other warnings are shown as Python shows them."""
    shown: list[Warning] = []
    with warnings.catch_warnings():
        original = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
            if not isinstance(message, (NNEFDeviationWarning, NNEFShapeWarning)):
                original(message, category, filename, lineno, file, line)
            elif all(str(message) != str(seen) for seen in shown):
                shown.append(message)
                print(message, file=sys.stderr)

        warnings.showwarning = show
        warnings.simplefilter("always", NNEFDeviationWarning)
        warnings.simplefilter("always", NNEFShapeWarning)
        yield shown


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """--params, --format, --inputs and --outputs, for models of other formats."""
    parser.add_argument("--params", metavar="FILE",
                        help="the parameters of a model of another format (MXNet .params, LightNet .wts, or .npz); "
                             "by default the prefix-NNNN.params beside prefix-symbol.json, the model.wts beside a "
                             "LightNet model.json")
    parser.add_argument("--format", choices=FORMATS, help="the model's format (detected from its content by default)")
    parser.add_argument("--inputs", type=names, metavar="NAME,...",
                        help="LightNet: the created tensors the caller fills, in the order of the inputs")
    parser.add_argument("--outputs", type=names, metavar="NAME,...",
                        help="LightNet: the tensors to give (by default those no op reads)")


def names(text: str) -> list[str]:
    """argparse type of 'NAME,NAME,...' (tensor names)."""
    found = [name.strip() for name in text.split(",")]
    if not all(found):
        raise argparse.ArgumentTypeError(f"expected NAME,NAME,... (tensor names), got '{text}'")
    return found


def source_options(args: argparse.Namespace) -> dict[str, object]:
    """The options of `open_source` / `load` / `read_model` that --params, --format, --inputs, --outputs give."""
    return {"format": args.format, "params": args.params, "inputs": args.inputs, "outputs": args.outputs}


def input_shapes(values: Sequence[tuple[str | None, list[int]]], model: str | None = None,
                 options: Mapping[str, Any] | None = None) -> dict[str, list[int]]:
    """--input-shape values by input name: NAME=D0,... as named, D0,D1,... given in the order of the graph's inputs
    (read from `model`, opened with `options`: one shape per input, not mixed with named ones)."""
    named = {name: dims for name, dims in values if name is not None}
    ordered = [dims for name, dims in values if name is None]
    if not ordered:
        return named
    if named:
        raise CLIError("--input-shape: give every shape as NAME=D0,D1,... or every shape as D0,D1,... in the order "
                       "of the graph's inputs, not both")
    if model is None:
        raise CLIError("--input-shape D0,D1,... needs a model to take the order of its inputs from: write "
                       "NAME=D0,D1,...")
    names = model_inputs(model, options or {})
    if len(ordered) != len(names):
        raise CLIError(f"{len(ordered)} --input-shape value(s) D0,D1,... for a graph of {len(names)} input(s) "
                       f"{names}: give one per input, in that order, or name each (NAME=D0,D1,...)")
    return dict(zip(names, ordered))


def model_inputs(model: str, options: Mapping[str, Any]) -> list[str]:
    """The names of a model's inputs, in the graph's order (its document's graph declaration)."""
    from nnef_torch.reader import open_source  # lazy: the reader is loaded only when a verb reads a model

    given = {key: value for key, value in options.items() if value is not None}
    with open_source(model, shapes_at_call=True, **given) as source:
        if source.graph is not None:  # a foreign model opened without its input shapes
            return [external.name for external in source.graph.signature.externals]
        return list(source.document.document.graph.params)


def load_array(path: str) -> np.ndarray:
    """One array from a .npy file (no pickles)."""
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, EOFError) as error:
        raise CLIError(f"{path}: not a readable .npy file ({error})") from None
    if isinstance(array, np.lib.npyio.NpzFile):
        array.close()
        raise CLIError(f"{path}: expected one array (.npy), found an .npz archive")
    return array


def load_arrays(path: str) -> dict[str, np.ndarray]:
    """Every array of an .npz file by name (no pickles)."""
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise CLIError(f"{path}: expected an .npz archive of named arrays, found a single array")
        with archive:
            return {name: archive[name] for name in archive.files}
    except (ValueError, EOFError, zipfile.BadZipFile) as error:
        raise CLIError(f"{path}: not a readable .npz file ({error})") from None


def save_arrays(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Write named arrays as an .npz file, atomically (the name is kept as given)."""
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise CLIError(f"{path}: the folder to write it in does not exist")
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub reads the names as allow_pickle
    container.write_file(path, buffer.getvalue())


def volume(dims: tuple[int, ...] | list[int]) -> int:
    count = 1
    for extent in dims:
        count *= extent
    return count
