"""Observers against numpy: min/max, the exponential moving average of batch ranges, np.percentile (within the
histogram's bin width); per tensor and per channel along axis 0; reset; state_dict round trips; bad options."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from nnef_torch.quant.observers import MinMaxObserver, MovingAverageObserver, PercentileObserver, make_observer


def batches(seed: int = 0) -> list[torch.Tensor]:
    """Batches of shape (4, 3, 50) whose ranges move, grow, shrink and jump (the percentile histogram must grow)."""
    generator = torch.Generator().manual_seed(seed)
    scales_shifts = [(1.0, 0.0), (3.0, 1.0), (0.5, -2.0), (40.0, 10.0), (2.0, 0.0)]
    return [torch.randn(4, 3, 50, generator=generator) * scale + shift for scale, shift in scales_shifts]


def rows(array: np.ndarray, per_channel: bool) -> np.ndarray:
    array = np.asarray(array, dtype=np.float64)
    return array.reshape(array.shape[0], -1) if per_channel else array.reshape(1, -1)


def numpy_minmax(data, per_channel, **_):
    low = np.min([rows(b, per_channel).min(axis=1) for b in data], axis=0)
    high = np.max([rows(b, per_channel).max(axis=1) for b in data], axis=0)
    return low, high


def numpy_moving_average(data, per_channel, momentum=0.1, **_):
    low = high = None
    for batch in data:
        b_low, b_high = rows(batch, per_channel).min(axis=1), rows(batch, per_channel).max(axis=1)
        if low is None:
            low, high = b_low, b_high
        else:
            low = (1.0 - momentum) * low + momentum * b_low
            high = (1.0 - momentum) * high + momentum * b_high
    return low, high


def numpy_percentile(data, per_channel, percentile=99.99, **_):
    values = np.concatenate([rows(b, per_channel) for b in data], axis=1)
    return np.percentile(values, 100.0 - percentile, axis=1), np.percentile(values, percentile, axis=1)


CASES = [  # observer name, options, numpy reference
    ("minmax", {}, numpy_minmax),
    ("moving_average", {}, numpy_moving_average),
    ("moving_average", {"momentum": 0.5}, numpy_moving_average),
    ("moving_average", {"momentum": 1.0}, numpy_moving_average),
    ("percentile", {}, numpy_percentile),
    ("percentile", {"percentile": 99.0}, numpy_percentile),
    ("percentile", {"percentile": 90.0}, numpy_percentile),
    ("percentile", {"percentile": 100.0}, numpy_percentile),
]


def tolerance(observer) -> np.ndarray:
    if isinstance(observer, PercentileObserver):
        return observer.resolution().double().numpy() + 1e-5
    return np.float64(1e-5)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("name, options, reference", CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_observer_matches_numpy(name, options, reference, per_channel):
    data = batches()
    observer = make_observer(name, per_channel, **options)
    for batch in data:
        assert observer(batch) is batch
    low, high = observer.range()
    want_low, want_high = reference([b.numpy() for b in data], per_channel, **options)
    shape = (4,) if per_channel else ()
    assert low.shape == shape and high.shape == shape
    atol = tolerance(observer)
    np.testing.assert_array_less(np.abs(low.double().numpy() - want_low.reshape(shape)), atol)
    np.testing.assert_array_less(np.abs(high.double().numpy() - want_high.reshape(shape)), atol)


def test_percentile_extremes_are_exact():
    """percentile=100 gives the smallest and largest value seen, exactly."""
    data = batches(1)
    observer = PercentileObserver(percentile=100.0)
    for batch in data:
        observer(batch)
    low, high = observer.range()
    assert low.item() == min(b.min().item() for b in data)
    assert high.item() == max(b.max().item() for b in data)


def test_percentile_large_batches_bounded_memory():
    """A few million values per batch, a range that grows 1000-fold: counts stay `bins` long, the estimate stays
    within one bin of np.percentile."""
    generator = torch.Generator().manual_seed(2)
    data = [torch.randn(3_000_000, generator=generator), torch.randn(2_000_000, generator=generator) * 1000.0]
    observer = PercentileObserver(percentile=99.9, bins=4096)
    for batch in data:
        observer(batch)
    assert observer.counts.numel() == 4096
    values = np.concatenate([b.numpy().astype(np.float64) for b in data])
    low, high = observer.range()
    width = observer.resolution().item()
    assert abs(low.item() - np.percentile(values, 0.1)) <= width
    assert abs(high.item() - np.percentile(values, 99.9)) <= width


def test_percentile_constant_first_batch():
    observer = PercentileObserver(percentile=99.0)
    data = [torch.full((100,), 2.5), torch.linspace(-1.0, 4.0, 1001)]
    for batch in data:
        observer(batch)
    values = np.concatenate([b.numpy() for b in data]).astype(np.float64)
    low, high = observer.range()
    assert abs(low.item() - np.percentile(values, 1.0)) <= observer.resolution().item()
    assert abs(high.item() - np.percentile(values, 99.0)) <= observer.resolution().item()


@pytest.mark.parametrize("name", ["minmax", "moving_average", "percentile"])
def test_reset_forgets(name):
    data = batches(3)
    observer = make_observer(name, True)
    for batch in data:
        observer(batch)
    observer.reset()
    assert not observer.observed
    with pytest.raises(RuntimeError, match="no data"):
        observer.range()
    fresh = make_observer(name, True)
    for obs in (observer, fresh):
        obs(data[1])
        obs(data[3])
    for got, want in zip(observer.range(), fresh.range()):
        assert torch.equal(got, want)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("name", ["minmax", "moving_average", "percentile"])
def test_state_dict_round_trip(name, per_channel):
    """A fresh observer takes the stored (lazily shaped) statistics and then continues identically."""
    data = batches(4)
    observer = make_observer(name, per_channel)
    for batch in data[:3]:
        observer(batch)
    fresh = make_observer(name, per_channel)
    fresh.load_state_dict(observer.state_dict())
    for got, want in zip(fresh.range(), observer.range()):
        assert torch.equal(got, want)
    for obs in (observer, fresh):
        obs(data[3])
    for got, want in zip(fresh.range(), observer.range()):
        assert torch.equal(got, want)


def test_no_gradient_recorded():
    x = torch.randn(5, 6, requires_grad=True)
    observer = MinMaxObserver()
    y = observer(x)
    assert y is x and not observer.max.requires_grad


def test_empty_tensor_is_ignored():
    observer = MovingAverageObserver()
    observer(torch.empty(0, 3))
    assert not observer.observed


def test_channel_count_must_not_change():
    observer = MinMaxObserver(per_channel=True)
    observer(torch.randn(3, 4))
    with pytest.raises(ValueError, match="3 channels before, now 5"):
        observer(torch.randn(5, 4))


@pytest.mark.parametrize("name, options, match", [
    ("histogram", {}, "unknown observer 'histogram'"),
    ("moving_average", {"momentum": 0.0}, "momentum"),
    ("moving_average", {"momentum": 1.5}, "momentum"),
    ("percentile", {"percentile": 40.0}, "percentile"),
    ("percentile", {"bins": 1}, "bins"),
    ("minmax", {"momentum": 0.1}, "does not take options"),
])
def test_bad_observer_options(name, options, match):
    with pytest.raises(ValueError, match=match):
        make_observer(name, False, **options)
