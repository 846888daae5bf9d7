"""The options of reading and importing a model, as values: built once at the API edge (`nnef_torch.load`, the
command line), stored in the module's `ModelInfo`, and used as they are to open its source again (viewer, writers,
`materialize`)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def _frozen_mapping(value: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    if not value:
        return ()
    return tuple((str(name), tuple(shape) if isinstance(shape, (list, tuple)) else shape)
                 for name, shape in value.items())


@dataclass(frozen=True)
class ReadOptions:
    """How a model's files are read into an IR graph.

    format: 'nnef' or a front end's name (None: told from the content); params: a foreign model's weights (a path
    or a mapping); input_shapes: new shapes of graph inputs by name; inputs, outputs: a LightNet model's tensors;
    batch_size, batch_axes: the batch of an NNEF model's inputs; lenient: read producers' deviations with a warning.
    """

    format: str | None = None
    params: Any = None
    input_shapes: tuple[tuple[str, Any], ...] = ()
    inputs: tuple[str, ...] | None = None
    outputs: tuple[str, ...] | None = None
    batch_size: int | None = None
    batch_axes: tuple[tuple[str, int | None], ...] = ()
    lenient: bool = True

    @classmethod
    def of(cls, *, format: str | None = None, params: Any = None, input_shapes: Mapping[str, Any] | None = None,
           inputs: Sequence[str] | None = None, outputs: Sequence[str] | None = None, batch_size: int | None = None,
           batch_axes: Mapping[str, int | None] | None = None, lenient: bool = True) -> ReadOptions:
        """The options from `load`'s keywords."""
        return cls(format, params, _frozen_mapping(input_shapes), None if inputs is None else tuple(inputs),
                   None if outputs is None else tuple(outputs), batch_size, _frozen_mapping(batch_axes),
                   bool(lenient))

    @property
    def shapes(self) -> dict[str, list[int]] | None:
        """input_shapes as a dict of lists (None when none were given)."""
        return {name: list(shape) if isinstance(shape, tuple) else shape for name, shape in self.input_shapes} or None

    @property
    def axes(self) -> dict[str, int | None] | None:
        return dict(self.batch_axes) or None

    def replace(self, **changes: Any) -> ReadOptions:
        if "input_shapes" in changes:
            changes["input_shapes"] = _frozen_mapping(changes["input_shapes"])
        if "batch_axes" in changes:
            changes["batch_axes"] = _frozen_mapping(changes["batch_axes"])
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class ImportOptions:
    """How an IR graph becomes a torch module: where and in which dtype its tensors live, the user's kernels for
    operations (by NNEF name), the fusion passes to run, and whether to show progress."""

    device: torch.device | None = None
    dtype: torch.dtype | None = None
    custom_ops: Mapping[str, Callable[..., Any]] | None = None
    fuse: bool | Collection[str] = True
    progress: bool | None = None

    @classmethod
    def of(cls, *, device: torch.device | str | int | None = None, dtype: torch.dtype | None = None,
           custom_ops: Mapping[str, Callable[..., Any]] | None = None, fuse: bool | Collection[str] = True,
           progress: bool | None = None) -> ImportOptions:
        import torch
        if dtype is not None and not dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating dtype, not {dtype}")
        return cls(torch.device(device) if device is not None else None, dtype, dict(custom_ops or {}) or None,
                   fuse if isinstance(fuse, bool) else tuple(fuse), progress)


__all__ = ["ImportOptions", "ReadOptions"]
