"""NNEF containers (spec 5.1): a model folder, a graph.nnef file, or a .tar/.tgz archive.

This is the one module of the package that touches the filesystem. Reading is lazy: tensor files are read
when asked for. Archives are untrusted: they are never extracted to disk, unsafe members are refused and
sizes are bounded before anything is read. Writing is atomic: a temporary sibling is renamed over the target.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import secrets
import shutil
import stat
import tarfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from nnef_torch.errors import Location, NNEFContainerError
from nnef_torch.format.labels import label_to_relpath

DEFAULT_MAX_BYTES = 16 << 30  # total unpacked size of an archive
DEFAULT_MAX_MEMBERS = 100_000  # member count of an archive
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
    """Tensor files of a model folder."""

    def __init__(self, folder: str):
        self.folder = folder
        self.root = os.path.realpath(folder)
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

    def documents(self) -> list[str]:
        """The other top-level `.nnef` and `.quant` files (graph_def's networks beside graph.nnef)."""
        return sorted(name for name in os.listdir(self.root) if _is_document(name)
                      and os.path.isfile(os.path.join(self.root, name)))

    def text(self, name: str) -> str | None:
        return _read_text_file(os.path.join(self.root, name))

    def read(self, rel: str, label: str, check: Check | None = None) -> bytearray | memoryview:
        real = os.path.realpath(os.path.join(self.root, *rel.split("/")))
        where = Location(file=self.display(rel))
        if os.path.commonpath([real, self.root]) != self.root:
            raise NNEFContainerError(f"tensor file of label {label!r} resolves outside the model folder "
                                     f"(to {real})", where)
        try:
            if not stat.S_ISREG(os.stat(real).st_mode):
                raise NNEFContainerError(f"tensor file of label {label!r} is not a regular file", where)
            with open(real, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                data = _read_checked(f, size, check)  # writable: decoded arrays become tensor storage, no copy
                if len(data) != size or f.read(1):
                    raise NNEFContainerError(f"tensor file of label {label!r} changed size while being read", where)
                return data
        except OSError as e:
            raise NNEFContainerError(f"cannot read tensor file of label {label!r}: {e.strerror or e}", where) from None

    def close(self) -> None:
        pass


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

    def __init__(self, path: str, max_bytes: int, max_members: int):
        self.path = path
        self._lock = threading.Lock()
        self._raw = open(path, "rb")
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
        return None if info is None else _decode(self._read(info), f"{self.path}:{info.name}")

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

    def documents(self) -> dict[str, str]:
        """The container's other NNEF documents and their quantization files, by file name (`train.nnef`,
        `train.quant`: networks written beside graph.nnef by `graph_def.save`, sharing its tensor files). A
        graph.nnef given by path has none."""
        if isinstance(self._store, _FolderStore) and not os.path.isdir(self.source):
            return {}
        found = {}
        for name in self._store.documents():
            text = self._store.text(name)
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
    with open(path, "rb") as f:
        head = f.read(tarfile.BLOCKSIZE)
    return path.lower().endswith(_ARCHIVE_SUFFIXES) or head.startswith(_GZIP_MAGIC) or head[257:262] == b"ustar"


def _read_text_file(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise NNEFContainerError(f"cannot read file: {e.strerror or e}", Location(file=path)) from None
    return _decode(data, path)


def _listing(names: Iterable[str], limit: int = 20) -> str:
    names = sorted(names)
    shown = ", ".join(names[:limit]) + (f", ... ({len(names)} in all)" if len(names) > limit else "")
    return shown or "nothing"


def open_model(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES,
               max_members: int = DEFAULT_MAX_MEMBERS) -> ModelFiles:
    """Open a model folder, a path to its graph.nnef, or a .tar/.tgz/.tar.gz archive (gzip found by content).

    For archives, `max_bytes` bounds the total unpacked size and `max_members` the member count.
    """
    source = os.fspath(path)
    if os.path.isdir(source):
        graph = _read_text_file(os.path.join(source, GRAPH_FILE))
        if graph is None:
            raise NNEFContainerError(f"model folder has no {GRAPH_FILE}; found: {_listing(os.listdir(source))}",
                                     Location(file=source))
        quant = _read_text_file(os.path.join(source, QUANT_FILE))
        return ModelFiles(source, graph, quant, _FolderStore(source))
    try:
        archive = _is_archive(source)
    except FileNotFoundError:
        raise NNEFContainerError("no such model folder, graph file or archive", Location(file=source)) from None
    except OSError as e:
        raise NNEFContainerError(f"cannot read file: {e.strerror or e}", Location(file=source)) from None
    if not archive:  # a graph file: its folder is the model folder, 'x.nnef' goes with 'x.quant'
        quant = _read_text_file(os.path.splitext(source)[0] + ".quant")
        graph = _read_text_file(source) or ""
        return ModelFiles(source, graph, quant, _FolderStore(os.path.dirname(source) or "."))
    store = _TarStore(source, max_bytes, max_members)
    try:
        graph = store.text(GRAPH_FILE)
        if graph is None:
            raise NNEFContainerError(f"archive has no {GRAPH_FILE}; found: {_listing(store.files)}",
                                     Location(file=source))
        return ModelFiles(source, graph, store.text(QUANT_FILE), store)
    except BaseException:
        store.close()
        raise


def _as_buffer(data: object, label: str) -> memoryview:
    try:
        return memoryview(data).cast("B")  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"tensor {label!r}: expected bytes, found {type(data).__name__}") from None


def _iter_files(graph_text: str, quant_text: str | None,
                tensors: Iterable[tuple[str, object]],
                documents: Mapping[str, str] | None = None) -> Iterable[tuple[str, memoryview]]:
    """(relative path, bytes) of every file, validating labels and calling tensor callables one at a time."""
    yield GRAPH_FILE, memoryview(graph_text.encode("utf-8"))
    if quant_text is not None:
        yield QUANT_FILE, memoryview(quant_text.encode("utf-8"))
    for name, text in (documents or {}).items():
        if not _is_document(name) or name.startswith(".") or "\\" in name:
            raise NNEFContainerError(f"document name {name!r} is not a plain file name ending in .nnef or .quant "
                                     f"(other than {GRAPH_FILE} and {QUANT_FILE})", Location(file=name))
        yield name, memoryview(text.encode("utf-8"))
    files: dict[str, str] = {}  # lower-case path -> label (labels compare case-insensitively)
    folders: set[str] = set()
    for label, value in tensors.items() if isinstance(tensors, Mapping) else tensors:
        rel = label_to_relpath(label)
        parts = rel.lower().split("/")
        above = ["/".join(parts[:i]) for i in range(1, len(parts))]
        clash = files.get(rel.lower()) or next((files[f] for f in above if f in files), None)
        if clash is not None or rel.lower() in folders:
            other = f"label {clash!r}" if clash is not None else "the folder of another label"
            raise NNEFContainerError(f"tensor label {label!r} clashes with {other} (labels compare "
                                     f"case-insensitively)", Location(file=label))
        files[rel.lower()] = label
        folders.update(above)
        yield rel, _as_buffer(value() if callable(value) else value, label)


def _fsync_dir(path: str) -> None:
    with contextlib.suppress(OSError):  # e.g. Windows, where folders cannot be opened
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_folder(tmp: str, files: Iterable[tuple[str, memoryview]], target: str) -> None:
    written = []
    for rel, data in files:
        dest = os.path.join(tmp, *rel.split("/"))
        try:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "xb") as f:
                f.write(data)
        except OSError as e:
            raise NNEFContainerError(f"cannot write {rel}: {e.strerror or e}",
                                     Location(file=os.path.join(target, rel))) from None
        written.append((rel, dest))
    _fsync_files(written, target)
    for dirpath, _dirs, _files in os.walk(tmp):
        _fsync_dir(dirpath)


def _fsync_files(written: list[tuple[str, str]], target: str) -> None:
    """Flush every written file to disk, several at a time (one after another, each waits for its own journal
    commit; together, the file system commits them in a few)."""
    def flush(item: tuple[str, str]) -> None:
        rel, path = item
        try:
            fd = os.open(path, os.O_RDWR)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise NNEFContainerError(f"cannot write {rel}: {e.strerror or e}",
                                     Location(file=os.path.join(target, rel))) from None
    if len(written) < 4:
        for item in written:
            flush(item)
        return
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=min(16, len(written)), thread_name_prefix="nnef-fsync") as pool:
        for _ in pool.map(flush, written):
            pass


class _ViewReader:
    """A file-like reader over a memoryview, so tarfile streams a tensor without copying it whole."""

    def __init__(self, view: memoryview):
        self.view, self.pos = view, 0

    def read(self, n: int = -1) -> bytes:
        end = self.view.nbytes if n is None or n < 0 else min(self.pos + n, self.view.nbytes)
        chunk, self.pos = self.view[self.pos:end].tobytes(), end
        return chunk


def _write_tar(tmp: str, files: Iterable[tuple[str, memoryview]], compress: bool) -> None:
    now = int(time.time())
    with open(tmp, "wb") as raw:
        stream = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=now) if compress else raw
        try:
            with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for rel, data in files:
                    info = tarfile.TarInfo(rel)
                    info.size, info.mtime, info.mode = data.nbytes, now, 0o644
                    tar.addfile(info, _ViewReader(data))
        finally:
            if compress:
                stream.close()
        raw.flush()
        os.fsync(raw.fileno())


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def write_model(path: str | os.PathLike, graph_text: str,
                tensors: Iterable[tuple[str, bytes | Callable[[], bytes]]], quant_text: str | None = None, *,
                compress: bool | None = None, documents: Mapping[str, str] | None = None) -> None:
    """Write a model container atomically: a folder, or a tar archive (gzip with compress=True or a
    .tgz/.tar.gz target; plain tar for a .tar target).

    Tensors are (label, bytes) or (label, callable returning bytes) pairs, consumed one at a time. Everything
    is written to a temporary sibling that replaces the target only once complete; an existing target folder
    must be a model folder (it holds graph.nnef) or empty. On any error the previous target is left intact.
    `documents` are more NNEF documents by file name (`train.nnef`), written beside graph.nnef.
    """
    target = os.path.abspath(os.fspath(path))
    lower = target.lower()
    gz_name = lower.endswith((".tgz", ".tar.gz"))
    if compress is False and gz_name:
        raise ValueError(f"compress=False contradicts the gzip file name {target}")
    archive = bool(compress) or gz_name or lower.endswith(".tar")
    gz = bool(compress) or gz_name
    parent, name = os.path.split(target)
    where = Location(file=target)
    if not name:
        raise NNEFContainerError("cannot write a model over a filesystem root", where)
    if not os.path.isdir(parent):
        raise NNEFContainerError(f"parent folder {parent} does not exist", where)
    if os.path.isdir(target):
        if archive:
            raise NNEFContainerError("an archive cannot replace an existing folder", where)
        if os.listdir(target) and not os.path.exists(os.path.join(target, GRAPH_FILE)):
            raise NNEFContainerError(f"existing folder is not empty and has no {GRAPH_FILE}; refusing to "
                                     f"replace it", where)
    elif os.path.lexists(target) and not archive:
        raise NNEFContainerError("a model folder cannot replace an existing file", where)

    if not isinstance(graph_text, str) or not isinstance(quant_text, (str, type(None))):
        raise TypeError("graph_text must be a str and quant_text a str or None")
    files = _iter_files(graph_text, quant_text, tensors, documents)
    tmp = os.path.join(parent, f".{name}.tmp-{secrets.token_hex(6)}")
    if archive:  # created here, not by tempfile, so that the umask applies as for any new file
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    else:
        os.mkdir(tmp)
    try:
        if archive:
            _write_tar(tmp, files, gz)
            os.replace(tmp, target)
        else:
            _write_folder(tmp, files, target)
            _swap_in(tmp, target, parent, name)
    except BaseException:
        _remove(tmp)
        raise
    _fsync_dir(parent)


def _swap_in(tmp: str, target: str, parent: str, name: str) -> None:
    """Rename the finished folder `tmp` to `target`, moving an existing target aside first."""
    if not os.path.lexists(target):
        os.rename(tmp, target)
        return
    old = os.path.join(parent, f".{name}.old-{secrets.token_hex(6)}")
    os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(old, target)
        raise
    _remove(old)


def read_file(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES,
              check: Check | None = None) -> bytearray | memoryview:
    """The bytes of one file (a lone .dat), refusing files larger than `max_bytes` or refused by `check` (run on
    the first bytes and the size before the rest is read)."""
    target = os.fspath(path)
    try:
        with open(target, "rb") as handle:
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


def write_file(path: str | os.PathLike, data: bytes) -> None:
    """Write one file atomically: a temporary sibling renamed over the target once complete."""
    write_files([(path, data)])


def write_files(files: Sequence[tuple[str | os.PathLike, bytes]]) -> None:
    """Write files that belong together (a graph and its weights): each goes to a temporary sibling first, and the
    targets are replaced only once every one is complete, so a failure leaves them all as they were."""
    pending: list[tuple[str, str]] = []
    try:
        for path, data in files:
            target = os.path.abspath(os.fspath(path))
            parent, name = os.path.split(target)
            tmp = os.path.join(parent, f".{name}.tmp-{secrets.token_hex(6)}")
            pending.append((tmp, target))
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        for tmp, target in pending:
            os.replace(tmp, target)
    except BaseException:
        for tmp, _ in pending:
            _remove(tmp)
        raise
