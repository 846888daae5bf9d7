"""Whole models exported and checked end to end: every consumer runs the export and matches torch, the re-imported
module matches torch's outputs, gradients and (in training mode) batch-norm running statistics, and it fine-tunes.

One row per model and mode. A consumer that cannot run a row is listed with the reason: `expect_fail` consumers are
still run and must fail (so a fixed gap shows up as a failing row to update), `not_run` consumers would crash the
test process and are left out.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

import nnef_torch
from tests.exporter.consumers import RTOL, close, export_and_check
from tests.exporter.zoo import ZOO, make

CONSUMERS = ("khronos", "tract", "nnef_torch")
# torch.export's note on nn.LSTM / nn.GRU re-assigning their flat weight list while tracing; harmless here
pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.filterwarnings("ignore:The tensor attributes .*_flat_weights.*:UserWarning"),
]

# Why a consumer cannot run a row (tract's NNEF reader lacks some standard operations; the Khronos executor crashes
# on one broadcast).
TRACT_NO_CAST = "tract has no `cast`, which the batch counter num_batches_tracked += 1 needs"
TRACT_RNN_CONSTANTS = "tract has no `constant` (zero initial states, reversed-time indices)"
TRACT_NO_CONSTANT = "tract has no `constant`, which the positions torch.arange(length) become"
TRACT_DECONV = ("tract reads `deconv` filters as [out, in/groups, ...] where NNEF (and the Khronos tools) use "
                "torch's [in, out/groups, ...]; tract also has no `multilinear_upsample`")
KHRONOS_SELECT = ("the Khronos executor crashes (SIGSEGV) on `select` whose condition broadcasts against a literal "
                  "branch: the causal mask's masked_fill")


@dataclass(frozen=True)
class Row:
    model: str
    mode: str
    expect_fail: dict[str, str] = field(default_factory=dict)  # run, and must still fail
    not_run: dict[str, str] = field(default_factory=dict)  # would crash the test process

    @property
    def id(self) -> str:
        return f"{self.model}-{self.mode}"


def _reasons(*reasons: str) -> str:
    return "; ".join(reason for reason in reasons if reason)


def _row(name: str, mode: str) -> Row:
    batch_norm_train = mode == "train" and ZOO[name].has_batch_norm
    tract = _reasons(TRACT_NO_CAST if batch_norm_train else "",
                     TRACT_DECONV if name == "unet" else "",
                     TRACT_RNN_CONSTANTS if name in ("lstm", "gru") else "",
                     TRACT_NO_CONSTANT if name.startswith("gpt2") else "")
    return Row(name, mode, {"tract": tract} if tract else {},
               {"khronos": KHRONOS_SELECT} if name == "gpt2_masked" else {})


ROWS = [_row(name, mode) for name, entry in ZOO.items()
        for mode in (("eval", "train") if entry.train_differs else ("eval",))]
IDS = [row.id for row in ROWS]


def float32_error(module: torch.nn.Module, inputs: tuple) -> float:
    """torch's own float32 error against float64, relative to the largest output: the tolerance floor a float32
    consumer can be held to (training-mode batch norm over few values per channel is ill-conditioned)."""
    with torch.no_grad():
        single = _first(copy.deepcopy(module)(*inputs)).double()
        double = _first(copy.deepcopy(module).double()(*_double(inputs)))
    return float((single - double).abs().max() / double.abs().max().clamp_min(1e-12))


def _first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def _double(inputs: tuple) -> tuple:
    return tuple(x.double() if x.is_floating_point() else x for x in inputs)


def tolerance(row: Row, module: torch.nn.Module, inputs: tuple) -> float:
    """RTOL, or for training-mode batch norm ten times torch's own float32 error (measured, not guessed)."""
    if row.mode == "train" and ZOO[row.model].has_batch_norm:
        return max(RTOL, 10 * float32_error(module, inputs))
    return RTOL


_EXPORTS: dict[str, tuple] = {}



@pytest.fixture
def exported(request, tmp_path_factory):
    """(row, export folder, forward tolerance, consumer report), made once per row and shared by the tests."""
    row: Row = request.param
    if row.id not in _EXPORTS:
        module, inputs = make(row.model, row.mode)
        folder = tmp_path_factory.mktemp(row.id)
        rtol = tolerance(row, module, inputs)
        runs = tuple(c for c in CONSUMERS if c not in row.not_run)
        report = export_and_check(module, inputs, folder, rtol=rtol, consumers=runs)
        _EXPORTS[row.id] = (folder, rtol, report)
    return (row, *_EXPORTS[row.id])


@pytest.mark.parametrize("exported", ROWS, ids=IDS, indirect=True)
def test_consumers_match_torch(exported):
    row, folder, rtol, report = exported
    unexpected = {name: why for name, why in report.failures.items() if name not in row.expect_fail}
    assert not unexpected, f"{row.id}: consumers failed (rtol {rtol:.1e}): {unexpected}"
    fixed = [name for name in row.expect_fail if name in report.passed]
    assert not fixed, f"{row.id}: {fixed} now pass; remove them from the row's expect_fail"
    assert set(report.passed) == set(CONSUMERS) - set(row.expect_fail) - set(row.not_run)


def _loss(output: torch.Tensor, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    target = torch.randn(output.shape, generator=generator, dtype=output.dtype)
    return ((output - target) ** 2).mean()


def _named(module: torch.nn.Module, kind: str) -> dict[str, torch.Tensor]:
    items = module.named_parameters() if kind == "parameters" else module.named_buffers()
    return dict(items)


def float64_tolerance(folder: Path) -> float:
    """Exact up to float64 rounding, except where the export approximates erf (exact GELU) by `erf_rational`,
    whose accuracy is float32's."""
    return 1e-6 if "erf_rational" in (folder / "graph.nnef").read_text() else 1e-9


@pytest.mark.parametrize("exported", ROWS, ids=IDS, indirect=True)
def test_reimported_gradients_and_state_match_torch(exported):
    """In float64, where float32 conditioning cannot hide a difference: the re-imported module's outputs, every
    parameter's gradient on the same batch and, in training mode, the batch-norm buffers after one call equal
    torch's."""
    row, folder, _, _ = exported
    rtol = float64_tolerance(folder)
    module, inputs = make(row.model, row.mode)
    module, inputs = module.double(), _double(inputs)
    loaded = nnef_torch.load(folder, dtype=torch.float64)
    expected, found = module(*inputs), loaded(*inputs)
    close(found.detach(), expected.detach(), rtol)
    _loss(expected).backward()
    _loss(found).backward()
    params, loaded_params = _named(module, "parameters"), _named(loaded, "parameters")
    assert set(params) <= set(loaded_params), f"parameters not re-imported: {set(params) - set(loaded_params)}"
    # absolute tolerance from the largest gradient anywhere: some gradients are zero up to rounding (a bias before
    # a training-mode batch norm), and their rounding noise scales with the whole backward pass, not with them
    scale = max(float(param.grad.abs().max()) for param in params.values())
    for name, param in params.items():
        assert loaded_params[name].grad is not None, f"{name}: no gradient"
        # a parameter is declared in the shape its consumer reads (a bias as [1, C]): compared in torch's shape
        grad = loaded_params[name].grad.reshape(param.grad.shape)
        torch.testing.assert_close(grad, param.grad, rtol=10 * rtol, atol=10 * rtol * scale,
                                   msg=lambda text, name=name: f"gradient of {name}: {text}")
    if row.mode == "train" and ZOO[row.model].has_batch_norm:
        buffers, loaded_buffers = _named(module, "buffers"), _named(loaded, "buffers")
        assert set(buffers) <= set(loaded_buffers), f"buffers not updated: {set(buffers) - set(loaded_buffers)}"
        for name, buffer in buffers.items():
            close(loaded_buffers[name].reshape(buffer.shape), buffer, rtol)


@pytest.mark.parametrize("exported", ROWS, ids=IDS, indirect=True)
def test_reimported_module_fine_tunes(exported):
    """One optimizer step on the re-imported float32 module: finite gradients, every parameter moves, the loss on
    the same batch goes down."""
    row, folder, rtol, _ = exported
    module, inputs = make(row.model, row.mode)
    loaded = nnef_torch.load(folder)
    with torch.no_grad():
        close(loaded(*inputs), module(*inputs), rtol)
    optimizer = torch.optim.Adam(loaded.parameters(), lr=1e-3)
    before = {name: p.detach().clone() for name, p in loaded.named_parameters()}
    loss = _loss(loaded(*inputs))
    loss.backward()
    for name, p in loaded.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), f"{name}: gradient missing or not finite"
    optimizer.step()
    moved = [name for name, p in loaded.named_parameters() if not torch.equal(p.detach(), before[name])]
    assert len(moved) == len(before), f"parameters unchanged by the step: {set(before) - set(moved)}"
    with torch.no_grad():
        after = _loss(loaded(*inputs))
    assert after < loss, f"loss {loss.item():.6g} -> {after.item():.6g}"


def test_every_model_has_its_rows():
    """Each model has an eval row, and a train row where training mode traces differently."""
    assert {row.id for row in ROWS} == {f"{name}-{mode}" for name, entry in ZOO.items()
                                        for mode in ["eval"] + ["train"] * entry.train_differs}
