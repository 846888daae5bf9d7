"""Reading NNEF containers: model folders, graph.nnef files and tar archives, checked and bounded before anything
is read; tensor files are read on demand."""
from __future__ import annotations

import errno
import gzip
import io
import os
import re
import stat
import tarfile
import threading
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from nnef_torch.errors import Location, NNEFContainerError
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


def _read_checked(stream: io.BufferedIOBase | _Bounded, size: int, check: Check | None) -> bytearray | memoryview:
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


class _TooLarge(tarfile.TarError):
    pass


class _Bounded:
    """The stream tarfile reads: refuses positions past `limit` and single reads over `max_read`, so that
    no header (size, pax or long-name record) makes us allocate or decompress more than allowed."""

    def __init__(self, stream: io.BufferedIOBase, limit: int, max_read: int):
        self.stream, self.limit, self.max_read = stream, limit, max_read

    def tell(self) -> int:
        return self.stream.tell()

    def seek(self, pos: int, whence: int = 0) -> int:
        target = pos + (self.stream.tell() if whence == 1 else 0)
        if whence == 2 or target > self.limit:
            raise _TooLarge(f"seek to byte {target} beyond the limit of {self.limit}")
        return self.stream.seek(target)

    def read(self, n: int | None = -1) -> bytes:
        pos = self.stream.tell()
        n = self.limit - pos if n is None or n < 0 else n
        self._allow(pos, n)
        return self.stream.read(n)

    def readinto(self, buffer: memoryview) -> int:
        self._allow(self.stream.tell(), buffer.nbytes)
        return self.stream.readinto(buffer)

    def _allow(self, pos: int, n: int) -> None:
        if n > self.max_read or pos + n > self.limit:
            raise _TooLarge(f"refusing to read {n} bytes at byte {pos} (over the size limits)")


class _TarStore:
    """Members of a tar archive, checked at open and read into memory on demand (never extracted)."""

    def __init__(self, path: str, max_bytes: int, max_members: int,
                 max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES):
        self.path = path
        self.max_document_bytes = max_document_bytes
        self._lock = threading.Lock()
        self._raw = open_regular(path, what="archive")
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="rb") if self._raw.read(2) == _GZIP_MAGIC else None
        self._raw.seek(0)
        # on top of the data, headers (pax records included) and padding take a few blocks per member
        limit = max_bytes + 16 * tarfile.BLOCKSIZE * max_members + tarfile.RECORDSIZE
        self._stream = _Bounded(self._gz or self._raw, limit, max_read=1 << 20)
        try:
            self._open(max_bytes, max_members)
        except BaseException:
            self.close()
            raise
        self._stream.max_read = self._stream.limit  # member data may now be read in one piece

    def _fail(self, message: str, member: str | None = None) -> NNEFContainerError:
        where = f"{self.path}:{member}" if member is not None else self.path
        return NNEFContainerError(message, Location(file=where))

    def _open(self, max_bytes: int, max_members: int) -> None:
        last = None
        try:
            tar = tarfile.open(fileobj=self._stream, mode="r:")
            self.files: dict[str, tarfile.TarInfo] = {}
            dirs: set[str] = set()
            count = total = 0
            while (info := tar.next()) is not None:
                last = info.name
                count += 1
                if count > max_members:
                    raise self._fail(f"archive has more than {max_members} members (at member {last!r})", last)
                name = self._check_member(info)
                if name in self.files or name in dirs:
                    raise self._fail(f"archive member {last!r} collides with another member named {name!r}", last)
                if info.isdir():
                    dirs.add(name)
                    continue
                total += info.size
                if total > max_bytes:
                    raise self._fail(f"archive unpacks to more than {max_bytes} bytes (at member {last!r}, "
                                     f"{info.size} bytes)", last)
                self.files[name] = info
            # tarfile stops silently at a bad header; a non-zero block there means a lying size or garbage
            self._stream.seek(tar.offset)
            if self._stream.read(tarfile.BLOCKSIZE).strip(b"\0"):
                raise tarfile.ReadError(f"invalid tar header at byte {tar.offset} (a member's size is wrong)")
        except NNEFContainerError:
            raise
        except _ARCHIVE_ERRORS as e:
            near = f" near member {last!r}" if last is not None else ""
            raise self._fail(f"corrupt or truncated archive{near}: {e}", last) from None
        self.prefix = ""  # the archive root, or its single top-level folder (as the Khronos tools write)
        if GRAPH_FILE not in self.files:
            tops = {n.split("/")[0] for n in [*self.files, *dirs] if n}
            if len(tops) == 1 and (top := tops.pop()) + "/" + GRAPH_FILE in self.files:
                self.prefix = top + "/"

    def _check_member(self, info: tarfile.TarInfo) -> str:
        """Refuse unsafe members; return the normalized name ('' for the archive root)."""
        raw = info.name
        if raw.startswith(("/", "\\")) or _DRIVE.match(raw):
            raise self._fail(f"archive member {raw!r} has an absolute path", raw)
        parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
        if ".." in parts or not (parts or info.isdir()):
            raise self._fail(f"archive member {raw!r} has a '..' component or no name", raw)
        kinds = ((info.issym, "a symbolic link"), (info.islnk, "a hard link"), (info.ischr, "a character device"),
                 (info.isblk, "a block device"), (info.isfifo, "a fifo"), (info.issparse, "a sparse file"))
        for test, what in kinds:
            if test():
                raise self._fail(f"archive member {raw!r} is {what}; only files and folders are allowed", raw)
        if not (info.isreg() or info.isdir()):
            raise self._fail(f"archive member {raw!r} has unsupported type {info.type!r}", raw)
        if info.size < 0:
            raise self._fail(f"archive member {raw!r} has a negative size", raw)
        return "/".join(parts)

    def text(self, name: str) -> str | None:
        info = self.files.get(self.prefix + name)
        if info is None:
            return None
        where = f"{self.path}:{info.name}"
        _check_document_size(info.size, self.max_document_bytes, where)
        return _decode(self._read(info), where)

    def documents(self) -> list[str]:
        """The other top-level `.nnef` and `.quant` files (graph_def's networks beside graph.nnef)."""
        n = len(self.prefix)
        return sorted(key[n:] for key in self.files if key.startswith(self.prefix) and _is_document(key[n:]))

    def resolve(self, label: str) -> str | None:
        rel = label_to_relpath(label)
        if self.prefix + rel in self.files:
            return rel
        n = len(self.prefix)
        return _pick_ci(rel, (k[n:] for k in self.files if k.startswith(self.prefix)), label, self.path)

    def display(self, rel: str) -> str:
        info = self.files.get(self.prefix + rel)
        return f"{self.path}:{info.name if info is not None else self.prefix + rel}"

    def read(self, rel: str, label: str, check: Check | None = None) -> bytearray | memoryview:
        return self._read(self.files[self.prefix + rel], check)

    def _read(self, info: tarfile.TarInfo, check: Check | None = None) -> bytearray | memoryview:
        """A member's data, read in place (what tarfile.extractfile does for a regular member, minus a copy); with a
        `check`, its first bytes are checked against the member's size before the rest is inflated."""
        with self._lock:
            if self._raw.closed:
                raise ValueError(f"model container {self.path} is closed")
            try:
                self._stream.seek(info.offset_data)
                data = _read_checked(self._stream, info.size, check)
            except _ARCHIVE_ERRORS as e:
                raise self._fail(f"cannot read archive member {info.name!r}: {e}", info.name) from None
        if len(data) != info.size:
            raise self._fail(f"archive member {info.name!r} is truncated: header says {info.size} bytes, "
                             f"found {len(data)}", info.name)
        return data

    def close(self) -> None:
        with self._lock:
            if self._gz is not None:
                self._gz.close()
            self._raw.close()


@dataclass
class ModelFiles:
    """An opened NNEF container. Graph texts are read at open; tensor files are read on demand.

    Use as a context manager (or call close()) to release an archive's file handle.
    """

    source: str
    graph_text: str
    quant_text: str | None
    _store: _FolderStore | _TarStore = field(repr=False, compare=False)

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


def _is_archive(path: str) -> bool:
    with open_regular(path, what="model file") as f:
        head = f.read(tarfile.BLOCKSIZE)
    return path.lower().endswith(_ARCHIVE_SUFFIXES) or head.startswith(_GZIP_MAGIC) or head[257:262] == b"ustar"


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
               max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> ModelFiles:
    """Open a model folder, a path to its graph.nnef, or a .tar/.tgz/.tar.gz archive (gzip found by content).

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
        archive = _is_archive(source)
    except FileNotFoundError:
        raise NNEFContainerError("no such model folder, graph file or archive", Location(file=source)) from None
    except OSError as e:
        raise NNEFContainerError(f"cannot read file: {e.strerror or e}", Location(file=source)) from None
    if not archive:  # a graph file: its folder is the model folder, 'x.nnef' goes with 'x.quant'
        folder = _FolderStore(os.path.dirname(source) or ".", max_document_bytes)
        graph = _read_text_file(source, source, max_document_bytes) or ""  # named by the caller: followed
        quant = folder.text(os.path.splitext(os.path.basename(source))[0] + ".quant")
        return ModelFiles(source, graph, quant, folder)
    store = _TarStore(source, max_bytes, max_members, max_document_bytes)
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
