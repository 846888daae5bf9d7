"""bench/bench_load_scaling.py: the generated folders are the graphs they claim (operation counts as the Khronos
parser reads them, loadable by us with the output the Khronos interpreter gives), and the report states a rate per
size and the linearity ratio. Timings are never asserted."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
nnef = pytest.importorskip("nnef", reason="the Khronos parser (test extra) counts the generated operations")

import bench_load_scaling  # noqa: E402

import nnef_torch  # noqa: E402

pytestmark = pytest.mark.slow


def test_generated_folder_loads_and_matches_the_khronos_reading(tmp_path):
    count = bench_load_scaling.write_folder(str(tmp_path), 60)
    graph = nnef.load_graph(str(tmp_path))
    assert count == len(graph.operations) >= 60
    module = nnef_torch.load(str(tmp_path))
    x = torch.randn(1, 16, 32, 32)
    out = module(x)
    assert out.shape == (1, 16, 32, 32)
    torch.testing.assert_close(out.sum(dim=1), torch.ones(1, 32, 32))  # the graph ends in a softmax over axis 1


def test_report_gives_rates_and_the_linearity_ratio():
    rows = bench_load_scaling.measure([30, 90], repeat=1)
    assert [count for count, _, _ in rows] == sorted(count for count, _, _ in rows)
    lines = bench_load_scaling.report(rows)
    assert len([line for line in lines if line.startswith("| ") and "ops/s" not in line]) == 2
    assert "(1.00 = linear)" in lines[-1]
