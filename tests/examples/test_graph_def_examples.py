"""The graph_def examples run end to end: the backbone learns its new task and is saved beside the original network,
which the Khronos executor runs with the tuned weights; the frozen, re-batched model equals torch at every batch in
our module, the Khronos executor and tract."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from exporter.consumers import run_tract
from formats.khronos_session import run_khronos

from examples.test_examples import run_example

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return run_example("graph_def_backbone", ["--out", str(tmp_path_factory.mktemp("backbone"))])


@pytest.fixture(scope="module")
def deploy(tmp_path_factory):
    return run_example("graph_def_deploy", ["--out", str(tmp_path_factory.mktemp("deploy")), "--batches", "1,8"])


def test_backbone_learns_the_new_task(backbone):
    assert backbone["accuracy_before"] < 75.0 and backbone["accuracy_after"] > 90.0
    assert backbone["losses"][-1] < backbone["losses"][0]


def test_saved_backbone_computes_the_tuned_features(backbone):
    assert backbone["max_difference"] <= 1e-6 and backbone["shared"]
    names = sorted(p.name for p in backbone["folder"].iterdir())
    assert {"graph.nnef", "backbone.nnef", "conv1", "conv2", "fc"} <= set(names)


def test_khronos_runs_the_original_network_with_the_tuned_weights(backbone):
    folder, network = backbone["folder"], backbone["graph"].default_graph()
    module = network.module()
    module.set_quantization(False)  # the Khronos executor ignores graph.quant
    for image in backbone["test_data"][0][:4]:  # the model declares batch 1
        with torch.no_grad():
            expected = module(image[None]).numpy()
        (found,) = run_khronos(folder, [image[None].numpy()])
        np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-6)


def _at_batch(folder: Path, batch: int, scratch: Path) -> Path:
    copy = scratch / f"batch{batch}"
    shutil.copytree(folder, copy)
    text = (copy / "graph.nnef").read_text().replace("shape = [2, 3, 16, 16]", f"shape = [{batch}, 3, 16, 16]")
    (copy / "graph.nnef").write_text(text)
    return copy


def test_frozen_model_has_no_trainable_parameters_and_equals_torch(deploy):
    assert deploy["trainable"] == 0
    assert set(deploy["differences"]) == {1, 8} and max(deploy["differences"].values()) <= 1e-5


@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("consumer", ["khronos", "tract"])
def test_consumers_run_the_deployed_model_at_each_batch(deploy, tmp_path, batch, consumer):
    folder = _at_batch(deploy["folder"], batch, tmp_path)
    x = torch.randn(batch, 3, 16, 16)
    with torch.no_grad():
        expected = deploy["module"](x).numpy()
    run = run_khronos if consumer == "khronos" else run_tract
    (found,) = run(folder, [x.numpy()])
    np.testing.assert_allclose(found, expected, rtol=1e-4, atol=1e-5)
