"""bench/bench_dynamic_batch.py runs end to end: every model at batch 1 and 7 in nnef.Session, tract and nnef_torch
within float32 rounding of torch, and a timing row per model."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_every_consumer_runs_every_model_at_both_batches(tmp_path):
    out = tmp_path / "dynamic.md"
    done = subprocess.run([sys.executable, str(BENCH / "bench_dynamic_batch.py"), "--reps", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in out.read_text().splitlines()
            if line.startswith("| ") and line.split("|")[2].strip().isdigit()]
    assert len(rows) == 6 and {row.split("|")[2].strip() for row in rows} == {"1", "7"}
    for row in rows:
        for cell in row.split("|")[3:6]:
            relative = float(cell.split("/")[1])
            assert relative < 1e-5, row
    timings = [line for line in out.read_text().splitlines() if line.endswith("x |")]
    assert len(timings) == 3
