"""The threaded gzip writer makes one gzip member that gzip readers inflate to exactly what was written."""
from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import zlib

import numpy as np
import pytest

from nnef_torch.format.container.deflate import CHUNK_BYTES, GzipWriter


def _written(pieces: list[bytes], threads: int) -> bytes:
    out = io.BytesIO()
    writer = GzipWriter(out, 1, mtime=0, threads=threads)
    for piece in pieces:
        writer.write(memoryview(piece))
    writer.close()
    return out.getvalue()


@pytest.mark.parametrize("threads", [1, 3])
def test_chunks_inflate_to_the_data_written(threads):
    rng = np.random.default_rng(0)
    floats = (rng.standard_normal(3 * CHUNK_BYTES // 4) * 0.02).astype(np.float32).tobytes()
    pieces = [b"", b"header" * 100, floats, bytes(CHUNK_BYTES + 7), floats[:1000]]
    data = b"".join(pieces)
    packed = _written(pieces, threads)
    assert gzip.decompress(packed) == data  # Python's reader
    inflater = zlib.decompressobj(31)  # one gzip member: nothing left after it
    assert inflater.decompress(packed) == data and inflater.eof and inflater.unused_data == b""
    if shutil.which("gzip"):
        assert subprocess.run(["gzip", "-dc"], input=packed, capture_output=True, check=True).stdout == data


def test_empty_stream_is_a_valid_gzip_file():
    assert gzip.decompress(_written([], 2)) == b""
