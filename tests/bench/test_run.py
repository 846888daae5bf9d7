"""bench/run.py --smoke: the one benchmark entry point runs end to end on a tiny model and writes a results file with
the date, the versions and one row per metric. Timings are never asserted; each anchor's cells are checked only
where its package is installed (the anchors are in the `bench` extra, not the `test` extra)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench"
METRICS = ("load", "forward b1", "forward b8", "train step", "export")
# table column -> (packages it needs, metrics it runs)
ANCHORS = {
    "khronos": (("nnef_tools",), ("load", "forward b1", "forward b8", "load cold")),
    "tract": (("tract",), ("load", "forward b1", "load cold")),
    "t2n": (("torch_to_nnef",), ("export",)),
    "onnx+nt": (("onnx", "nnef_tools"), ("export",)),
}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bench") / "results.md"
    done = subprocess.run([sys.executable, str(BENCH / "run.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.with_suffix(".json").read_text())
    return {"stdout": done.stdout, "markdown": out.read_text(), "json": data}


def _row(smoke: dict, metric: str) -> dict:
    rows = [row for row in smoke["json"]["rows"] if row["model"] == "tiny" and row["metric"] == metric]
    assert len(rows) == 1, f"{len(rows)} rows for {metric}"
    return rows[0]


def test_printed_table_has_a_row_per_metric(smoke):
    header = next(line for line in smoke["stdout"].splitlines() if line.startswith("| model |"))
    assert all(name in header for name in ("ours", "native torch", "Khronos interp.", "tract", "t2n", "onnx+nt"))
    for metric in METRICS:
        assert f"| tiny | {metric} |" in smoke["stdout"]
        assert f"| tiny | {metric} |" in smoke["markdown"]


def test_ours_and_native_are_measured_for_every_metric(smoke):
    for metric in METRICS:
        row = _row(smoke, metric)
        assert not row["failures"].get("ours") and not row["failures"].get("native"), row["failures"]
        assert row["seconds"]["ours"] > 0 and row["seconds"]["native"] > 0


def test_results_file_records_date_machine_and_versions(smoke):
    data, text = smoke["json"], smoke["markdown"]
    assert data["started"][:4].isdigit() and data["started"][:10] in text
    assert "--smoke" in data["command"]
    assert data["machine"]["cores"].isdigit()
    for package in ("python", "torch", "nnef-torch", "nnef", "nnef_tools", "tract", "torch_to_nnef", "onnx"):
        assert package in data["versions"]
        assert f"- {package}: " in text


def test_the_runtimes_agree_with_the_twin(smoke):
    """The benchmark compares its runtimes' outputs with the hand-written twin before timing them."""
    note = next(text for text in smoke["json"]["notes"] if text.startswith("tiny: max |out - twin|"))
    assert "DIFFERS" not in note and "ours " in note


@pytest.mark.parametrize("column", list(ANCHORS))
def test_installed_anchor_is_measured(smoke, column):
    packages, metrics = ANCHORS[column]
    for package in packages:
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} (the `bench` extra) is not installed")
    for metric in metrics:
        row = _row(smoke, metric)
        assert column not in row["failures"], row["failures"][column]
        assert row["seconds"][column] > 0


def test_cold_load_and_the_stages_of_a_load_are_reported(smoke):
    row = _row(smoke, "load cold")
    assert not row["failures"].get("ours") and row["seconds"]["ours"] > 0
    assert "| tiny | load cold |" in smoke["stdout"]
    note = next(text for text in smoke["json"]["notes"] if text.startswith("tiny: load stages"))
    for stage in ("parse", "lower", "generate", "rest", "total", "read floor", "cold load / read floor"):
        assert stage in note, note
