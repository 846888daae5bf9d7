"""Each tract_transformers op read by nnef_torch equals tract running the same document (one row per case: the
op's statement, its inputs, a tolerance), and the documents a reader must refuse give an NNEFError naming the
place. tract runs with `with_tract_transformers()`; the rows run without tract are checked against numpy."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import NNEFError, NNEFUnsupportedError

HEADER = "version 1.0;\nextension tract_registry tract_core;\nextension tract_registry tract_transformers;\n"
RTOL, ATOL = 1e-5, 1e-6


def _document(inputs: dict[str, tuple[int, ...]], statement: str, header: str = HEADER) -> str:
    externals = "\n".join(f"    {name} = external<scalar>(shape = {list(shape)});" for name, shape in inputs.items())
    return (f"{header}\ngraph g( {', '.join(inputs)} ) -> ( y )\n{{\n{externals}\n    y = {statement};\n}}\n")


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(text)
    return folder


def _numpy_sdpa(q, k, v, mask=None, scale=None, causal=False):
    """softmax(q kᵀ scale + mask) v with grouped heads (query head h reads key head h // groups)."""
    groups = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1)
    scores = q @ np.swapaxes(k, -1, -2) * (scale if scale else 1 / math.sqrt(q.shape[-1]))
    if causal:
        s, p = q.shape[-2], k.shape[-2]
        scores = np.where(np.arange(p)[None, :] > np.arange(s)[:, None] + (p - s), -np.inf, scores)
    elif mask is not None:
        scores = scores + mask
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


def _gelu(x, power):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** power)))


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + np.concatenate([-x[..., half:], x[..., :half]], -1) * sin


SDPA = "tract_transformers_sdpa(q, k, v{mask}, datum_type = 'f32', acc_datum_type = 'f32', is_causal = {causal}{scale})"
QKV = {"q": (1, 4, 3, 8), "k": (1, 2, 5, 8), "v": (1, 2, 5, 8)}
# (id, inputs, statement, numpy reference of the inputs)
CASES = [
    ("sdpa_gqa", QKV, SDPA.format(mask="", causal="false", scale=""), lambda q, k, v: _numpy_sdpa(q, k, v)),
    ("sdpa_causal_past", QKV, SDPA.format(mask="", causal="true", scale=", scale = 0.5"),
     lambda q, k, v: _numpy_sdpa(q, k, v, scale=0.5, causal=True)),
    ("sdpa_mask", {**QKV, "m": (1, 1, 3, 5)}, SDPA.format(mask=", m", causal="false", scale=", scale = 0.25"),
     lambda q, k, v, m: _numpy_sdpa(q, k, v, m, scale=0.25)),
    ("sdpa_mask_rank2", {**QKV, "m": (3, 5)}, SDPA.format(mask=", m", causal="false", scale=""),
     lambda q, k, v, m: _numpy_sdpa(q, k, v, m)),
    ("sdpa_mha", {"q": (2, 2, 4, 8), "k": (2, 2, 4, 8), "v": (2, 2, 4, 6)},
     SDPA.format(mask="", causal="true", scale=""), lambda q, k, v: _numpy_sdpa(q, k, v, causal=True)),
    ("rms_norm", {"x": (2, 3, 8)}, "tract_transformers_rms_norm(x, axis = 2, eps = 1e-5)",
     lambda x: x / np.sqrt((x ** 2).mean(2, keepdims=True) + 1e-5)),
    ("rms_norm_axis1", {"x": (2, 6, 3)}, "tract_transformers_rms_norm(x, axis = 1)",
     lambda x: x / np.sqrt((x ** 2).mean(1, keepdims=True) + 1e-6)),
    ("silu", {"x": (2, 5)}, "tract_transformers_silu(x)", lambda x: x / (1 + np.exp(-x))),
    ("gelu_approx", {"x": (2, 5)}, "tract_transformers_gelu_approx(x, fast_impl = false)", lambda x: _gelu(x, 3)),
    ("gelu_approx_fast", {"x": (2, 5)}, "tract_transformers_gelu_approx(x, fast_impl = true)",
     lambda x: _gelu(x, 2)),
    ("apply_rope", {"x": (1, 2, 3, 8), "c": (1, 1, 3, 8), "s": (1, 1, 3, 8)},
     "tract_transformers_apply_rope(x, c, s)", _rope),
    ("scaled_masked_softmax", {"x": (1, 2, 3, 5), "m": (1, 1, 3, 5)},
     "tract_transformers_scaled_masked_softmax(x, m, scale = 0.5)",
     lambda x, m: np.exp(x * 0.5 + m) / np.exp(x * 0.5 + m).sum(-1, keepdims=True)),
]


def _inputs(shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(len(shapes))
    xs = {name: torch.randn(shape, generator=gen) for name, shape in shapes.items()}
    if "m" in xs:  # an additive mask: 0 or a large negative, the first key always visible
        xs["m"] = torch.where(xs["m"] > 0.3, -1e4, 0.0)
        xs["m"][..., 0] = 0.0
    return xs


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_op_matches_numpy_and_tract(tmp_path, case):
    name, shapes, statement, reference = case
    folder = _write(tmp_path / name, _document(shapes, statement))
    xs = _inputs(shapes)
    with torch.no_grad():
        ours = nnef_torch.load(folder)(*xs.values()).numpy()
    expected = reference(*(x.numpy().astype(np.float64) for x in xs.values()))
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-5)
    tract = pytest.importorskip("tract")
    ran = tract.nnef().with_tract_transformers().load(str(folder)).into_runnable()
    np.testing.assert_allclose(ours, ran.run([x.numpy() for x in xs.values()])[0].to_numpy(), rtol=RTOL, atol=ATOL)


def test_sdpa_gradient_reaches_inputs(tmp_path):
    folder = _write(tmp_path / "g", _document(QKV, SDPA.format(mask="", causal="true", scale="")))
    xs = {name: x.requires_grad_() for name, x in _inputs(QKV).items()}
    nnef_torch.load(folder)(*xs.values()).square().sum().backward()
    assert all(x.grad is not None and x.grad.abs().sum() > 0 for x in xs.values())


# (id, inputs, statement, header, what the message names)
REFUSED = [
    ("unknown_op", {"x": (2, 3)}, "tract_transformers_dyn_kv_cache(x, name = 'k', axis = 0, datum_type = 'f32', "
     "past_sequence_shape = [0], input_sequence_shape = [2])", HEADER, "tract_transformers_dyn_kv_cache"),
    ("bad_datum_type", QKV, "tract_transformers_sdpa(q, k, v, datum_type = 'i8', acc_datum_type = 'f32', "
     "is_causal = false)", HEADER, "datum_type"),
    ("missing_is_causal", QKV, "tract_transformers_sdpa(q, k, v, datum_type = 'f32', acc_datum_type = 'f32')",
     HEADER, "is_causal"),
    ("heads_not_grouped", {"q": (1, 3, 2, 8), "k": (1, 2, 2, 8), "v": (1, 2, 2, 8)},
     SDPA.format(mask="", causal="false", scale=""), HEADER, "key heads"),
    ("mask_shape", {**QKV, "m": (1, 1, 4, 5)}, SDPA.format(mask=", m", causal="false", scale=""), HEADER,
     "mask"),
    ("rms_norm_axis", {"x": (2, 3)}, "tract_transformers_rms_norm(x, axis = 2)", HEADER, "axis"),
    ("rope_odd", {"x": (1, 3), "c": (1, 3), "s": (1, 3)}, "tract_transformers_apply_rope(x, c, s)", HEADER, "even"),
    ("without_extension", {"x": (2, 3)}, "tract_transformers_silu(x)",
     "version 1.0;\nextension tract_registry tract_core;\n", "tract_transformers_silu"),
    ("standard_document", {"x": (2, 3)}, "tract_transformers_silu(x)", "version 1.0;\n",
     "tract_transformers_silu"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[case[0] for case in REFUSED])
def test_refused_with_location(tmp_path, case):
    name, shapes, statement, header, named = case
    folder = _write(tmp_path / name, _document(shapes, statement, header))
    with pytest.raises(NNEFError, match=named) as info:
        nnef_torch.load(folder)
    assert "graph.nnef:" in str(info.value)


def test_transformers_registry_needs_tract_core(tmp_path):
    header = "version 1.0;\nextension tract_registry tract_transformers;\n"
    folder = _write(tmp_path / "alone", _document({"x": (2, 3)}, "tract_transformers_silu(x)", header))
    with pytest.raises(NNEFUnsupportedError, match="tract_registry tract_core"):
        nnef_torch.load(folder)
