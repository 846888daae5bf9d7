"""An imported module exported again by tracing keeps its document's names: externals, outputs, every activation,
variable labels and names, and graph.quant keys (`nnef_torch.exporter.naming`, "Imported documents").

The documents are written by hand (weights with the Khronos `nnef.write_tensor`), and what the export wrote is
read with the Khronos parser (`nnef.load_graph`, its tensors' quantization info) and run in `nnef.Session` (which
computes the float graph: it does not apply graph.quant) against the torch module with its quantizers off.

Names that cannot be kept (not tested here, listed in naming.py): the inner tensors of a chain the importer fuses
(layer norm, gelu), a reshape folded into the reshape after it, an op whose torch value is its input (`copy`), and
ATen nodes torch records no origin for (arithmetic on parameters alone), which keep ATen-based names.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from khronos import CONFORMANCE, khronos, require_conformance

import nnef_torch
from exporter.consumers import close, compound_standard_ops, defined_fragments, khronos_parse

DOCUMENT = """version 1.0;

graph classifier( pixels ) -> ( logits )
{
    pixels = external<scalar>(shape = [1, 3, 8, 8]);
    stem_weight = variable<scalar>(shape = [4, 3, 3, 3], label = 'stem/conv/weight');
    stem_bias = variable<scalar>(shape = [1, 4], label = 'stem/conv/bias');
    conv1 = conv(pixels, stem_weight, stem_bias, padding = [(1, 1), (1, 1)]);
    features = relu(conv1);
    flat = reshape(features, shape = [1, 256]);
    fc_weight = variable<scalar>(shape = [5, 256], label = 'head/fc/weight');
    fc_bias = variable<scalar>(shape = [1, 5], label = 'head/fc/bias');
    logits = linear(flat, fc_weight, fc_bias);
}
"""
QUANT = """"pixels": zero_point_linear_quantize(zero_point = 0, scale = 0.03125, bits = 8, signed = true, symmetric = false);
"features": zero_point_linear_quantize(zero_point = 0, scale = 0.0625, bits = 8, signed = false, symmetric = false);
"logits": zero_point_linear_quantize(zero_point = 0, scale = 0.125, bits = 8, signed = true, symmetric = true);
"""
SHAPES = {"stem/conv/weight": (4, 3, 3, 3), "stem/conv/bias": (1, 4), "head/fc/weight": (5, 256),
          "head/fc/bias": (1, 5)}

# document operations written as several tensors (conv with a reflect border: pad, then conv; local response
# normalization: seven ops), and operations of several results (split, moments)
MULTI = """version 1.0;

graph multi( data ) -> ( out, var )
{
    data = external<scalar>(shape = [1, 2, 6, 6]);
    kernel = variable<scalar>(shape = [2, 1, 3, 3], label = 'kernel');
    padded = conv(data, kernel, 0.0, border = 'reflect', groups = 0, padding = [(1, 1), (1, 1)]);
    squared = sqr(padded);
    [left, right] = split(squared, axis = 1, ratios = [1, 1]);
    mean, var = moments(right, axes = [2, 3]);
    normed = local_response_normalization(left, size = [1, 2, 1, 1]);
    out = add(normed, mean);
}
"""


def _write(folder: Path, text: str, shapes: dict[str, tuple[int, ...]], quant: str | None = None) -> Path:
    nnef = khronos()
    folder.mkdir()
    (folder / "graph.nnef").write_text(text)
    if quant is not None:
        (folder / "graph.quant").write_text(quant)
    rng = np.random.default_rng(0)
    for label, shape in shapes.items():
        path = folder / f"{label}.dat"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as file:
            nnef.write_tensor(file, (rng.standard_normal(shape) * 0.3).astype(np.float32))
    return folder


def _results(graph) -> set[str]:
    """The tensors the operations of a Khronos graph compute (variables and externals included)."""
    names: set[str] = set()
    for op in graph.operations:
        for value in op.outputs.values():
            names.update(map(str, value) if isinstance(value, list) else [str(value)])
    return names


def _producers(graph) -> dict[str, str]:
    """Tensor name -> the name of the operation that computes it (single results)."""
    return {str(value): op.name for op in graph.operations for value in op.outputs.values()
            if not isinstance(value, list)}


def _variables(graph) -> dict[str, str]:
    """Label -> tensor name of each variable of a Khronos graph."""
    return {op.attribs["label"]: str(op.outputs["output"]) for op in graph.operations if op.name == "variable"}


def _quantization(graph) -> dict[str, dict]:
    return {name: {key: np.asarray(value).tolist() for key, value in tensor.quantization.items()}
            for name, tensor in graph.tensors.items() if tensor.quantization}


def _quant_keys(folder: Path) -> list[str]:
    return re.findall(r'^"(\w+)":', (folder / "graph.quant").read_text(), flags=re.M)


def _session(folder: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    nnef = khronos()
    with nnef.Session(str(folder), lowered=defined_fragments(folder) + compound_standard_ops()) as session:
        outputs = session(*inputs)
    return [np.asarray(output) for output in (outputs if isinstance(outputs, (tuple, list)) else [outputs])]


def _float_outputs(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    """The module's outputs with its fake quantizers off (what nnef.Session computes), in eval mode."""
    module = copy.deepcopy(module).eval()
    for imported in module.modules():
        if isinstance(imported, nnef_torch.NNEFModule) and imported.quantizers():
            imported.set_quantization(False)
    with torch.no_grad():
        outputs = module(*inputs)
    return [o.numpy() for o in (outputs if isinstance(outputs, (tuple, list)) else [outputs])]


def _fine_tune(module: torch.nn.Module, x: torch.Tensor) -> None:
    """One SGD step with the fake quantizers on (training mode), as the demo does."""
    module.train()
    optimizer = torch.optim.SGD([p for p in module.parameters() if p.requires_grad], lr=1e-3)
    optimizer.zero_grad()
    module(x).square().mean().backward()
    optimizer.step()


@pytest.fixture
def document(tmp_path: Path) -> Path:
    return _write(tmp_path / "original", DOCUMENT, SHAPES, QUANT)


def test_reexport_keeps_document_names(document: Path, tmp_path: Path):
    module = nnef_torch.load(document)
    x = torch.randn(1, 3, 8, 8)
    _fine_tune(module, x)
    out = tmp_path / "again"
    nnef_torch.export(module, (x,)).save(out)  # traced: the demo's fine-tune-and-export flow
    original, written = khronos_parse(document), khronos_parse(out)
    assert list(written.inputs) == ["pixels"] and list(written.outputs) == ["logits"]
    assert _results(written) == _results(original)  # conv1, features, flat, logits, the variables and the input
    assert _variables(written) == _variables(original)  # labels, each with its document name
    assert _quant_keys(out) == _quant_keys(document)
    assert _quantization(written) == _quantization(original)  # the entry of the input stays on the input
    ops = _producers(written)
    assert {name: ops[name] for name in ("conv1", "features", "flat", "logits")} == \
        {"conv1": "conv", "features": "relu", "flat": "reshape", "logits": "linear"}
    close(_session(out, [x.numpy()])[0], _float_outputs(module, (x,))[0])


def test_reexport_in_eval_mode_keeps_document_names(document: Path, tmp_path: Path):
    module = nnef_torch.load(document).eval()  # traced directly, without decomposition
    x = torch.randn(1, 3, 8, 8)
    out = tmp_path / "again"
    nnef_torch.export(module, (x,)).save(out)
    original, written = khronos_parse(document), khronos_parse(out)
    assert _results(written) == _results(original)
    assert _variables(written) == _variables(original)
    assert _quantization(written) == _quantization(original)


class Wrapper(torch.nn.Module):
    """An imported module as a submodule, with a layer of its own after it."""

    def __init__(self, imported: torch.nn.Module):
        super().__init__()
        self.backbone = imported
        self.head = torch.nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.head(self.backbone(x)))


def test_submodule_keeps_document_names(document: Path, tmp_path: Path):
    torch.manual_seed(0)
    module = Wrapper(nnef_torch.load(document))
    x = torch.randn(1, 3, 8, 8)
    _fine_tune(module, x)
    out = tmp_path / "wrapped"
    nnef_torch.save(module, out, (x,))
    original, written = khronos_parse(document), khronos_parse(out)
    assert list(written.inputs) == ["x"]  # the traced module's own input
    # the document's activations and variables; its input is the wrapper's `x`, and the entry the document puts on
    # its input goes on a copy of `x` named as the document's input
    assert _results(original) <= _results(written)
    variables = _variables(written)
    assert {label: variables.get(label) for label in _variables(original)} == _variables(original)
    assert {"head/weight", "head/bias"} <= set(variables)  # the wrapper's own layer: labels after its path
    assert sorted(_quant_keys(out)) == sorted(_quant_keys(document))
    assert _quantization(written) == _quantization(original)
    close(_session(out, [x.numpy()])[0], _float_outputs(module, (x,))[0])


def test_explicit_names_win(document: Path):
    module = nnef_torch.load(document).eval()
    model = nnef_torch.export(module, torch.randn(1, 3, 8, 8), input_names=["image"], output_names=["scores"])
    graph = model.graph
    assert [external.name for external in graph.signature.externals] == ["image"]
    assert graph.signature.outputs == ("scores",)
    assert sorted(graph.quantization) == ["features", "image", "scores"]  # entries follow the names
    assert {"conv1", "features", "flat"} <= set(graph.tensors)


def test_document_op_of_several_tensors_names_its_result(tmp_path: Path):
    """A document op written as several tensors: the result takes the document name, the others `<name>_<k>`;
    each result of a split and of moments takes its own name."""
    document = _write(tmp_path / "original", MULTI, {"kernel": (2, 1, 3, 3)})
    module = nnef_torch.load(document)
    x = torch.randn(1, 2, 6, 6)
    out = tmp_path / "again"
    nnef_torch.export(module, (x,)).save(out)
    original, written = khronos_parse(document), khronos_parse(out)
    assert list(written.inputs) == ["data"] and list(written.outputs) == ["out", "var"]
    assert _results(original) <= _results(written)
    helpers = _results(written) - _results(original)
    assert helpers and all(re.fullmatch(r"(padded|normed)_\d+", name) for name in helpers), sorted(helpers)
    ops = _producers(written)
    assert (ops["padded"], ops["padded_1"], ops["normed"]) == ("conv", "pad", "div")
    moments = next(op for op in written.operations if op.name == "moments")
    assert (str(moments.outputs["mean"]), str(moments.outputs["variance"])) == ("mean", "var")
    expected = _float_outputs(module, (x,))
    for found, wanted in zip(_session(out, [x.numpy()]), expected):
        close(found, wanted)


@pytest.mark.parametrize("case", ["mnist", "split_channel"])
def test_conformance_case_keeps_names(case: str, tmp_path: Path):
    require_conformance()
    folder = CONFORMANCE / case
    module = nnef_torch.load(folder)
    inputs = tuple(torch.randn(*external.shape) for external in module.nnef_graph.signature.externals)
    out = tmp_path / case
    nnef_torch.export(module, inputs).save(out)
    original, written = khronos_parse(folder), khronos_parse(out)
    assert list(written.inputs) == list(original.inputs) and list(written.outputs) == list(original.outputs)
    assert _results(written) == _results(original)
    assert _variables(written) == _variables(original)
    expected = _float_outputs(module, inputs)
    for found, wanted in zip(_session(out, [x.numpy() for x in inputs]), expected):
        close(found, wanted)
