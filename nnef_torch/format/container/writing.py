"""Writing NNEF containers atomically: every file goes to a temporary sibling that replaces the target only once
complete, so an interrupted save leaves the previous model as it was."""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tarfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from nnef_torch.errors import Location, NNEFContainerError
from nnef_torch.format.container.deflate import GzipWriter
from nnef_torch.format.container.reading import GRAPH_FILE, QUANT_FILE, _is_document
from nnef_torch.format.labels import label_to_relpath

# gzip level of .tgz archives. Float data hardly compresses (mantissa bits look random): on float32 weights of a
# trained layer's spread (normal, std 0.02; bench/bench_archives.py --levels), level 1 leaves 92.9% of the size,
# levels 6 and 9 92.6%, all three at about 26 MiB/s of CPU time here; on int8 codes level 1 runs 1.7 times as fast
# (44 against 26 MiB/s) for 69.6% of the size against 67.4%. Higher levels buy 0.3% of a float model's size and
# cost time wherever the data does compress: level 1 (gzip.GzipFile's default is 9). Deflate itself, at any level,
# is what a .tgz save waits for: it runs on several threads (`deflate.GzipWriter`).
GZIP_LEVEL = 1
_COPY_BYTES = 1 << 20  # a tensor goes to gzip in slices this large
ARCHIVE_SUFFIXES = (".tgz", ".tar.gz", ".tar")
# names of archives of other kinds: refused, where a folder of that name would surprise (nnef_torch.save(m, "m.zip"))
OTHER_ARCHIVES = (".zip", ".tar.bz2", ".tbz2", ".tbz", ".tar.xz", ".txz", ".tar.zst", ".tzst", ".tar.lz4", ".7z",
                  ".rar", ".gz", ".bz2", ".xz", ".zst")


def check_target(path: str | os.PathLike) -> None:
    """Refuse a target named as an archive of a kind NNEF containers are not written as (.zip, .tar.xz, ...)."""
    name = os.path.basename(os.path.normpath(os.fspath(path))).lower()
    if name.endswith(ARCHIVE_SUFFIXES):
        return
    suffix = next((s for s in OTHER_ARCHIVES if name.endswith(s)), None)
    if suffix is not None:
        raise NNEFContainerError(f"cannot write a {suffix} archive: NNEF models are written as .tgz, .tar.gz or .tar "
                                 f"archives (what tract and the Khronos tools read) or, under any other name, as a "
                                 f"folder; name the target '{name[:-len(suffix)]}.tgz', or give a folder name",
                                 Location(file=os.fspath(path)))


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
    """A file-like reader over a memoryview, so tarfile streams a tensor in slices of it, without copies."""

    def __init__(self, view: memoryview):
        self.view, self.pos = view, 0

    def read(self, n: int = -1) -> memoryview:
        end = self.view.nbytes if n is None or n < 0 else min(self.pos + n, self.view.nbytes)
        chunk, self.pos = self.view[self.pos:end], end
        return chunk


def _write_tar(tmp: str, files: Iterable[tuple[str, memoryview]], compress: bool) -> None:
    """One forward pass: each member's header, then its data, streamed (deflated on several threads for a .tgz,
    `deflate.GzipWriter`) into `tmp`; nothing seeks."""
    now = int(time.time())
    with open(tmp, "wb") as raw:
        stream = GzipWriter(raw, GZIP_LEVEL, now) if compress else raw
        try:
            with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT,  # type: ignore[call-overload]
                              copybufsize=_COPY_BYTES) as tar:
                for rel, data in files:
                    info = tarfile.TarInfo(rel)
                    info.size, info.mtime, info.mode = data.nbytes, now, 0o644
                    tar.addfile(info, _ViewReader(data))
        except BaseException:
            if isinstance(stream, GzipWriter):
                stream.abandon()
            raise
        if isinstance(stream, GzipWriter):
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
    .tgz/.tar.gz target; plain tar for a .tar target), in one forward pass. A name of another kind of archive (.zip,
    .tar.xz, .7z, ...) is refused (`check_target`): it would otherwise be a folder of that name.

    Tensors are (label, bytes) or (label, callable returning bytes) pairs, consumed one at a time. Everything
    is written to a temporary sibling that replaces the target only once complete; an existing target folder
    must be a model folder (it holds graph.nnef) or empty. On any error the previous target is left intact.
    `documents` are more NNEF documents by file name (`train.nnef`), written beside graph.nnef.
    """
    check_target(path)
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
