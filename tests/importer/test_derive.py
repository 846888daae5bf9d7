"""An imported module called with inputs of other shapes runs its graph derived for them (NNEF re-declares a
graph's externals, spec 2.2), on the same Parameters: outputs equal a hand-written torch twin and the Khronos
executor run on the document with its externals re-declared; training, state_dict, save, viz, .to() and deepcopy
see one set of tensors; an extent the graph fixes is an error located at the operation."""
from __future__ import annotations

import copy
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nnef_torch
from importer.cnn import TEXT, Twin, write_cnn
from importer.model_files import write_model
from nnef_torch.errors import NNEFShapeError, NNEFShapeWarning
from nnef_torch.importer.derive import MAX_FORMS

DECLARED = "shape = [1, 2, 12, 12]"
# even spatial extents: the twin's max_pool2d floors where NNEF's automatic padding would pad
TWIN_SIZES = [(1, 2, 12, 12), (3, 2, 20, 16), (2, 2, 8, 24)]
# any extents: the Khronos executor pads as NNEF does
SESSION_SIZES = [(1, 2, 12, 12), (3, 2, 20, 16), (2, 2, 7, 9)]


@pytest.fixture()
def cnn(tmp_path) -> tuple[Path, dict[str, np.ndarray]]:
    return tmp_path / "cnn", write_cnn(tmp_path / "cnn")


@pytest.mark.parametrize("shape", TWIN_SIZES)
def test_other_shapes_equal_the_hand_written_twin(cnn, shape):
    folder, arrays = cnn
    module, twin = nnef_torch.load(folder), Twin(arrays)
    x = torch.rand(*shape, generator=torch.Generator().manual_seed(sum(shape)))
    torch.testing.assert_close(module(x), twin(x), rtol=1e-5, atol=1e-6)
    assert len(module.forms()) == (0 if shape == TWIN_SIZES[0] else 1)


def test_other_shapes_equal_the_khronos_session_on_redeclared_externals(cnn, tmp_path):
    from formats.khronos_session import run_khronos

    folder, arrays = cnn
    module = nnef_torch.load(folder)
    for shape in SESSION_SIZES:
        redeclared = write_model(tmp_path / f"redeclared_{'x'.join(map(str, shape))}",
                                 TEXT.replace(DECLARED, f"shape = {list(shape)}"), arrays)
        x = np.random.default_rng(sum(shape)).random(shape, dtype=np.float32)
        (expected,) = run_khronos(redeclared, [x])
        np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    assert len(module.forms()) == 2


def test_a_training_step_over_two_sizes_reaches_the_same_parameters(cnn):
    folder, arrays = cnn
    module, twin = nnef_torch.load(folder), Twin(arrays)
    parameters = dict(module.named_parameters())
    generator = torch.Generator().manual_seed(3)
    small, large = torch.rand(4, 2, 12, 12, generator=generator), torch.rand(2, 2, 20, 16, generator=generator)
    for model in (module, twin):
        (model(small).square().mean() + model(large).square().mean()).backward()
    expected = twin.nnef_grads()
    for name, parameter in module.named_parameters():
        assert parameter is parameters[name]
        torch.testing.assert_close(parameter.grad, expected[name], rtol=1e-5, atol=1e-6, msg=name)
    assert len(module.forms()) == 2
    for form in module.forms().values():  # it reads the module's own
        assert not list(form.parameters()) and not list(form.named_buffers())


def test_fine_tuning_at_another_size_changes_what_the_module_computes(cnn):
    folder, arrays = cnn
    module, twin = nnef_torch.load(folder), Twin(arrays)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (module, twin)]
    generator = torch.Generator().manual_seed(5)
    for _ in range(3):
        images, labels = torch.rand(6, 2, 16, 16, generator=generator), torch.randint(0, 2, (6,), generator=generator)
        for model, optimizer in zip((module, twin), optimizers):
            optimizer.zero_grad()
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()
    x = torch.rand(1, 2, 12, 12)  # the loaded signature: the module's own forward sees the same Parameters
    torch.testing.assert_close(module(x), twin(x), rtol=1e-5, atol=1e-5)


def test_state_dict_keys_and_objects_stay_after_other_shapes(cnn):
    folder, _ = cnn
    module = nnef_torch.load(folder)
    before = module.state_dict(keep_vars=True)
    module(torch.rand(3, 2, 20, 16))
    after = module.state_dict(keep_vars=True)
    assert list(before) == list(after)
    assert all(before[key] is after[key] for key in before)
    module.load_state_dict({key: torch.zeros_like(value) for key, value in before.items()})
    assert torch.count_nonzero(module(torch.rand(3, 2, 20, 16))) == 0  # the form reads the loaded values


def test_save_after_other_shapes_writes_the_declared_shapes(cnn, tmp_path):
    folder, arrays = cnn
    module = nnef_torch.load(folder)
    x = torch.rand(3, 2, 20, 16)
    y = module(x)
    module.save(tmp_path / "saved")
    text = (tmp_path / "saved" / "graph.nnef").read_text()
    assert DECLARED in text and "[3, 2, 20, 16]" not in text
    torch.testing.assert_close(nnef_torch.load(tmp_path / "saved")(x), y)


def test_viz_draws_the_loaded_shapes_after_other_shapes(cnn):
    folder, _ = cnn
    module = nnef_torch.load(folder)
    module(torch.rand(3, 2, 20, 16))
    text = nnef_torch.viz.tree(module)
    assert "scalar[1,2,12,12]" in text and "20,16" not in text


def test_forms_are_kept_per_signature_least_recent_first_out(cnn):
    folder, _ = cnn
    module = nnef_torch.load(folder)
    module(torch.rand(2, 2, 12, 12))
    first = module.forms()[((2, 2, 12, 12),)]
    module(torch.rand(2, 2, 12, 12))
    assert module.forms()[((2, 2, 12, 12),)] is first
    for batch in range(3, 3 + MAX_FORMS):
        module(torch.rand(batch, 2, 12, 12))
    assert len(module.forms()) == MAX_FORMS and ((2, 2, 12, 12),) not in module.forms()


def test_fixed_extent_is_located_at_the_operation_and_names_the_input(cnn):
    folder, _ = cnn
    module = nnef_torch.load(folder)
    with pytest.raises(NNEFShapeError) as caught:
        module(torch.rand(1, 3, 12, 12))
    message = str(caught.value)
    assert "input 'image' of shape [1, 3, 12, 12] (declared [1, 2, 12, 12], other at axis 1)" in message
    assert caught.value.location.line == 8 and "conv(image" in message  # the conv that fixes the channels


BATCH_FIXED = """version 1.0;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [1, 2, 3]);
    w = variable<scalar>(shape = [4, 6], label = 'w');
    flat = reshape(x, shape = [1, 6]);
    y = linear(flat, w, 0.0);
}
"""


def test_a_batch_the_graph_fixes_runs_leniently_with_a_warning(tmp_path):
    w = np.random.default_rng(0).random((4, 6), dtype=np.float32)
    folder = write_model(tmp_path / "m", BATCH_FIXED, {"w": w})
    x = torch.rand(5, 2, 3)
    with pytest.warns(NNEFShapeWarning, match=r"input 'x' of shape \[5, 2, 3\].*reshape"):
        y = nnef_torch.load(folder)(x)
    torch.testing.assert_close(y, x.reshape(5, 6) @ torch.from_numpy(w).T)
    with pytest.raises(NNEFShapeError, match=r"input 'x' of shape \[5, 2, 3\] \(declared \[1, 2, 3\], other at "
                                             r"axis 0\) does not fit the graph: reshape"):
        nnef_torch.load(folder, lenient=False)(x)
    with pytest.raises(NNEFShapeError, match="other at axis 2"):  # not the batch axis: refused
        nnef_torch.load(folder)(torch.rand(1, 2, 4))


def test_to_train_and_deepcopy_follow_into_the_derived_forward(cnn):
    folder, arrays = cnn
    module = nnef_torch.load(folder)
    module(torch.rand(3, 2, 20, 16))
    module.double().train()
    (form,) = module.forms().values()
    assert form.training
    x = torch.rand(3, 2, 20, 16, dtype=torch.float64)
    twin = Twin(arrays).double()
    torch.testing.assert_close(module(x), twin(x))
    copied = copy.deepcopy(module)
    assert not copied.forms()
    torch.testing.assert_close(copied(x), twin(x))
    assert len(copied.forms()) == 1 and len(module.forms()) == 1


QUANTIZED = """version 1.0;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [1, 4]);
    h = relu(x);
    y = mul(h, 2.0);
}
"""


def test_other_shapes_share_the_module_quantizers(tmp_path):
    folder = write_model(tmp_path / "q", QUANTIZED,
                         quant='"h": linear_quantize(min = 0.0, max = 1.0, bits = 2);\n')
    module = nnef_torch.load(folder)
    x = torch.tensor([[0.1, 0.4, 0.9, 2.0]] * 3)
    torch.testing.assert_close(module(x), torch.tensor([[0.0, 2 / 3, 2.0, 2.0]] * 3))
    module.set_quantization(False)
    torch.testing.assert_close(module(x), torch.tensor([[0.2, 0.8, 1.8, 4.0]] * 3))
    (form,) = module.forms().values()
    assert not list(form.named_children()) or "fake_quant" not in dict(form.named_children())


def test_torch_compile_with_dynamic_shapes_gives_the_same_outputs(cnn):
    folder, _ = cnn
    module = nnef_torch.load(folder)
    compiled = torch.compile(module, dynamic=True, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNEFShapeWarning)
        for shape in TWIN_SIZES:
            x = torch.rand(*shape)
            torch.testing.assert_close(compiled(x), module(x))


def test_torch_export_with_dynamic_extents_exports_the_module_graph(cnn):
    """torch.export runs a GraphModule's own graph (fx.Interpreter): the code generated for the loaded shapes,
    which here is free in batch, height and width."""
    folder, _ = cnn
    module = nnef_torch.load(folder)
    batch, half_h, half_w = (torch.export.Dim(name, min=2, max=32) for name in ("batch", "half_h", "half_w"))
    exported = torch.export.export(module, (torch.rand(2, 2, 16, 16),),
                                   dynamic_shapes=({0: batch, 2: 2 * half_h, 3: 2 * half_w},))
    x = torch.rand(3, 2, 20, 24)
    torch.testing.assert_close(exported.module()(x), module(x))
