"""Writing an exported model: atomic (an interrupted save leaves the previous model and no temporary files), folders
and .tgz archives read back by nnef_torch and the Khronos parser, a progress bar on request, wrapped modules
(DistributedDataParallel, torch.compile) saved as the module inside, and tensors streamed one at a time."""
from __future__ import annotations

import os
import tarfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import nnef_torch
from exporter.consumers import khronos_parse
from nnef_torch.format import tensor_file

torch.manual_seed(0)


def small_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16, 5)).eval()


def files(path: Path) -> dict[str, bytes]:
    """Every file of a model folder or archive, by name, with its bytes."""
    if path.is_dir():
        return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
    with tarfile.open(path) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def run(path: Path, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return nnef_torch.load(path)(x)


@pytest.mark.parametrize("name", ["model", "model.tgz"])
@pytest.mark.parametrize("interruption", [KeyboardInterrupt, OSError])
def test_interrupted_save_keeps_the_previous_model(tmp_path, monkeypatch, name, interruption):
    x = torch.randn(1, 3, 4, 4)
    target = tmp_path / name
    nnef_torch.save(small_net(), target, (x,))
    before = files(target)
    encode, calls = tensor_file.encode, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise interruption("interrupted")  # Ctrl-C, or a full disk, while the third tensor is written
        return encode(*args, **kwargs)
    monkeypatch.setattr(tensor_file, "encode", interrupted)
    with pytest.raises(interruption):
        nnef_torch.save(small_net(), target, (x,))
    assert len(calls) == 3
    assert files(target) == before
    assert sorted(os.listdir(tmp_path)) == [name]  # no temporary folder or file is left behind


@pytest.mark.parametrize("name, compress", [("model.tgz", None), ("model.nnef", True)], ids=["tgz", "compress"])
def test_archive_read_by_nnef_torch_and_khronos(tmp_path, name, compress):
    module, x = small_net(), torch.randn(2, 3, 4, 4)
    target = tmp_path / name
    nnef_torch.export(module, (x,)).save(target, compress=compress)
    assert target.is_file() and target.read_bytes()[:2] == b"\x1f\x8b"  # gzip
    with torch.no_grad():
        np.testing.assert_allclose(run(target, x).numpy(), module(x).numpy(), rtol=1e-5, atol=1e-6)
    with tarfile.open(target) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    graph = khronos_parse(tmp_path / "unpacked")
    # biases are declared in the shape their consumers read, [1, C] (exporter.variable_shapes)
    assert sorted(graph.tensors[name].data.shape for name in graph.tensors if graph.tensors[name].data is not None) \
        == sorted((1, *p.shape) if p.dim() == 1 else tuple(p.shape) for p in module.parameters())


@pytest.mark.parametrize("progress", [True, False])
def test_progress_bar_on_request(tmp_path, capsys, progress):
    model = nnef_torch.export(small_net(), (torch.randn(1, 3, 4, 4),))
    capsys.readouterr()
    model.save(tmp_path / "m", progress=progress)
    err = capsys.readouterr().err
    assert ("writing NNEF tensors" in err and "100%" in err) == progress, err


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available in this build")
def test_distributed_data_parallel_saves_the_inner_module(tmp_path):
    module, x = small_net(), torch.randn(1, 3, 4, 4)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        wrapped = nn.parallel.DistributedDataParallel(module)
        nnef_torch.save(wrapped, tmp_path / "m", (x,))
    finally:
        dist.destroy_process_group()
    labels = sorted(name for name in files(tmp_path / "m") if name.endswith(".dat"))
    assert labels == sorted(name.replace(".", "/") + ".dat" for name in module.state_dict())
    assert "module" not in (tmp_path / "m" / "graph.nnef").read_text()
    with torch.no_grad():
        np.testing.assert_allclose(run(tmp_path / "m", x).numpy(), module(x).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("wrap", [nn.DataParallel, torch.compile], ids=["data_parallel", "compile"])
def test_wrapped_module_saves_the_inner_module(wrap):
    module = small_net()
    wrapped = wrap(module)  # torch.compile compiles lazily, on the first call: never called here
    model = nnef_torch.export(wrapped, (torch.randn(1, 3, 4, 4),))
    assert sorted(model.tensors) == sorted(name.replace(".", "/") for name in module.state_dict())


def test_save_streams_the_module_tensors(tmp_path):
    module = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)]).eval()
    model = nnef_torch.export(module, (torch.randn(1, 256),))
    state = module.state_dict()
    for label, value in model.tensors.items():  # the module's own tensors, not copies
        assert value.data_ptr() == state[label.replace("/", ".")].data_ptr(), label
    sizes = [value.numel() * value.element_size() for value in model.tensors.values()]
    largest, total = max(sizes), sum(sizes)
    tracemalloc.start()
    try:
        model.save(tmp_path / "m")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # one tensor's bytes at a time (its encoding and the buffer being written), never the whole model
    assert peak < 3 * largest + (128 << 10) < total, (peak, largest, total)
    assert sum(len(data) for name, data in files(tmp_path / "m").items() if name.endswith(".dat")) > total
