"""Progress on stderr for the container's long steps (reading or writing an archive), as the rest of the project
shows it: a tqdm bar when `progress` is True; by default (None) only on a terminal, and only for large files."""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

PROGRESS_BYTES = 64 << 20  # by default a bar shows on a terminal from this many bytes
_DEFAULT: ContextVar[bool | None] = ContextVar("nnef_torch_progress", default=None)


@contextlib.contextmanager
def progress_default(progress: bool | None) -> Iterator[None]:
    """Within the block, `progress=None` means `progress` (a command line's --no-progress reaching the steps that
    a caller does not hand it to)."""
    token = _DEFAULT.set(progress)
    try:
        yield
    finally:
        _DEFAULT.reset(token)


def on_terminal() -> bool:
    return sys.stderr is not None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


def progress_bar(total: int | None, progress: bool | None, desc: str) -> Any:
    """A tqdm bar counting bytes on stderr (None where none shows); `total` None: the size is not known."""
    progress = progress if progress is not None else _DEFAULT.get()
    show = progress if progress is not None else (total or 0) >= PROGRESS_BYTES and on_terminal()
    if not show:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, unit="B", unit_scale=True, desc=desc, file=sys.stderr)
