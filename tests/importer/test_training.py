"""An imported module trains like a hand-written one, and compiles and exports to the same outputs."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import nnef_torch
from importer.cnn import Twin, batch, write_cnn


def test_gradients_equal_the_hand_written_twin(tmp_path):
    arrays = write_cnn(tmp_path)
    module, twin = nnef_torch.load(tmp_path), Twin(arrays)
    images, labels = batch(torch.Generator().manual_seed(0))
    F.cross_entropy(module(images), labels).backward()
    F.cross_entropy(twin(images), labels).backward()
    expected = twin.nnef_grads()
    for name, parameter in module.named_parameters():
        torch.testing.assert_close(parameter.grad, expected[name], rtol=1e-5, atol=1e-6, msg=name)


def test_fine_tuning_lowers_the_loss_like_the_twin(tmp_path):
    arrays = write_cnn(tmp_path)
    module, twin = nnef_torch.load(tmp_path), Twin(arrays)
    optimizers = [torch.optim.Adam(m.parameters(), lr=0.02) for m in (module, twin)]
    generator = torch.Generator().manual_seed(1)
    held_out = batch(torch.Generator().manual_seed(99), 64)
    first = F.cross_entropy(module(held_out[0]), held_out[1]).item()
    for _ in range(40):
        images, labels = batch(generator)
        for model, optimizer in zip((module, twin), optimizers):
            optimizer.zero_grad()
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()
    last = F.cross_entropy(module(held_out[0]), held_out[1]).item()
    assert last < 0.7 * first, (first, last)
    torch.testing.assert_close(module(held_out[0]), twin(held_out[0]), rtol=1e-4, atol=1e-4)


def test_torch_compile_gives_the_same_outputs(tmp_path):
    write_cnn(tmp_path)
    module = nnef_torch.load(tmp_path)
    images = torch.rand(4, 2, 12, 12)
    compiled = torch.compile(module)
    torch.testing.assert_close(compiled(images), module(images), rtol=1e-5, atol=1e-5)


def test_torch_export_gives_the_same_outputs(tmp_path):
    write_cnn(tmp_path)
    module = nnef_torch.load(tmp_path)
    images = torch.rand(4, 2, 12, 12)
    batch_dim = torch.export.Dim("batch", min=1, max=64)
    exported = torch.export.export(module, (images,), dynamic_shapes=({0: batch_dim},))
    torch.testing.assert_close(exported.module()(images), module(images))
    other = torch.rand(7, 2, 12, 12)
    torch.testing.assert_close(exported.module()(other), module(other))
