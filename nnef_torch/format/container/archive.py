"""Reading tar archives in one forward pass: a gzip stream is never rewound (each backward seek in one inflates it
again from its start), members are taken in the order they come, and the data of what a model can use is kept."""
from __future__ import annotations

import gzip
import io
import os
import tarfile
import threading
from typing import Any

import numpy as np

from nnef_torch.errors import Location, NNEFContainerError, NNEFError
from nnef_torch.format.container.progress import progress_bar
from nnef_torch.format.container.reading import (
    _ARCHIVE_ERRORS,
    _DRIVE,
    DEFAULT_MAX_DOCUMENT_BYTES,
    GRAPH_FILE,
    HEAD_SIZE,
    Check,
    _check_document_size,
    _decode,
    _is_document,
    _pick_ci,
    open_regular,
)
from nnef_torch.format.labels import label_to_relpath
from nnef_torch.format.tensor_file import header_check

_FIRST_ALLOCATION = 64 << 20  # a kept member's buffer starts at most this large, and grows with the data found


def _dat_check(where: str) -> Check:
    """What every tensor file passes before its data is kept: a header that agrees with the file's size."""
    return header_check(file=where)


class _TooLarge(tarfile.TarError):
    pass


class _Counted:
    """The archive file as read, each read counted on a progress bar (if any)."""

    def __init__(self, raw: io.BufferedIOBase, bar: Any):
        self.raw, self.bar = raw, bar

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        if self.bar is not None:
            self.bar.update(len(data))
        return data

    def readinto(self, buffer: memoryview) -> int:
        got = self.raw.readinto(buffer) or 0
        if self.bar is not None:
            self.bar.update(got)
        return got


class _Forward:
    """The stream tarfile reads, forward only: `seek` moves forward by reading (a gzip stream is never rewound, and
    the file under it need not be seekable); a backward seek is an error. Refuses positions past `limit` and single
    `read`s over `max_read`, so that no header (size, pax or long-name record) makes us allocate or inflate more than
    allowed. The last block read is kept, so that the block tarfile stopped at can be looked at again."""

    def __init__(self, stream: Any, limit: int, max_read: int):
        self.stream, self.limit, self.max_read = stream, limit, max_read
        self.pos = 0
        self.last = (0, b"")

    def tell(self) -> int:
        return self.pos

    def seek(self, pos: int, whence: int = 0) -> int:
        target = pos + (self.pos if whence == 1 else 0)
        if whence == 2 or target > self.limit:
            raise _TooLarge(f"seek to byte {target} beyond the limit of {self.limit}")
        if target < self.pos:
            raise tarfile.ReadError(f"seek back from byte {self.pos} to {target} (archives are read in one pass)")
        while self.pos < target:
            chunk = self.stream.read(min(target - self.pos, 1 << 20))
            if not chunk:
                raise tarfile.ReadError("unexpected end of data")
            self.pos += len(chunk)
        return self.pos

    def read(self, n: int | None = -1) -> bytes:
        n = self.limit - self.pos if n is None or n < 0 else n
        if n > self.max_read or self.pos + n > self.limit:
            raise _TooLarge(f"refusing to read {n} bytes at byte {self.pos} (over the size limits)")
        data = self.stream.read(n)
        if n <= tarfile.BLOCKSIZE:
            self.last = (self.pos, data)
        self.pos += len(data)
        return data

    def readinto(self, buffer: memoryview) -> int:
        """Fills `buffer` (less only at the end of the stream)."""
        if self.pos + buffer.nbytes > self.limit:
            raise _TooLarge(f"refusing to read {buffer.nbytes} bytes at byte {self.pos} (over the size limits)")
        got = 0
        while got < buffer.nbytes:
            n = self.stream.readinto(buffer[got:]) or 0
            if n == 0:
                break
            got += n
        self.pos += got
        return got

    def block_at(self, offset: int) -> bytes:
        """The block at `offset`: the last block read again, or one further on."""
        start, data = self.last
        if offset == start:
            return data
        self.seek(offset)
        return self.read(tarfile.BLOCKSIZE)


def _read_growing(stream: _Forward, head: bytes, size: int) -> memoryview:
    """`size` bytes of `stream` after `head` (fewer where it ends early), writable. The buffer starts at most
    _FIRST_ALLOCATION bytes and doubles as the data comes: a header's size alone never allocates more."""
    capacity = min(size, max(len(head), _FIRST_ALLOCATION))
    buffer = np.empty(capacity, np.uint8)  # uninitialised: the read fills it, outside the GIL
    buffer[:len(head)] = np.frombuffer(head, np.uint8)
    got = len(head)
    while True:
        got += stream.readinto(memoryview(buffer)[got:capacity])
        if got < capacity or capacity == size:
            break
        capacity = min(size, 2 * capacity)
        grown = np.empty(capacity, np.uint8)
        grown[:got] = buffer[:got]
        buffer = grown
    view = memoryview(buffer)
    return view if got == capacity else view[:got]


def _kept(name: str) -> bool:
    """Whether a member's data is kept while the archive is read: tensor files and NNEF documents."""
    return name.lower().endswith((".dat", ".nnef", ".quant"))


class TarStore:
    """The members of a tar archive, read in one forward pass when it is opened (a gzip stream is never rewound,
    members are taken in the order they come): unsafe members are refused and sizes bounded from the headers before
    any data is read, and the data of what a model can use (.dat files, NNEF documents) is kept in memory (never
    extracted to disk) until the store is closed. A .dat member is kept only if its header agrees with its size:
    reading one that does not raises what its header check found, as reading it from a folder would."""

    def __init__(self, path: str, gz: bool, max_bytes: int, max_members: int,
                 max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES, progress: bool | None = None):
        self.path = path
        self.max_document_bytes = max_document_bytes
        self._lock = threading.Lock()
        self._closed = False
        self.files: dict[str, tarfile.TarInfo] = {}
        self._data: dict[str, memoryview] = {}  # by normalized name
        self._refused: dict[str, bytes] = {}  # .dat members whose header check failed: their first bytes
        self._handed: set[str] = set()
        # on top of the data, headers (pax records included) and padding take a few blocks per member
        limit = max_bytes + 16 * tarfile.BLOCKSIZE * max_members + tarfile.RECORDSIZE
        self._gz, self._limit = gz, limit
        with open_regular(path, what="archive") as raw:
            bar = progress_bar(os.fstat(raw.fileno()).st_size, progress, f"reading {os.path.basename(path)}")
            try:
                counted = _Counted(raw, bar)
                stream = gzip.GzipFile(fileobj=counted, mode="rb") if gz else counted  # type: ignore[arg-type]
                try:
                    self._scan(_Forward(stream, limit, max_read=1 << 20), max_bytes, max_members)
                finally:
                    if gz:
                        stream.close()
            finally:
                if bar is not None:
                    bar.close()
        self.prefix = ""  # the archive root, or its single top-level folder (as the Khronos tools write)
        if GRAPH_FILE not in self.files:
            tops = {n.split("/")[0] for n in [*self.files, *self._dirs] if n}
            if len(tops) == 1 and (top := tops.pop()) + "/" + GRAPH_FILE in self.files:
                self.prefix = top + "/"

    def _fail(self, message: str, member: str | None = None) -> NNEFContainerError:
        where = f"{self.path}:{member}" if member is not None else self.path
        return NNEFContainerError(message, Location(file=where))

    def _scan(self, stream: _Forward, max_bytes: int, max_members: int) -> None:
        last = None
        self._dirs: set[str] = set()
        try:
            tar = tarfile.open(fileobj=stream, mode="r:")  # type: ignore[call-overload]
            count = total = 0
            while (info := tar.next()) is not None:
                last = info.name
                count += 1
                if count > max_members:
                    raise self._fail(f"archive has more than {max_members} members (at member {last!r})", last)
                name = self._check_member(info)
                if name in self.files or name in self._dirs:
                    raise self._fail(f"archive member {last!r} collides with another member named {name!r}", last)
                if info.isdir():
                    self._dirs.add(name)
                    continue
                total += info.size
                if total > max_bytes:
                    raise self._fail(f"archive unpacks to more than {max_bytes} bytes (at member {last!r}, "
                                     f"{info.size} bytes)", last)
                self.files[name] = info
                if _kept(name):
                    self._keep(stream, name, info)
            # tarfile stops silently at a bad header; a non-zero block there means a lying size or garbage
            if stream.block_at(tar.offset).strip(b"\0"):
                raise tarfile.ReadError(f"invalid tar header at byte {tar.offset} (a member's size is wrong)")
        except NNEFContainerError:
            raise
        except _ARCHIVE_ERRORS as e:
            near = f" near member {last!r}" if last is not None else ""
            raise self._fail(f"corrupt or truncated archive{near}: {e}", last) from None

    def _keep(self, stream: _Forward, name: str, info: tarfile.TarInfo) -> None:
        """Read the data of the member `name` (the stream is at its start), if it is worth keeping."""
        stream.seek(info.offset_data)
        head = b""
        if name.lower().endswith(".dat"):
            head = stream.read(min(info.size, HEAD_SIZE))
            if len(head) < min(info.size, HEAD_SIZE):
                raise self._fail(f"archive member {info.name!r} is truncated: header says {info.size} bytes, found "
                                 f"{len(head)}", info.name)
            try:
                _dat_check(f"{self.path}:{info.name}")(head, info.size)
            except NNEFError:
                self._refused[name] = head  # raised again if the member is read
                return
        elif info.size > self.max_document_bytes:
            return  # `text` refuses it by its size
        data = _read_growing(stream, head, info.size)
        if len(data) != info.size:
            raise self._fail(f"archive member {info.name!r} is truncated: header says {info.size} bytes, found "
                             f"{len(data)}", info.name)
        self._data[name] = data

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
        return _decode(self._take(self.prefix + name), where)

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
        """A member's data as kept: the first read of a member gets the kept buffer itself (decoded arrays become
        tensor storage, no copy), each later read a copy. `check` runs on its first bytes and its size. A member not
        kept (its header did not check) is refused by `check`, or read again in a pass of its own."""
        key = self.prefix + rel
        if key in self._refused:
            if check is not None:
                check(self._refused[key], self.files[key].size)
            return self._fetch(self.files[key])
        data = self._take(key)
        if check is not None:
            check(bytes(data[:HEAD_SIZE]), data.nbytes)
        with self._lock:
            first = key not in self._handed
            self._handed.add(key)
        return data if first else memoryview(np.array(data, np.uint8))

    def _take(self, key: str) -> memoryview:
        with self._lock:
            if self._closed:
                raise ValueError(f"model container {self.path} is closed")
            data = self._data.get(key)
        if data is not None:
            return data
        info = self.files[key]
        raise self._fail(f"archive member {info.name!r} is not a tensor file or document (its data was not kept)",
                         info.name)

    def _fetch(self, info: tarfile.TarInfo) -> memoryview:
        """The data of a member that was not kept, read in a forward pass of its own up to it."""
        with self._lock:
            if self._closed:
                raise ValueError(f"model container {self.path} is closed")
        try:
            with open_regular(self.path, what="archive") as raw:
                stream = gzip.GzipFile(fileobj=raw, mode="rb") if self._gz else raw
                try:
                    forward = _Forward(stream, self._limit, max_read=1 << 20)
                    forward.seek(info.offset_data)
                    data = _read_growing(forward, b"", info.size)
                finally:
                    if self._gz:
                        stream.close()
        except _ARCHIVE_ERRORS as e:
            raise self._fail(f"cannot read archive member {info.name!r}: {e}", info.name) from None
        if len(data) != info.size:
            raise self._fail(f"archive member {info.name!r} is truncated: header says {info.size} bytes, found "
                             f"{len(data)}", info.name)
        return data

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._data.clear()
