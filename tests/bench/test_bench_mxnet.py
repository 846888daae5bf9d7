"""bench/bench_mxnet.py --smoke: the MXNet ResNet-50 benchmark runs end to end (symbol from bench/data, seeded .params
written by the benchmark, hand-written twin) and prints the forward ratio against the twin and the load ratios against
the floors of reading the .params bytes. Timings are never asserted; MXNet is not needed."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench"
RATIO = re.compile(r"\(\d+\.\d\dx\)")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bench_mxnet") / "results.md"
    done = subprocess.run([sys.executable, str(BENCH / "bench_mxnet.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"stdout": done.stdout, "markdown": out.read_text(), "json": json.loads(out.with_suffix(".json").read_text())}


def _cells(stdout: str, metric: str) -> list[str]:
    line = next(line for line in stdout.splitlines() if line.startswith("| resnet50_v1") and f"| {metric} |" in line)
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_prints_the_forward_ratio_against_the_twin(smoke):
    header = next(line for line in smoke["stdout"].splitlines() if line.startswith("| model |"))
    assert [cell.strip() for cell in header.strip().strip("|").split("|")][2:] == \
        ["ours", "torch twin", "read() floor", "np.fromfile floor"]
    cells = _cells(smoke["stdout"], "forward, 1 thread")
    assert cells[0] == "resnet50_v1 b1"
    assert cells[2] and not RATIO.search(cells[2])  # ours: a time
    assert RATIO.search(cells[3])  # the twin: a time and twin / ours


@pytest.mark.parametrize("metric", ["load cold, 1 thread", "load warm, 1 thread"])
def test_prints_the_load_ratios_against_the_floors(smoke, metric):
    cells = _cells(smoke["stdout"], metric)
    assert cells[2] and RATIO.search(cells[4]) and RATIO.search(cells[5])
    row = next(row for row in smoke["json"]["rows"] if row["metric"] == metric)
    assert set(row["seconds"]) == {"ours", "read", "fromfile"} and min(row["seconds"].values()) > 0


def test_ours_agrees_with_the_twin_before_timing(smoke):
    note = next(text for text in smoke["json"]["notes"] if text.startswith("resnet50_v1: max |ours - twin|"))
    assert "batch 1 " in note and "DIFFERS" not in note
    assert not any(row["flagged"] for row in smoke["json"]["rows"])


def test_notes_give_the_load_breakdown_and_memory(smoke):
    notes = smoke["json"]["notes"]
    assert any(text.startswith("load, 1 thread: ours / read() floor: cold ") for text in notes)
    breakdown = next(text for text in notes if text.startswith("load breakdown, 1 thread"))
    assert ".params parse" in breakdown and "rest" in breakdown
    assert any(text.startswith("load memory, 1 thread: peak RSS") for text in notes)


def test_results_file_records_the_run(smoke):
    data, text = smoke["json"], smoke["markdown"]
    assert "--smoke" in data["command"] and data["command"] in text
    assert data["machine"]["load average at start (1, 5, 15 min)"] and data["load_end"]
    assert "load average at start" in smoke["stdout"] and "at end" in smoke["stdout"]
    for package in ("python", "torch", "nnef-torch"):
        assert f"- {package}: " in text
    assert "| resnet50_v1 b1 | forward, 1 thread |" in text
