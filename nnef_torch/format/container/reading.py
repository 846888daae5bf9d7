"""Reading NNEF containers: model folders, graph.nnef files and tar archives (read by `archive`), checked and
bounded before anything is read; a folder's tensor files are read on demand."""
from __future__ import annotations

import errno
import io
import os
import re
import stat
import tarfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from nnef_torch.errors import Location, NNEFContainerError

if TYPE_CHECKING:
    from nnef_torch.format.container.archive import TarStore
from nnef_torch.format.labels import label_to_relpath

DEFAULT_MAX_BYTES = 16 << 30  # total unpacked size of an archive
DEFAULT_MAX_MEMBERS = 100_000  # member count of an archive
# one graph.nnef, graph.quant or other NNEF document, read whole as text: refused by its size before it is read
DEFAULT_MAX_DOCUMENT_BYTES = 32 << 20
HEAD_SIZE = 4096  # the first bytes of a tensor file, handed to a check before the rest is read
# check(head, size): refuses a file from its first HEAD_SIZE bytes (fewer if it is shorter) and its size
Check = Callable[[bytes, int], None]
GRAPH_FILE = "graph.nnef"
QUANT_FILE = "graph.quant"
_ARCHIVE_SUFFIXES = (".tar", ".tgz", ".tar.gz")
_GZIP_MAGIC = b"\x1f\x8b"
_DRIVE = re.compile(r"^[A-Za-z]:")
_ARCHIVE_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError)


def _decode(data: bytes | bytearray | memoryview, where: str) -> str:
    """UTF-8 text of a graph or quant file; a bad byte is reported with line, column and offset."""
    data = bytes(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start = data.rfind(b"\n", 0, e.start) + 1
        if line_start == 0 and data.startswith(b"\xef\xbb\xbf"):
            line_start = 3  # a byte order mark is no column: the text drops it
        column = len(data[line_start:e.start].decode("utf-8")) + 1
        loc = Location(file=where, line=data.count(b"\n", 0, e.start) + 1, column=column, offset=e.start)
        raise NNEFContainerError(f"file is not valid UTF-8: byte 0x{data[e.start]:02x} ({e.reason})", loc) from None
    return text[1:] if text.startswith("\ufeff") else text


def _pick_ci(rel: str, names: Iterable[str], label: str, where: str) -> str | None:
    """Case-insensitive match of `rel` among `names` (labels compare case-insensitively); None if absent."""
    hits = sorted(n for n in names if n.lower() == rel.lower())
    if len(hits) > 1:
        raise NNEFContainerError(f"tensor label {label!r} matches several files that differ only in case: "
                                 f"{', '.join(hits)}", Location(file=where))
    return hits[0] if hits else None


class _FolderStore:
    """The files of a model folder: every one read goes through `member`, so none resolves outside the folder
    (through a symbolic link or '..'), and through `open_regular`, so none is a FIFO, device or folder."""

    def __init__(self, folder: str, max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES):
        self.folder = folder
        self.root = os.path.realpath(folder)
        self.max_document_bytes = max_document_bytes
        self._dat_files: list[str] | None = None

    def resolve(self, label: str) -> str | None:
        rel = label_to_relpath(label)
        if os.path.lexists(os.path.join(self.root, *rel.split("/"))):
            return rel
        if self._dat_files is None:  # listed once, on the first label without an exact match
            self._dat_files = [os.path.relpath(os.path.join(d, f), self.root).replace(os.sep, "/")
                               for d, _, files in os.walk(self.root) for f in files if f.lower().endswith(".dat")]
        return _pick_ci(rel, self._dat_files, label, self.folder)

    def display(self, rel: str) -> str:
        return os.path.join(self.folder, *rel.split("/"))

    def member(self, rel: str, what: str) -> str:
        """The real path of the file `rel` of the folder; NNEFContainerError where it resolves outside the folder."""
        real = os.path.realpath(os.path.join(self.root, *rel.split("/")))
        if os.path.commonpath([real, self.root]) != self.root:
            raise NNEFContainerError(f"{what} resolves outside the model folder (to {real})",
                                     Location(file=self.display(rel)))
        return real

    def documents(self) -> list[str]:
        """The other top-level `.nnef` and `.quant` files (graph_def's networks beside graph.nnef); folders are
        left out, anything else is read (and refused) as a document."""
        return sorted(name for name in os.listdir(self.root) if _is_document(name)
                      and not os.path.isdir(os.path.join(self.root, name)))

    def text(self, name: str) -> str | None:
        real = self.member(name, f"document {name!r}")
        return _read_text_file(real, self.display(name), self.max_document_bytes)

    def read(self, rel: str, label: str, check: Check | None = None) -> bytearray | memoryview:
        where = Location(file=self.display(rel))
        real = self.member(rel, f"tensor file of label {label!r}")
        try:
            with open_regular(real, where.file, f"tensor file of label {label!r}") as f:
                size = os.fstat(f.fileno()).st_size
                data = _read_checked(f, size, check)  # writable: decoded arrays become tensor storage, no copy
                if len(data) != size or f.read(1):
                    raise NNEFContainerError(f"tensor file of label {label!r} changed size while being read", where)
                return data
        except OSError as e:
            raise NNEFContainerError(f"cannot read tensor file of label {label!r}: {e.strerror or e}", where) from None

    def close(self) -> None:
        pass


def open_regular(path: str, where: str | None = None, what: str = "file") -> io.BufferedReader:
    """`path` opened for binary reading, if it is a regular file (a symbolic link to one is followed: callers check
    where it leads). Anything else (a folder, FIFO, device, socket) is an NNEFContainerError, found with `os.stat`
    before opening, so that a FIFO never blocks, and checked again on the open handle. A missing file raises
    FileNotFoundError (callers say what missing means); another OSError is an NNEFContainerError. `where` names the
    file in messages, `what` says what it is."""
    where = where or path
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISREG(mode):
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
            handle = os.fdopen(fd, "rb")
            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode):
                return handle
            handle.close()
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(errno.ENOENT, "no such file", where) from None
    except OSError as e:
        raise NNEFContainerError(f"cannot read {what}: {e.strerror or e}", Location(file=where)) from None
    kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
        "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else \
        "not a file"
    raise NNEFContainerError(f"{what} is not a regular file ({kind})", Location(file=where))


def _read_checked(stream: io.BufferedIOBase, size: int, check: Check | None) -> bytearray | memoryview:
    """`size` bytes of `stream` (fewer where it ends early), writable. Its first HEAD_SIZE bytes are handed to
    `check`, with `size`, before anything more is allocated or read."""
    head = stream.read(min(size, HEAD_SIZE))
    if len(head) < min(size, HEAD_SIZE):
        return bytearray(head)
    if check is not None:
        check(head, size)
    # uninitialised: the read fills it, outside the GIL (a bytearray would be zero-filled first, holding the GIL)
    data = memoryview(np.empty(size, np.uint8))
    data[:len(head)] = head
    got = len(head) + (stream.readinto(data[len(head):]) or 0) if size > len(head) else len(head)
    return data if got == size else data[:got]


@dataclass
class ModelFiles:
    """An opened NNEF container. Graph texts are read at open; a folder's tensor files are read on demand, an
    archive's were read with it.

    Use as a context manager (or call close()) to release an archive's file handle.
    """

    source: str
    graph_text: str
    quant_text: str | None
    _store: _FolderStore | TarStore = field(repr=False, compare=False)

    def document_names(self) -> list[str]:
        """The file names of the container's other NNEF documents and their quantization files (`train.nnef`,
        `train.quant`: networks written beside graph.nnef by `graph_def.save`, sharing its tensor files), sorted.
        A graph.nnef given by path has none."""
        if isinstance(self._store, _FolderStore) and not os.path.isdir(self.source):
            return []
        return self._store.documents()

    def document(self, name: str) -> str | None:
        """The text of the document `name` (one of `document_names()`), read now under the container's rules
        (inside the model, a regular file, at most `max_document_bytes`); None if it is gone."""
        return self._store.text(name)

    def documents(self) -> dict[str, str]:
        """The text of every document of `document_names()`, by file name (all read at once: `document` reads
        one at a time)."""
        found = {}
        for name in self.document_names():
            text = self.document(name)
            if text is not None:
                found[name] = text
        return found

    def has_tensor(self, label: str) -> bool:
        """Whether the container holds the tensor file of `label` (exactly, or up to letter case)."""
        return self._store.resolve(label) is not None

    def tensor_path(self, label: str) -> str:
        """The file name used for `label` in messages, e.g. 'model.tgz:conv1/filter.dat'."""
        return self._store.display(self._store.resolve(label) or label_to_relpath(label))

    def tensor_bytes(self, label: str, check: Check | None = None) -> bytearray | memoryview:
        """The bytes of the tensor file of `label`; NNEFContainerError if it is missing or unreadable. With a
        `check`, nothing past the file's first bytes is read (or inflated) unless they and its size pass it."""
        rel = self._store.resolve(label)
        if rel is None:
            expected = self._store.display(label_to_relpath(label))
            raise NNEFContainerError(f"no tensor file for variable label {label!r}: expected {expected}",
                                     Location(file=expected))
        return self._store.read(rel, label, check)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> ModelFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_document(name: str) -> bool:
    """Another network's graph text or graph.quant beside graph.nnef (`train.nnef`, `train.quant`)."""
    return "/" not in name and name.lower().endswith((".nnef", ".quant")) and name not in (GRAPH_FILE, QUANT_FILE)


def _archive_kind(path: str) -> tuple[bool, bool]:
    """Whether `path` is an archive (by its name or content), and whether it is gzip-compressed (by content)."""
    with open_regular(path, what="model file") as f:
        head = f.read(tarfile.BLOCKSIZE)
    gz = head.startswith(_GZIP_MAGIC)
    return path.lower().endswith(_ARCHIVE_SUFFIXES) or gz or head[257:262] == b"ustar", gz


def _check_document_size(size: int, limit: int, where: str) -> None:
    if size > limit:
        raise NNEFContainerError(f"document of {size:,} bytes is larger than the limit of {limit:,} bytes for a graph "
                                 "or quantization file (open_model's max_document_bytes)", Location(file=where))


def _read_text_file(path: str, where: str | None = None,
                    max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> str | None:
    """The text of a graph or quantization file, None if there is none; its size is checked before it is read."""
    where = where or path
    try:
        with open_regular(path, where, "document") as f:
            size = os.fstat(f.fileno()).st_size
            _check_document_size(size, max_bytes, where)
            # read(n) reserves n bytes first: ask for the size the file has, then for more in small steps (a file
            # that grows, or one whose size the system does not know, as under /proc) up to the limit
            data = f.read(size)
            while len(data) <= max_bytes:
                more = f.read(min(1 << 16, max_bytes + 1 - len(data)))
                if not more:
                    break
                data += more
    except FileNotFoundError:
        return None
    except OSError as e:
        raise NNEFContainerError(f"cannot read file: {e.strerror or e}", Location(file=where)) from None
    _check_document_size(len(data), max_bytes, where)
    return _decode(data, where)


def _listing(names: Iterable[str], limit: int = 20) -> str:
    names = sorted(names)
    shown = ", ".join(names[:limit]) + (f", ... ({len(names)} in all)" if len(names) > limit else "")
    return shown or "nothing"


def open_model(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES,
               max_members: int = DEFAULT_MAX_MEMBERS,
               max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES, progress: bool | None = None) -> ModelFiles:
    """Open a model folder, a path to its graph.nnef, or a .tar/.tgz/.tar.gz archive (gzip found by content).

    An archive is read whole, in one forward pass, when it is opened (its tensor files and documents are kept in
    memory until `close`); `progress` shows a bar on stderr meanwhile (None: on a terminal, for large archives).
    For archives, `max_bytes` bounds the total unpacked size and `max_members` the member count. Every graph,
    quantization or other NNEF document is at most `max_document_bytes` long. No file read from a folder may
    resolve outside it (through a symbolic link or '..'), and every one must be a regular file.
    """
    source = os.fspath(path)
    if os.path.isdir(source):
        store = _FolderStore(source, max_document_bytes)
        graph = store.text(GRAPH_FILE)
        if graph is None:
            raise NNEFContainerError(f"model folder has no {GRAPH_FILE}; found: {_listing(os.listdir(source))}",
                                     Location(file=source))
        return ModelFiles(source, graph, store.text(QUANT_FILE), store)
    try:
        archive, gz = _archive_kind(source)
    except FileNotFoundError:
        raise NNEFContainerError("no such model folder, graph file or archive", Location(file=source)) from None
    except OSError as e:
        raise NNEFContainerError(f"cannot read file: {e.strerror or e}", Location(file=source)) from None
    if not archive:  # a graph file: its folder is the model folder, 'x.nnef' goes with 'x.quant'
        folder = _FolderStore(os.path.dirname(source) or ".", max_document_bytes)
        graph = _read_text_file(source, source, max_document_bytes) or ""  # named by the caller: followed
        quant = folder.text(os.path.splitext(os.path.basename(source))[0] + ".quant")
        return ModelFiles(source, graph, quant, folder)
    from nnef_torch.format.container.archive import TarStore  # it builds on this module
    store = TarStore(source, gz, max_bytes, max_members, max_document_bytes, progress)
    try:
        graph = store.text(GRAPH_FILE)
        if graph is None:
            raise NNEFContainerError(f"archive has no {GRAPH_FILE}; found: {_listing(store.files)}",
                                     Location(file=source))
        return ModelFiles(source, graph, store.text(QUANT_FILE), store)
    except BaseException:
        store.close()
        raise



def read_file(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES,
              check: Check | None = None) -> bytearray | memoryview:
    """The bytes of one file (a lone .dat), refusing files larger than `max_bytes` or refused by `check` (run on
    the first bytes and the size before the rest is read)."""
    target = os.fspath(path)
    try:
        with open_regular(target) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise NNEFContainerError(f"file of {size} bytes exceeds the limit of {max_bytes}",
                                         Location(file=target))
            data = _read_checked(handle, size, check)
            if len(data) != size:
                raise NNEFContainerError("file changed size while being read", Location(file=target))
            return data
    except OSError as error:
        raise NNEFContainerError(f"cannot read file: {error.strerror or error}", Location(file=target)) from None
