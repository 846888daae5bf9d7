"""`update` in generated code (spec 4.8): a variable an update writes is a buffer of the module.

During a call the variable means its old value, the update's result the new one; after the call the buffer holds
the new value. The generated code reads such a buffer once, as a copy (`read_state`), so that autograd may save
the old value for backward while the buffer is overwritten in place at the end (`write_state`). An in-place copy
into a buffer is what `torch.export` records as a buffer mutation and what `torch.compile` replays.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.fx


def read_state(buffer: torch.Tensor) -> torch.Tensor:
    """The value of a state buffer at the start of the call, safe from the write at its end."""
    return buffer.clone()


def write_state(buffer: torch.Tensor, value: Any) -> None:
    """Store the new value of a state buffer (no gradient flows into state across calls)."""
    if isinstance(value, torch.Tensor):
        buffer.copy_(value.detach())
    else:
        buffer.fill_(value)


torch.fx.node.has_side_effect(write_state)
