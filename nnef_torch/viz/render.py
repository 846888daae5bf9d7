"""DOT text -> SVG, PNG or PDF, by running Graphviz's `dot` with the text on its standard input."""
from __future__ import annotations

import os
import shutil
import subprocess

from nnef_torch.errors import NNEFError
from nnef_torch.format.container import write_file
from nnef_torch.phases import phase, reporting

FORMATS = ("svg", "png", "pdf")
TIMEOUT = 120.0  # seconds; a graph of tens of thousands of nodes can take minutes to lay out
GRAPHVIZ_HINT = ("Install Graphviz to render drawings: 'apt-get install graphviz' (Debian, Ubuntu), "
                 "'brew install graphviz' (macOS), 'conda install graphviz' (conda), or see "
                 "https://graphviz.org/download/. The .dot text can also be rendered elsewhere.")
STDERR_CHARS = 2000  # the most of dot's complaints an error repeats


class RenderError(NNEFError, RuntimeError):
    """Graphviz's dot is missing, failed, or ran out of time."""


def find_dot() -> str | None:
    """The path of Graphviz's `dot` program, or None where it is not on the PATH."""
    return shutil.which("dot")


def render(dot: str, path: str | os.PathLike | None, format: str, *, timeout: float = TIMEOUT,
           progress: bool | None = None) -> bytes:
    """Lay out `dot` and write it to `path` as `format` ('svg', 'png' or 'pdf'), atomically. Returns the bytes
    written (the SVG text, UTF-8); with path=None nothing is written and the bytes are only returned. progress: a
    line on stderr while dot runs (`nnef_torch.phases`): True always, False never, None on a terminal after a
    second."""
    if format not in FORMATS:
        raise RenderError(f"cannot render to '{format}': expected one of {', '.join(FORMATS)}")
    program = find_dot()
    if program is None:
        raise RenderError(f"Graphviz's dot is not on the PATH. {GRAPHVIZ_HINT}")
    try:
        with reporting(progress), phase(f"laying out the drawing with Graphviz's dot -T{format}"):
            done = subprocess.run([program, f"-T{format}"], input=dot.encode("utf-8"), capture_output=True,
                                  timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RenderError(f"dot did not finish within {timeout:g} s; draw less (collapse fragments, or draw a "
                          "neighbourhood of one node) or allow more time") from None
    except OSError as error:
        raise RenderError(f"cannot run {program}: {error}") from None
    if done.returncode != 0 or not done.stdout:
        complaint = done.stderr.decode("utf-8", "replace").strip()[:STDERR_CHARS] or "(nothing on stderr)"
        raise RenderError(f"dot -T{format} failed with exit status {done.returncode}: {complaint}")
    if path is not None:
        write_file(path, done.stdout)
    return done.stdout
