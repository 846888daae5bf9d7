"""Parameters and inputs of the model-zoo fixtures, made from seeds, so that only the symbol and the output need to be
committed. Both the fixture generator (MXNet's venv, numpy 1.23) and the tests (numpy 2.x) import this module: it
uses nothing but `numpy.random.RandomState`, whose streams numpy keeps fixed across versions.

Each array has its own stream, seeded from the net's seed and the array's name, so an array does not depend on the
others. Values are chosen so that deep nets stay finite without the statistics of real training: weights are
He-scaled normals (variance 2 / fan-in), BatchNorm scales and running variances lie in [0.5, 1.5], biases, shifts
and running means are small normals.
"""
from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import numpy as np


def _stream(seed: int, name: str) -> np.random.RandomState:
    return np.random.RandomState((seed * 1_000_003 + zlib.crc32(name.encode("utf-8"))) % (2 ** 32))


def zoo_param(name: str, shape: Sequence[int], seed: int) -> np.ndarray:
    """One parameter, by the Gluon naming convention of its role (`..._weight`, `..._gamma`, `..._running_var`)."""
    shape = tuple(int(extent) for extent in shape)
    rs = _stream(seed, name)
    if name.endswith(("_gamma", "_running_var", "_moving_var")):
        values = rs.uniform(0.5, 1.5, shape)
    elif name.endswith(("_beta", "_bias", "_running_mean", "_moving_mean")):
        values = rs.normal(0.0, 0.1, shape)
    elif name.endswith("_alpha"):  # PReLU slopes
        values = rs.uniform(0.05, 0.3, shape)
    else:  # weights: fan-in is everything but the output axis
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        values = rs.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), shape)
    return values.astype(np.float32)


def zoo_params(shapes: Mapping[str, Sequence[int]], seed: int) -> dict[str, np.ndarray]:
    """Every parameter of a net, by name."""
    return {name: zoo_param(name, shape, seed) for name, shape in shapes.items()}


def zoo_input(shape: Sequence[int], seed: int) -> np.ndarray:
    """The input image batch: standard normals."""
    return np.random.RandomState(seed).standard_normal(tuple(int(e) for e in shape)).astype(np.float32)


def checksum(arrays: Mapping[str, np.ndarray]) -> float:
    """A number that changes when any array does: the generator records it, the tests compare."""
    return float(sum(float(np.abs(array.astype(np.float64)).sum()) * (i + 1)
                     for i, (_, array) in enumerate(sorted(arrays.items()))))
