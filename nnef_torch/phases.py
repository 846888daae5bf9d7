"""One line on stderr per long phase of work (tracing, decomposing, laying out a drawing), with its time:

    tracing Net at batch 11 with torch.export ... (12.3 s)

`reporting(progress)` sets the mode for the work inside it: True prints every phase as it starts, False none, and
None (the default, also where no `reporting` is open) prints a phase on a terminal only once it has run for a
second, so that small models stay quiet. A phase begun inside another is part of it and prints nothing. The mode is
a context variable: `nnef_torch.export(progress=...)` sets it once and the phases deep inside read it, without an
option passed through every layer.
"""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

SLOW = 1.0  # seconds a phase runs before its line shows, with progress=None on a terminal


# (progress, phases open): the mode of the work in this context
_MODE: ContextVar[tuple[bool | None, int]] = ContextVar("nnef_torch_phases", default=(None, 0))


@contextmanager
def reporting(progress: bool | None) -> Iterator[None]:
    """Phase lines for the work inside: True always, False never, None on a terminal for phases over a second.
    None inside another `reporting` keeps the outer mode (`save` reports for the `export` it calls)."""
    current, depth = _MODE.get()
    if progress is None and current is not None:
        yield
        return
    token = _MODE.set((progress, depth))
    try:
        yield
    finally:
        _MODE.reset(token)


@contextmanager
def phase(text: str) -> Iterator[None]:
    """One phase of work, `text` saying what it does ('tracing Net with torch.export'); see the module's text."""
    progress, depth = _MODE.get()
    token = _MODE.set((progress, depth + 1))
    line = None
    if depth == 0 and (progress or (progress is None and _on_terminal())):
        line = _Line(text, 0.0 if progress else SLOW)
    try:
        yield
    except BaseException:
        if line is not None:
            line.end("stopped")
        raise
    else:
        if line is not None:
            line.end(None)
    finally:
        _MODE.reset(token)


class _Line:
    """A phase's line: its text at once or after `delay` seconds (from a timer thread), its time at the end."""

    def __init__(self, text: str, delay: float):
        self.text = text
        self.start = time.perf_counter()
        self.shown = self.done = False
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None
        if delay <= 0:
            self._show()
        else:
            self.timer = threading.Timer(delay, self._show)
            self.timer.daemon = True
            self.timer.start()

    def _show(self) -> None:
        with self.lock:
            if not self.shown and not self.done:
                self.shown = True
                _write(f"{self.text} ...")

    def end(self, failed: str | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        with self.lock:
            if self.shown:
                seconds = time.perf_counter() - self.start
                _write(f" ({failed + ' after ' if failed else ''}{seconds:.1f} s)\n")
            self.done = True


def _write(text: str) -> None:
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):  # a closed or broken stream: progress is never worth an error
        pass


def _on_terminal() -> bool:
    stream = sys.stderr
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        return False
