"""module -> traced ATen graph, with `torch.export`.

The module is traced as it is (its training flag decides batch-norm and dropout behaviour), without being changed:
torch.export runs it on fake tensors. When every traced operation has an export rule and none writes in place, the
traced graph is exported directly (`fast`). Otherwise it is decomposed first: operations the op table exports are
kept whole (`conv2d`, `linear`, `layer_norm`, ...) and everything else becomes core ATen, which has rules. Re-tracing
for the decomposition is most of an export's time, hence the direct path.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import torch

from nnef_torch.errors import ExportError
from nnef_torch.exporter.problems import error_problem
from nnef_torch.ops.registry import export_rules
from nnef_torch.phases import phase

_DATA_DEPENDENT = ("GuardOnDataDependentSymNode", "DataDependentOutputException", "DynamicOutputShapeException",
                   "data-dependent", "data dependent")


# What torch warns about its own code while we trace (category, start of the message): nn.LSTM / nn.GRU reassign
# their `_flat_weights` list in forward, and torch's decomposition still deep-copies a deprecated pytree class.
# Only these, only during our own calls of torch.export: the user's warnings and every other show as they would.
TORCH_NOISE = (
    (UserWarning, r"The tensor attributes? (self\.[\w.]*_flat_weights\[\d+\](, )?)+ (was|were) assigned during export"),
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
)


@contextmanager
def quiet_torch() -> Iterator[None]:
    """torch's warnings about its own code (`TORCH_NOISE`) left out for the duration."""
    with warnings.catch_warnings():
        for category, message in TORCH_NOISE:
            warnings.filterwarnings("ignore", message, category)
        yield


def unwrap(module: torch.nn.Module) -> torch.nn.Module:
    """The module inside DistributedDataParallel / DataParallel wrappers and `torch.compile`'s OptimizedModule: its
    state_dict names (the NNEF labels) have no `module.` or `_orig_mod.` prefix."""
    while True:
        kind = type(module).__name__
        if kind in ("DistributedDataParallel", "DataParallel") and isinstance(getattr(module, "module", None),
                                                                              torch.nn.Module):
            module = module.module
        elif kind == "OptimizedModule" and isinstance(getattr(module, "_orig_mod", None), torch.nn.Module):
            module = module._orig_mod
        else:
            return module


def _overload(name: str) -> Any:
    namespace, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


# Rules for operations of the traced (pre-decomposition) graph only: these are still decomposed when a graph is,
# since their decompositions cover cases the rules do not (training-mode batch norm, broadcast matmul).
DIRECT_ONLY = ("aten.batch_norm.default", "aten.matmul.default")


def _kept_whole() -> set[Any]:
    kept = set()
    for name in export_rules():
        if name.startswith("aten.") and name not in DIRECT_ONLY:
            try:
                kept.add(_overload(name))
            except AttributeError:  # an overload this torch version does not have
                continue
    return kept


@lru_cache(maxsize=1)
def _decompositions() -> Any:
    """torch's default decomposition table without the operations that have export rules (built once: building
    it takes about a tenth of a second)."""
    table = torch.export.default_decompositions()
    for op in _kept_whole():
        table.pop(op, None)
    return table


def example_tuple(example_inputs: Any) -> tuple[Any, ...]:
    """The positional example inputs: one tensor, or a tuple or list of them."""
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs)
    raise ExportError(f"example_inputs must be a tensor or a tuple of tensors (the positional arguments of "
                      f"forward), not {type(example_inputs).__name__}")


def direct(program: torch.export.ExportedProgram, module: torch.nn.Module) -> bool:
    """Whether the traced graph can be exported without decomposing: a module in eval mode whose every operation
    has an export rule and writes nothing in place."""
    if any(m.training for m in module.modules()):
        return False
    rules = export_rules()
    twins = {}
    for node in program.graph.nodes:
        if node.op != "call_function" or isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat,
                                                                             torch.SymBool)):
            continue  # an integer computed from symbolic extents: no operation of its own
        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            if target._schema.is_mutable:
                target = twins[node] = _functional_twin(node)
            if target is None or str(target) not in rules:
                return False
        elif getattr(target, "__name__", "") != "getitem":
            return False
    for node, twin in twins.items():  # the program is torch.export's copy, not the user's module
        node.target = twin
    return True


def _functional_twin(node: torch.fx.Node) -> Any:
    """The out-of-place op of an in-place one (`relu_` -> `relu`) when the tensor it overwrites is an intermediate
    result used by nothing else, so that writing in place or not computes the same; otherwise None."""
    packet = node.target.overloadpacket.__name__
    written = node.args[0] if node.args else None
    if not packet.endswith("_") or not isinstance(written, torch.fx.Node) or written.op != "call_function":
        return None
    if len(written.users) != 1:
        return None
    try:
        return getattr(getattr(torch.ops.aten, packet[:-1]), node.target._overloadname)
    except AttributeError:
        return None


def trace(module: torch.nn.Module, example_inputs: Any, dynamic_shapes: Any = None) -> torch.export.ExportedProgram:
    """`module` traced on `example_inputs` by torch.export (not decomposed), with the symbolic extents
    `dynamic_shapes` gives (torch.export's argument)."""
    if not isinstance(module, torch.nn.Module):
        raise ExportError(f"only a torch.nn.Module can be exported, not {type(module).__name__}")
    example_inputs = example_tuple(example_inputs)
    name = type(module).__name__
    try:
        with phase(f"tracing {name} with torch.export"), quiet_torch():
            program = torch.export.export(module, example_inputs, dynamic_shapes=dynamic_shapes, strict=False)
    except Exception as error:  # torch reports tracing failures with many exception types
        raise ExportError(f"torch.export cannot trace {name}:", [error_problem(error, explain(error))]) from error
    return program


def decompose(program: torch.export.ExportedProgram, name: str) -> torch.export.ExportedProgram:
    """The traced graph with every operation that has no export rule decomposed to core ATen."""
    try:
        with phase(f"decomposing the traced graph of {name}"), quiet_torch():
            return program.run_decompositions(_decompositions().copy())
    except Exception as error:
        raise ExportError(f"torch cannot decompose the traced graph of {name}:",
                          [error_problem(error, f"{type(error).__name__}: {_first_line(error)}")]) from error


def explain(error: Exception) -> str:
    """What went wrong while tracing, and for value-dependent code what to do about it."""
    first = _first_line(error)
    if any(marker in type(error).__name__ + str(error) for marker in _DATA_DEPENDENT):
        return ("a shape or a Python branch depends on tensor values, so the module has no fixed graph "
                f"({first}). NNEF graphs have static shapes: replace value-dependent code (.item(), int(tensor), "
                "boolean masks, nonzero, `if tensor:`) by shape-preserving ops such as torch.where, or move it out "
                "of the exported module")
    if "Constraints violated" in first:  # dynamic_shapes the code does not allow: torch's reasons and fixes
        lines = [line.strip() for line in str(error).splitlines()]
        reasons = [line[2:] for line in lines if line.startswith("- ")]
        fixes = lines[lines.index("Suggested fixes:") + 1:] if "Suggested fixes:" in lines else []
        fixes = [line for line in fixes if line and not line.startswith(("The error above", "If you"))][:4]
        return ("the module's code does not allow the dynamic_shapes given: " + "; ".join(reasons[:4])
                + (f" (torch suggests: {'; '.join(fixes)})" if fixes else ""))
    return f"{type(error).__name__}: {first}"


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
