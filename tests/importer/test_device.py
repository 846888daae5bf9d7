"""Devices: CUDA where a GPU exists (skipped otherwise)."""
from __future__ import annotations

import pytest
import torch

import nnef_torch
from importer.cnn import write_cnn

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


@cuda
def test_load_on_cuda_matches_cpu(tmp_path):
    write_cnn(tmp_path)
    on_cpu = nnef_torch.load(tmp_path)
    on_gpu = nnef_torch.load(tmp_path, device="cuda")
    assert all(parameter.is_cuda for parameter in on_gpu.parameters())
    images = torch.rand(4, 2, 12, 12)
    torch.testing.assert_close(on_gpu(images.cuda()).cpu(), on_cpu(images), rtol=1e-4, atol=1e-4)


@cuda
def test_module_moves_to_cuda_and_trains(tmp_path):
    write_cnn(tmp_path)
    module = nnef_torch.load(tmp_path).cuda()
    loss = module(torch.rand(4, 2, 12, 12, device="cuda")).square().mean()
    loss.backward()
    assert all(parameter.grad is not None and parameter.grad.is_cuda for parameter in module.parameters())


@cuda
def test_meta_load_materializes_on_cuda(tmp_path):
    write_cnn(tmp_path)
    module = nnef_torch.load(tmp_path, device="meta").materialize("cuda")
    reference = nnef_torch.load(tmp_path)
    images = torch.rand(2, 2, 12, 12)
    torch.testing.assert_close(module(images.cuda()).cpu(), reference(images), rtol=1e-4, atol=1e-4)


@cuda
def test_other_shapes_run_on_cuda_and_follow_to(tmp_path):
    write_cnn(tmp_path)
    on_cpu = nnef_torch.load(tmp_path)
    on_gpu = nnef_torch.load(tmp_path, device="cuda")
    images = torch.rand(3, 2, 20, 16)
    torch.testing.assert_close(on_gpu(images.cuda()).cpu(), on_cpu(images), rtol=1e-4, atol=1e-4)
    moved = on_cpu.cuda()  # the form made on the CPU follows the module
    torch.testing.assert_close(moved(images.cuda()).cpu(), on_gpu(images.cuda()).cpu(), rtol=1e-4, atol=1e-4)
