"""examples/lora_tract_llm.py: LoRA adapters on a Q4_0 language model read from a tract file, merged and shipped
back. Its claims are checked against tract running the shipped folder and against the files themselves."""
from __future__ import annotations

import numpy as np
import pytest

from examples.test_examples import run_example

pytestmark = pytest.mark.slow  # about 25 s on one thread: an export, 120 steps, decoding in torch and tract

pytest.importorskip("transformers", reason="the `transformers` package (test extra) is not installed")
pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    return run_example("lora_tract_llm", ["--out", str(tmp_path_factory.mktemp("lora"))])


def test_the_adapters_learn_the_cycle(tuned):
    losses = tuned["losses"]
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) - 0.5
    assert len(tuned["adapted"]) == 14  # 7 projections in each of 2 layers
    assert tuned["followed_merged"] >= 0.9


def test_tract_runs_the_shipped_file_as_nnef_torch_reads_it(tuned):
    assert tuned["tract"] == tuned["reread"]  # same Q4_0 weights, two independent runtimes
    assert tuned["tract_before"] == tuned["before"]  # and the file as exported: the baseline is tract's too


def test_tract_follows_the_trained_pattern_better_than_before(tuned):
    # a random model continues the cycle by chance (measured: 2% of tokens); the shipped one follows it
    assert tuned["followed_tract_before"] <= 0.2
    assert tuned["followed_tract"] >= 0.8
    assert tuned["followed_tract"] > tuned["followed_tract_before"] + 0.5


def test_only_the_adapted_weights_change_and_the_graph_keeps_its_symbols(tuned):
    source, folder = tuned["source"], tuned["folder"]
    assert sorted(tuned["changed"]) == sorted(name.replace(".", "/") + ".dat" for name in tuned["adapted"])
    text = (folder / "graph.nnef").read_text()
    assert text == (source / "graph.nnef").read_text()
    assert "extension tract_symbol S;" in text and "extension tract_symbol P;" in text
