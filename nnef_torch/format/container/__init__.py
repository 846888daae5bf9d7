"""NNEF containers (spec 5.1): a model folder, a graph.nnef file, or a .tar/.tgz archive.

This is the one package of the project that touches the filesystem (`reading`, `archive`, `writing`). A folder's
tensor files are read when asked for; an archive is read in one forward pass when it is opened (`archive`: a gzip
stream is never rewound), its tensor files and documents kept in memory until it is closed. Archives are untrusted:
they are never extracted to disk, unsafe members are refused and sizes are bounded before anything is read. Writing
is atomic (a temporary sibling is renamed over the target) and an archive is written in one forward pass.
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
from nnef_torch.format.container.writing import ARCHIVE_SUFFIXES, check_target, write_file, write_files, write_model

__all__ = ["ARCHIVE_SUFFIXES", "DEFAULT_MAX_BYTES", "DEFAULT_MAX_DOCUMENT_BYTES", "DEFAULT_MAX_MEMBERS", "GRAPH_FILE",
           "HEAD_SIZE", "QUANT_FILE", "Check", "ModelFiles", "check_target", "label_to_relpath", "open_model",
           "open_regular", "read_file", "write_file", "write_files", "write_model"]
