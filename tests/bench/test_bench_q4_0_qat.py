"""bench/bench_q4_0_qat.py: its Bayes ceiling is right on a hand-worked sequence and calibrated on sampled ones (the
mean of its largest posterior probability matches how often its argmax is right); and --quick runs end to end (the
trained regime): a row per model, tract's predictions equal torch's for each model (tract runs the written file, torch
the model it was written from), torch_to_nnef's own Q4_0 is what the baseline holds, and every Q4_0 .dat decodes
to the weights torch computed with. No model accuracy is asserted: the quick models are barely trained."""
from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
MODELS = ("float [f32]", "min-max Q4_0, torch_to_nnef's rule [q4_0]", "min-max Q4_0, ggml's rule (nnef_torch default) "
          "[q4_0]", "QAT Q4_0 (prepare_q4_0, LSQ) [q4_0]", "float + extra steps [f32]",
          "float + extra steps, then min-max Q4_0 (t2n rule) [q4_0]")
PROBS = (0.85, 0.1, 0.05)


def _bench():
    name = "bench_q4_0_qat"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH / "bench_q4_0_qat.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_bayes_ceiling_on_a_progression():
    # no token's successors include token + 1, so after two tokens only the stride-1 progression explains the
    # prefix; at the first position the Markov chain's top successor is the likeliest next token, and it is wrong
    successors = (np.arange(64)[:, None] + np.array([10, 20, 30])) % 64
    _, right = _bench().bayes_ceiling(np.arange(64)[None], successors, PROBS)
    assert right == 62 / 63


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bayes_ceiling_is_calibrated(seed):
    bench = _bench()
    successors = bench.grammar(seed, 64, PROBS)
    held_out = bench.sequences(np.random.default_rng(seed + 1), successors, 256, 64, PROBS, 0.0)
    expected, right = bench.bayes_ceiling(held_out, successors, PROBS)
    # right/wrong at each prediction is Bernoulli(max posterior) when the posterior is the generator's
    assert abs(expected - right) < 4 * math.sqrt(expected * (1 - expected) / held_out[:, 1:].size)
    assert 0.8 < expected < 0.95  # Markov tokens at most 0.85, progressions near 1, spans not before a repeat


@pytest.mark.slow
@pytest.mark.parametrize("regime", ["trained"])  # the regimes share every step but the corpus and sizes
def test_quick_run_agrees_with_torch_and_torch_to_nnef(tmp_path, regime):
    for package in ("torch_to_nnef", "transformers", "tract"):
        pytest.importorskip(package)
    out = tmp_path / "qat.md"
    done = subprocess.run([sys.executable, str(BENCH / "bench_q4_0_qat.py"), "--regime", regime, "--quick",
                           "--steps", "40", "--extra", "10", "--eval", "32", "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0] in MODELS:
            rows[cells[0]] = [float(cell) for cell in cells[1:]]
    assert set(rows) == set(MODELS), text
    for label, (tract_acc, nll, torch_acc, agree, size) in rows.items():
        assert 0 < tract_acc <= 1 and nll > 0 and size > 0, label
        # near-ties may flip an argmax between tract's and torch's float sums; anything more is a wrong file
        assert agree >= 0.99 and abs(tract_acc - torch_acc) <= 0.01, (label, text)
    assert rows[MODELS[1]][4] < rows[MODELS[0]][4] / 3  # Q4_0 linear weights: 4.5 bits instead of 32
    # block_quant's rule decodes to torch_to_nnef's dequantized weight, for every linear weight
    assert re.search(r"in (\d+)/\1 weights", text), text
    assert text.count("(every linear weight, exactly)") == 4, text
    assert ("expected accuracy" in text) == (regime == "trained"), text
