"""A gzip stream compressed on several threads (as pigz does): the data is cut into chunks, each deflated on its own
(zlib releases the GIL) and ended with a sync flush, so that the chunks, in order, are one deflate stream: a single
gzip member, which every gzip reader reads (tract's, Python's, `tar xzf`). Writing stays one forward pass."""
from __future__ import annotations

import os
import struct
import zlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

CHUNK_BYTES = 1 << 20  # each chunk forgets the 32 KiB window before it: nothing to lose on float data


def _deflate(chunk: bytes, level: int) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(chunk) + compressor.flush(zlib.Z_SYNC_FLUSH)


class GzipWriter:
    """A write-only file object: what is written goes to `raw` as one gzip member, deflated at `level` on up to
    `threads` threads (by default the CPUs, at most 8), in order; `close` ends the member (it does not close `raw`)."""

    def __init__(self, raw: BinaryIO, level: int, mtime: int, threads: int | None = None):
        self.raw, self.level = raw, level
        self.threads = threads or min(8, os.cpu_count() or 1)
        self.pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="nnef-deflate")
        self.pending: deque[Future[bytes]] = deque()
        self.buffer = bytearray()
        self.crc = self.size = 0
        self.raw.write(b"\x1f\x8b\x08\x00" + struct.pack("<I", mtime & 0xFFFFFFFF) + b"\x00\xff")

    def tell(self) -> int:
        return self.size

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data).cast("B")
        self.crc = zlib.crc32(view, self.crc)
        self.size += view.nbytes
        self.buffer += view
        while len(self.buffer) >= CHUNK_BYTES:
            self._submit(bytes(self.buffer[:CHUNK_BYTES]))
            del self.buffer[:CHUNK_BYTES]
        return view.nbytes

    def _submit(self, chunk: bytes) -> None:
        self.pending.append(self.pool.submit(_deflate, chunk, self.level))
        while len(self.pending) > 2 * self.threads:  # bounded memory: write out the oldest, in order
            self.raw.write(self.pending.popleft().result())

    def close(self) -> None:
        """Write what is left, the final block and the trailer (crc and size)."""
        try:
            if self.buffer:
                self._submit(bytes(self.buffer))
                self.buffer.clear()
            while self.pending:
                self.raw.write(self.pending.popleft().result())
            self.raw.write(zlib.compressobj(self.level, zlib.DEFLATED, -zlib.MAX_WBITS).flush(zlib.Z_FINISH))
            self.raw.write(struct.pack("<II", self.crc & 0xFFFFFFFF, self.size & 0xFFFFFFFF))
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Stop the threads without finishing the stream (after an error: the file is removed)."""
        for future in self.pending:
            future.cancel()
        self.pending.clear()
        self.pool.shutdown(wait=True)
