"""Hypothesis settings shared by the fuzz tests.

`fuzz(n)` runs `n` examples times NNEF_TORCH_FUZZ_SCALE (default 1, what CI runs; a long local run sets 50 or
more). Examples have no deadline: the machines are shared, and cost is measured by tests/test_hostile_inputs.py.
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SCALE = max(1, int(os.environ.get("NNEF_TORCH_FUZZ_SCALE", "1")))
_BASE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                       HealthCheck.filter_too_much])


def fuzz(examples: int) -> settings:
    return settings(_BASE, max_examples=examples * SCALE)
