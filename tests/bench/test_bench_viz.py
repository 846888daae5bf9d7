"""bench/bench_viz.py --smoke: the drawing benchmark runs end to end and prints every stage against the Khronos
parser; its generated graph is one the Khronos parser reads with the operation count it claims."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nnef
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
from bench_viz import generated_text  # noqa: E402

pytestmark = pytest.mark.slow


def test_generated_graph_has_the_operations_asked_for():
    graph = nnef.parse_string(generated_text(300), lowered=["unit"])
    assert sum(1 for op in graph.operations if op.name not in ("external", "variable")) == 300


def test_smoke_run_prints_every_stage_with_its_ratio(tmp_path):
    out = tmp_path / "viz.md"
    done = subprocess.run([sys.executable, str(BENCH / "bench_viz.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split("|")[1].strip().split(" ")[0] for row in rows][:3] == ["Khronos", "NNEF", "IR"]
    assert all(row.rstrip(" |").endswith("x") for row in rows) and len(rows) == 10
    assert out.read_text() == done.stdout.rstrip("\n") + "\n"
