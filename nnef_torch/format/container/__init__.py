"""NNEF containers (spec 5.1): a model folder, a graph.nnef file, or a .tar/.tgz archive.

This is the one package of the project that touches the filesystem (`reading`, `writing`). Reading is lazy:
tensor files are read when asked for. Archives are untrusted: they are never extracted to disk, unsafe members are
refused and sizes are bounded before anything is read. Writing is atomic: a temporary sibling is renamed over the
target.
"""
from nnef_torch.format.container.reading import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DOCUMENT_BYTES,
    DEFAULT_MAX_MEMBERS,
    GRAPH_FILE,
    HEAD_SIZE,
    QUANT_FILE,
    Check,
    ModelFiles,
    label_to_relpath,
    open_model,
    open_regular,
    read_file,
)
from nnef_torch.format.container.writing import write_file, write_files, write_model

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_DOCUMENT_BYTES", "DEFAULT_MAX_MEMBERS", "GRAPH_FILE", "HEAD_SIZE",
           "QUANT_FILE", "Check", "ModelFiles", "label_to_relpath", "open_model", "open_regular", "read_file",
           "write_file", "write_files", "write_model"]
