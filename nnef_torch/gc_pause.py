"""Pausing Python's cyclic garbage collector while building large acyclic structures (tokens, trees, graphs).

The collector would otherwise rescan the growing heap many times over; reference counting still frees memory.
"""
from __future__ import annotations

import functools
import gc
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


def gc_paused(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()
    return wrapper  # type: ignore[return-value]
