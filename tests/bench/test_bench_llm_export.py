"""bench/bench_llm_export.py --quick runs end to end: its table has every metric row for both weight kinds, and
the f32 file of each exporter (ours, torch_to_nnef_llm's LLMExporter) gives the same greedy tokens in tract as
transformers' own generate()."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch_to_nnef_llm.exporter")
pytest.importorskip("tokenizers")
pytest.importorskip("transformers")
pytest.importorskip("tract")

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench"
METRICS = ("export time (s)", "peak RSS of the export process (MB)", "peak RSS during the export call (MB)",
           "file size (MB)", "tract prefill (ms)", "tract decode, median ms/token", "tract decode, min ms/token",
           "tokens agreeing with generate()")


def test_quick_run_prints_every_row(tmp_path):
    out = tmp_path / "llm.md"
    done = subprocess.run([sys.executable, str(BENCH / "bench_llm_export.py"), "--quick", "--decode", "4",
                           "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {}
    for line in out.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 5 and cells[1] in ("f32", "q4_0"):
            rows[cells[0], cells[1]] = cells[2:]
    assert set(rows) == {(metric, weights) for metric in METRICS for weights in ("f32", "q4_0")}
    ours, theirs, _ = rows["tokens agreeing with generate()", "f32"]
    assert theirs == "5/5", out.read_text()  # torch_to_nnef_llm is installed, so its column ran
    assert ours == "5/5", out.read_text()
