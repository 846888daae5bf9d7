"""How an exported language model's variables are stored: float32, float16, or tract's Q4_0 blocks for the
linear layers' weights (trained codes where the model went through 4-bit quantization-aware training)."""
from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Mapping

import numpy as np
import torch
from torch import nn

from nnef_torch.exporter.model import Model
from nnef_torch.format.block_quant import BLOCK
from nnef_torch.importer.weights import block_storage, float_storage
from nnef_torch.quant.groupwise_prepare import q4_0_codes, q4_0_layers, remove_q4_0

Codes = Mapping[str, tuple[np.ndarray, np.ndarray]]


def without_fake_quantization(model: nn.Module) -> tuple[nn.Module, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """`model` as it is traced for export, and the trained Q4_0 codes and scales of its weights by state_dict name:
    a model under 4-bit QAT (`nnef_torch.quant.prepare_q4_0`) is copied with its dequantized weights as plain
    Parameters (the fake quantization itself has no NNEF form; its codes are what is written)."""
    if not q4_0_layers(model):
        return model, {}
    codes = q4_0_codes(model)
    return remove_q4_0(copy.deepcopy(model)), codes


def store(model: Model, module: nn.Module, weights: str, trained: Codes) -> Model:
    """`model` (exported from `module`) with each variable's storage as `weights` says (`nnef_torch.llm.export`)."""
    if weights == "f16":
        for label, value in model.tensors.items():
            if value.is_floating_point():
                model.storage[label] = float_storage(np.float16)
    elif weights == "q4_0":
        labels = _labels(model, module)
        for name in _q4_0_weights(module):
            label = labels.get(name)
            if label is None:
                continue  # folded into another tensor: stays float
            shape = tuple(model.tensors[label].shape)
            given = trained.get(name)
            model.storage[label] = block_storage("q4_0", codes=given[0], scales=given[1], shape=shape) \
                if given is not None else block_storage("q4_0")
    return model


def _q4_0_weights(module: nn.Module) -> list[str]:
    """The state_dict names of the linear weights written as Q4_0: input width a multiple of 32, and the tensor
    read by linear layers only (a head tied to the embedding stays float, as the embedding reads it by rows)."""
    readers: dict[int, list[nn.Module]] = {}
    for layer in module.modules():
        for parameter in layer.parameters(recurse=False):
            readers.setdefault(id(parameter), []).append(layer)
    chosen = []
    for name, layer in module.named_modules():
        weight = getattr(layer, "weight", None)
        if not isinstance(layer, nn.Linear) or not isinstance(weight, torch.Tensor):
            continue
        if weight.shape[-1] % BLOCK or not all(isinstance(m, nn.Linear) for m in readers.get(id(weight), [])):
            continue
        chosen.append(f"{name}.weight" if name else "weight")
    return chosen


def _labels(model: Model, module: nn.Module) -> dict[str, str]:
    """state_dict name -> the label of the variable holding that tensor (the model keeps the module's own
    tensors, so they are matched by identity of storage and shape)."""
    by_storage = {(value.data_ptr(), tuple(value.shape)): label for label, value in model.tensors.items()}
    found = {}
    for name, parameter in module.named_parameters(remove_duplicate=False):
        label = by_storage.get((parameter.data_ptr(), tuple(parameter.shape)))
        if label is not None:
            found[name] = label
    return found


@contextlib.contextmanager
def conv1d_as_linear(model: nn.Module) -> Iterator[None]:
    """GPT-2's `Conv1D` layers (weight [in, out], `x @ W + b`) as `nn.Linear` layers reading the transposed weight
    (a view: no copy) while `model` is traced, so that Q4_0 blocks run along the input axis as tract reads them;
    the model's own layers afterwards."""
    swapped: list[tuple[nn.Module, str, nn.Module]] = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__ == "Conv1D" and isinstance(getattr(child, "weight", None), torch.Tensor):
                linear = nn.Linear(1, 1, bias=child.bias is not None)
                linear.in_features, linear.out_features = child.weight.shape
                linear.weight = nn.Parameter(child.weight.t(), requires_grad=child.weight.requires_grad)
                if child.bias is not None:
                    linear.bias = child.bias
                parent._modules[name] = linear
                swapped.append((parent, name, child))
    try:
        yield
    finally:
        for parent, name, child in swapped:
            parent._modules[name] = child
