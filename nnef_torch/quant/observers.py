"""Observers: modules that watch the tensors passing through a fake quantizer and propose its range.

Each observer records a tensor in `forward(x)` (no gradient; x is returned unchanged) and answers `range()` with
`(low, high)` tensors: 0-d per tensor, or vectors along axis 0 with `per_channel=True` (the layout of FakeQuantize's
per-channel parameters). `reset()` forgets what was seen. Statistics live in buffers, so they travel with
`state_dict`; their shapes are fixed by the first tensor seen (a vector per channel), and loading a state dict
resizes them to the stored shapes.

- `MinMaxObserver`: the smallest and largest value seen.
- `MovingAverageObserver`: an exponential moving average of each batch's min and max; the first batch initialises.
- `PercentileObserver`: the given lower and upper percentiles of every value seen, from a fixed-size histogram.
"""
from __future__ import annotations

import math
from typing import Any

import torch

NAMES = ("minmax", "moving_average", "percentile")


def _empty() -> torch.Tensor:
    return torch.empty(0)


class Observer(torch.nn.Module):
    """The common part: per-channel layout, the count of batches seen, and state-dict resizing."""

    _stats: tuple[str, ...] = ()  # buffers whose shape is set by the first tensor seen

    def __init__(self, per_channel: bool = False):
        super().__init__()
        self.per_channel = bool(per_channel)
        self.register_buffer("batches", torch.zeros((), dtype=torch.int64))
        for name in self._stats:
            self.register_buffer(name, _empty())

    @property
    def observed(self) -> bool:
        """Whether any values have been recorded since construction or the last reset."""
        return int(self.batches) > 0

    def reset(self) -> None:
        self.batches.zero_()
        for name in self._stats:
            setattr(self, name, _empty().to(self.batches.device))

    def _rows(self, x: torch.Tensor) -> torch.Tensor:
        """x as (channels, values): axis 0 per channel, one row per tensor."""
        if self.per_channel:
            if x.dim() == 0:
                raise ValueError("a per-channel observer needs tensors with an axis 0 (channels); got a scalar")
            rows = x.reshape(x.shape[0], -1)
        else:
            rows = x.reshape(1, -1)
        if self.observed and rows.shape[0] != self._channels():
            raise ValueError(f"observer saw {self._channels()} channels before, now {rows.shape[0]} "
                             f"(per-channel statistics are along axis 0)")
        return rows

    def _channels(self) -> int:
        return int(getattr(self, self._stats[0]).shape[0]) if self.per_channel else 1

    def _out(self, value: torch.Tensor) -> torch.Tensor:
        """A (channels,) statistic as the user sees it: a vector per channel, else 0-d."""
        value = value.to(torch.float32)
        return value if self.per_channel else value.reshape(())

    def _store(self, name: str, value: torch.Tensor) -> None:
        old = getattr(self, name)
        if old.shape == value.shape and old.dtype == value.dtype:
            old.copy_(value)
        else:
            setattr(self, name, value.clone())

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() == 0:
            return x
        self._record(self._rows(x.detach()))
        self.batches += 1
        return x

    def _record(self, rows: torch.Tensor) -> None:
        raise NotImplementedError

    def range(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.observed:
            raise RuntimeError(f"{type(self).__name__} has seen no data yet; run tensors through it first")
        return self._range()

    def _range(self) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        for name in self._stats:  # statistics take the stored shape (set lazily by the first tensor seen)
            stored = state_dict.get(prefix + name)
            if isinstance(stored, torch.Tensor) and stored.shape != getattr(self, name).shape:
                setattr(self, name, torch.empty_like(stored, device=self.batches.device))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return "per_channel" if self.per_channel else ""


class MinMaxObserver(Observer):
    """The smallest and largest value seen (per channel along axis 0 with `per_channel`)."""

    _stats = ("min", "max")

    def _record(self, rows: torch.Tensor) -> None:
        low, high = rows.amin(dim=1).float(), rows.amax(dim=1).float()
        if self.observed:
            low, high = torch.minimum(self.min, low), torch.maximum(self.max, high)
        self._store("min", low)
        self._store("max", high)

    def _range(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._out(self.min), self._out(self.max)


class MovingAverageObserver(Observer):
    """An exponential moving average of each batch's min and max: m <- (1 - momentum) * m + momentum * batch_min
    (likewise for max); the first batch sets both."""

    _stats = ("min", "max")

    def __init__(self, per_channel: bool = False, momentum: float = 0.1):
        if not 0.0 < float(momentum) <= 1.0:
            raise ValueError(f"momentum must be in (0, 1], not {momentum}")
        super().__init__(per_channel)
        self.momentum = float(momentum)

    def _record(self, rows: torch.Tensor) -> None:
        low, high = rows.amin(dim=1).float(), rows.amax(dim=1).float()
        if self.observed:
            low = torch.lerp(self.min, low, self.momentum)
            high = torch.lerp(self.max, high, self.momentum)
        self._store("min", low)
        self._store("max", high)

    def _range(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._out(self.min), self._out(self.max)

    def extra_repr(self) -> str:
        return ", ".join(filter(None, [super().extra_repr(), f"momentum={self.momentum}"]))


class PercentileObserver(Observer):
    """The (100 - percentile)-th and percentile-th percentiles of every value seen, as np.percentile's default
    (linear) method computes them, estimated from a fixed-size histogram.

    Memory is bounded: `bins` int64 counts per channel whatever the number of values (one bincount per batch, so
    a few million values per batch are cheap). The histogram spans the values seen; when a batch falls outside it,
    the span grows by a whole factor and old bins merge exactly into new ones, so no count is ever split. Each
    sorted value is placed inside its bin, so the estimate is within one bin width, (span of the histogram) / bins,
    of np.percentile, and it never leaves the range of the values seen.
    """

    _stats = ("min", "max", "low", "width", "counts")

    def __init__(self, per_channel: bool = False, percentile: float = 99.99, bins: int = 2048):
        if not 50.0 < float(percentile) <= 100.0:
            raise ValueError(f"percentile must be in (50, 100], not {percentile}")
        if int(bins) < 2:
            raise ValueError(f"bins must be at least 2, not {bins}")
        super().__init__(per_channel)
        self.percentile, self.bins = float(percentile), int(bins)

    def _record(self, rows: torch.Tensor) -> None:
        rows = rows.to(torch.float64)
        low, high = rows.amin(dim=1), rows.amax(dim=1)
        if not self.observed:
            span = high - low
            tiny = torch.clamp(torch.maximum(low.abs(), high.abs()), min=1.0) * 2.0 ** -40
            self._store("low", low)
            self._store("width", torch.where(span > 0, span, tiny) / self.bins)
            self._store("counts", torch.zeros(rows.shape[0], self.bins, dtype=torch.int64, device=rows.device))
        else:
            self._grow(low, high)
            low, high = torch.minimum(self.min.double(), low), torch.maximum(self.max.double(), high)
        self._store("min", low)
        self._store("max", high)
        index = torch.floor((rows - self.low[:, None]) / self.width[:, None]).clamp_(0, self.bins - 1).long()
        index += torch.arange(rows.shape[0], device=rows.device)[:, None] * self.bins
        self.counts += torch.bincount(index.reshape(-1), minlength=self.counts.numel()).view_as(self.counts)

    def _grow(self, low: torch.Tensor, high: torch.Tensor) -> None:
        """Widen the histogram to cover [low, high]: bin width times a whole factor k, left edge moved down by a
        whole number m of new bins, so old bin i lands entirely in new bin m + i // k."""
        width, bins = self.width, self.bins
        need_low = torch.minimum(self.low, low)
        need_high = torch.maximum(self.low + bins * width, high)
        # aligning the left edge costs less than one new bin, so bins - 1 new bins always cover the span
        factor = torch.clamp(torch.ceil((need_high - need_low) / ((bins - 1) * width)), min=1.0)
        while True:  # only rounding can leave a channel short
            shift = torch.ceil((self.low - need_low) / (width * factor))
            new_low = self.low - shift * width * factor
            short = new_low + bins * width * factor < need_high
            if not bool(short.any()):
                break
            factor = factor + short.to(factor.dtype) * torch.ceil(factor / bins)
        if bool((factor == 1.0).all()) and bool((shift == 0.0).all()):
            return
        target = shift.long()[:, None] + torch.arange(bins, device=width.device)[None, :] // factor.long()[:, None]
        target.clamp_(max=bins - 1)
        counts = torch.zeros_like(self.counts).scatter_add_(1, target, self.counts)
        self._store("counts", counts)
        self._store("low", new_low)
        self._store("width", width * factor)

    def _value(self, rank: torch.Tensor) -> torch.Tensor:
        """The estimated value of the rank-th smallest value seen (integer ranks, per channel): inside its bin, at
        the centre of its share of the bin (the smallest and largest exactly)."""
        cumulative = torch.cumsum(self.counts, dim=1)
        where = torch.searchsorted(cumulative, rank[:, None].long(), right=True).clamp_(max=self.bins - 1)
        count = self.counts.gather(1, where)[:, 0].double()
        before = cumulative.gather(1, where)[:, 0].double() - count
        inside = (rank - before + 0.5) / count.clamp(min=1.0)
        value = self.low + (where[:, 0].double() + inside) * self.width
        low, high = self.min.double(), self.max.double()
        value = torch.minimum(torch.maximum(value, low), high)
        last = self.counts.sum(dim=1).double() - 1.0
        return torch.where(rank <= 0.0, low, torch.where(rank >= last, high, value))  # the extremes are known

    def _quantile(self, percent: float) -> torch.Tensor:
        total = self.counts.sum(dim=1).double()
        rank = percent / 100.0 * (total - 1.0)
        below = torch.floor(rank)
        above = torch.minimum(below + 1.0, total - 1.0)
        first, second = self._value(below), self._value(above)
        return first + (rank - below) * (second - first)

    def _range(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._out(self._quantile(100.0 - self.percentile)), self._out(self._quantile(self.percentile))

    def resolution(self) -> torch.Tensor:
        """The current bin width (per channel with `per_channel`): the estimate's error bound."""
        return self._out(self.width) if self.observed else torch.tensor(math.inf)

    def extra_repr(self) -> str:
        return ", ".join(filter(None, [super().extra_repr(), f"percentile={self.percentile}", f"bins={self.bins}"]))


OBSERVERS: dict[str, type[Observer]] = {"minmax": MinMaxObserver, "moving_average": MovingAverageObserver,
                                        "percentile": PercentileObserver}


def make_observer(name: str, per_channel: bool = False, **options: Any) -> Observer:
    """The observer called `name` ("minmax", "moving_average" or "percentile"); options go to its constructor
    (momentum for moving_average; percentile, bins for percentile)."""
    if name not in OBSERVERS:
        raise ValueError(f"unknown observer {name!r}; expected one of {', '.join(NAMES)}")
    try:
        return OBSERVERS[name](per_channel, **options)
    except TypeError as error:
        raise ValueError(f"observer {name!r} does not take options {sorted(options)}: {error}") from None


__all__ = ["MinMaxObserver", "MovingAverageObserver", "NAMES", "OBSERVERS", "Observer", "PercentileObserver",
           "make_observer"]
