"""What every verb of the command line shares: its error type, argument types, array files, help layout."""
from __future__ import annotations

import argparse
import io
import os
import zipfile
from collections.abc import Mapping

import numpy as np

from nnef_torch import formats
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


def add_input_shape(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-shape", action="append", default=[], type=named_shape, metavar="NAME=D0,D1,...",
                        help="replace the shape of a graph input (may be repeated)")


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


def input_shapes(values: list[tuple[str, list[int]]]) -> dict[str, list[int]]:
    return dict(values)


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
