"""The op table: one entry per NNEF operation, keyed by its NNEF name, shared by import and export.

Each facet of an entry (shape rule, torch implementation, ATen export rules, import rules of other formats) is
added by a decorator, and adding the same facet twice for one op raises, so every op has exactly one definition of
each. Export rules are also indexed by the ATen operation they translate, and import rules by the format and
operator they read; each has exactly one rule.

The table is assembled in one place, `FACETS`: the modules that add each facet, imported the first time that facet
is looked up (so that reading a graph never imports torch, and exporting never imports a front end). Every lookup
goes through the functions of this module.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Shape = tuple[int, ...]


@dataclass(frozen=True)
class ImportRule:
    """How one operator of another format becomes NNEF: `rule(builder, node)` writes operations and returns the
    operator's results; `params` are the positions of its inputs that are parameters (weights), not data, and
    `state` those of them that are state the operator keeps (moving statistics), not trained; `unused` the inputs
    that only training reads (the label of a loss layer)."""

    fn: Callable[..., Any]
    params: tuple[int, ...] = ()
    state: tuple[int, ...] = ()
    unused: tuple[int, ...] = ()


@dataclass
class OpEntry:
    name: str
    shape: Callable[..., Any] | None = None  # shape rule: (*input shapes, **attributes) -> result shape(s)
    torch: Callable[..., Any] | None = None  # torch implementation: (*input tensors, **attributes) -> result(s)
    typed: bool = False  # the torch implementation takes the generic type as `dtype=` (a torch.dtype)
    # an nn.Module class for ops whose behaviour follows the module's training mode: built from the attributes,
    # called with the tensor inputs; `state` names the inputs it updates while training (they become buffers)
    module: type | None = None
    state: tuple[str, ...] = ()
    aten: dict[str, Callable[..., Any]] = field(default_factory=dict)  # ATen op name -> export rule
    imports: dict[tuple[str, str], ImportRule] = field(default_factory=dict)  # (format, operator) -> import rule
    writes: dict[str, Callable[..., Any]] = field(default_factory=dict)  # format -> back-end rule writing this op
    # a dialect op the lowerer writes as other operations: (lowerer, arguments, generic type, location, hint)
    lower: Callable[..., Any] | None = None


_ATEN: dict[str, OpEntry] = {}  # ATen op name ('aten.conv2d.default') -> the entry whose rule exports it
_IMPORTS: dict[str, dict[str, tuple[OpEntry, ImportRule]]] = {}  # format -> operator -> (entry, rule)
_REFUSED: dict[str, dict[str, str]] = {}  # format -> operator -> why no NNEF form exists


_TABLE: dict[str, OpEntry] = {}

_OPS = "nnef_torch.ops."
_RULES = "nnef_torch.exporter.rules."
_NNVM = "nnef_torch.formats.nnvm.rules."
_LIGHTNET = "nnef_torch.formats.lightnet."
_TRACT = "nnef_torch.formats.tract_core."
# facet -> the modules whose decorators add it (an op family has the same file name in every facet it has)
FACETS: dict[str, tuple[str, ...]] = {
    "shape": tuple(_OPS + "shapes_" + family for family in (
        "elementwise", "lightnet", "reduce", "sampling", "sorting", "tensor", "window")),
    "torch": tuple(_OPS + "torch_" + family for family in (
        "elementwise", "fused", "lightnet", "reduce", "sampling", "sorting", "tensor", "training", "border", "conv",
        "pool", "window")),
    "aten": tuple(_RULES + family for family in (
        "elementwise", "indexing", "nn", "patches", "reduce", "sampling", "tensor")) + (
        "nnef_torch.exporter.quantization",),
    "import:nnvm": tuple(_NNVM + family for family in (
        "elementwise", "nn", "nnvm_tensor", "nnvm_top", "pooling", "rearrange", "rnn", "spatial", "statistics",
        "tensor")),
    "import:lightnet": tuple(_LIGHTNET + "rules." + family for family in ("detection", "nn", "tensor")) + (
        _LIGHTNET + "rules",),  # the package records the optypes it refuses
    "write:lightnet": (_LIGHTNET + "write_rules", _LIGHTNET + "write_rules_tensor"),
    "dialect:tract_core": (_TRACT + "lowering", _TRACT + "ops", _TRACT + "scan"),
}
_LOADED: set[str] = set()


def require(*facets: str) -> None:
    """Import the modules that add `facets` to the table (once)."""
    for facet in facets:
        if facet not in _LOADED:
            _LOADED.add(facet)
            for module in FACETS.get(facet, ()):  # a facet nothing adds (a format without a writer) is empty
                importlib.import_module(module)


def entry(name: str, *facets: str) -> OpEntry | None:
    """The table's entry of NNEF op `name`, with its shape rule and the other `facets` ('torch', ...) loaded."""
    require("shape", *facets)
    return _TABLE.get(name)


def _register(name: str, facet: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    op = _TABLE.setdefault(name, OpEntry(name))
    if getattr(op, facet) is not None:
        raise RuntimeError(f"op {name!r} already has a {facet} rule ({getattr(op, facet).__qualname__})")
    setattr(op, facet, fn)
    return fn


def shape_rule(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the shape rule of NNEF op `name`.

    The rule keeps the NNEF signature: tensor inputs positionally (a shape tuple each; a list of shapes for a
    tensor-array input; `()` for a literal), then the attributes as keywords with their NNEF names (a name that is
    a Python keyword gets a trailing underscore: selu's `lambda_`). It returns the
    result shape, a tuple of shapes for several results, or a list of shapes for an array result, and raises
    `NNEFShapeError` (without location; the caller adds it) when argument validity fails.
    """
    return lambda fn: _register(name, "shape", fn)


def torch_op(name: str, *, typed: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the torch implementation of NNEF op `name`.

    The function keeps the NNEF signature like a shape rule, with tensors (or Python numbers where a literal was
    given) in place of shapes, and returns a tensor, a tuple of tensors for several results, or a list for an array
    result. It must also trace: the importer calls it once per operation with `torch.fx.Proxy` inputs, so the
    attribute logic runs at load time and only torch calls reach the generated code. It may branch on attributes
    and on `torch_common.static_shape` / `static_dtype` of its inputs, never on tensor values. With `typed=True` it
    also receives the operation's generic type as `dtype=`.
    """
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _register(name, "torch", fn)
        _TABLE[name].typed = typed
        return fn
    return register


def lowering_rule(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register how the lowerer writes dialect op `name` as other operations (`nnef_torch.formats.dialects`): the rule
    is called as `rule(lowerer, arguments, generic_type, location, hint)` and returns the op's result(s)."""
    return lambda fn: _register(name, "lower", fn)


def lowering_rule_of(name: str) -> Callable[..., Any] | None:
    """How the lowerer writes dialect op `name` (its dialect's ops are named `<dialect>_...`), if it is one."""
    require(*(facet for facet in FACETS if facet.startswith("dialect:") and name.startswith(facet[8:] + "_")))
    op = _TABLE.get(name)
    return op.lower if op is not None else None


def torch_module(name: str, *, state: tuple[str, ...] = ()) -> Callable[[type], type]:
    """Register the torch implementation of NNEF op `name` as an `nn.Module` class, for operations whose behaviour
    depends on the module's training mode (batch statistics, dropout): the importer makes one submodule per
    operation, constructed with the operation's attributes (NNEF names) and called with its tensor inputs. In eval
    mode it must compute what the op's NNEF definition says. `state`: the tensor inputs it updates in training (a
    variable read there is a buffer of the imported module, not a Parameter)."""
    def register(cls: type) -> type:
        _register(name, "module", cls)
        _TABLE[name].state = tuple(state)
        return cls
    return register


def export_rule(name: str, *aten_ops: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the function that exports the ATen operations `aten_ops` (overload names such as
    'aten.conv2d.default') mainly as NNEF op `name` (a standard op, or a fragment the exporter defines).

    The rule is called as `rule(emitter, *args, **kwargs)` with the ATen arguments, tensors replaced by the
    `Ref`s of the NNEF tensors already written for them, and returns the `Ref` (or tuple of `Ref`s) of its result.
    It writes operations through the emitter (`nnef_torch.exporter.emitter.Emitter`) and raises
    `Unmappable` with a reason when these arguments have no exact NNEF form.
    """
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        op = _TABLE.setdefault(name, OpEntry(name))
        for aten in aten_ops:
            if aten in _ATEN:
                raise RuntimeError(f"{aten} already has an export rule ({_ATEN[aten].aten[aten].__qualname__})")
            _ATEN[aten] = op
            op.aten[aten] = fn
        return fn
    return register


def import_rule(name: str, format: str, *operators: str, params: tuple[int, ...] = (), state: tuple[int, ...] = (),
                unused: tuple[int, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the function that reads `operators` of `format` ('nnvm', 'lightnet', ...) mainly as NNEF op `name`
    (a standard op, or a fragment of the front end's library): the symmetry of `export_rule`.

    The rule is called as `rule(builder, node)` with an `ir.builder.Builder` and the front end's node (its inputs
    as `Ref`s, its attributes, its name for messages) and returns its result `Ref`s. `params` lists the positions
    of the inputs that are parameters, so that a missing one is reported as such rather than read as an input, and
    `state` those that hold state (buffers of the module rather than Parameters), `unused` those only training
    reads (an argument read nowhere else is then no input of the graph).
    """
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        op = _TABLE.setdefault(name, OpEntry(name))
        table = _IMPORTS.setdefault(format, {})
        for operator in operators:
            if operator in _REFUSED.get(format, {}):
                raise RuntimeError(f"{format} operator {operator!r} is refused, and cannot have an import rule")
            if operator in table:
                raise RuntimeError(f"{format} operator {operator!r} already has an import rule "
                                   f"({table[operator][1].fn.__qualname__})")
            rule = ImportRule(fn, tuple(params), tuple(state), tuple(unused))
            table[operator] = (op, rule)
            op.imports[(format, operator)] = rule
        return fn
    return register


def refuse_import(format: str, reason: str, *operators: str) -> None:
    """Record operators of `format` that are known and have no NNEF form, with the reason, so that a front end
    reports them (with the operators it does not know) before converting anything."""
    table = _REFUSED.setdefault(format, {})
    for operator in operators:
        if operator in table or operator in _IMPORTS.get(format, {}):
            raise RuntimeError(f"{format} operator {operator!r} already has an import rule or a refusal")
        table[operator] = reason


def import_refusals(format: str) -> dict[str, str]:
    """Every operator of `format` that is refused, with the reason."""
    require("import:" + format)
    return dict(_REFUSED.get(format, {}))


def write_rule(name: str, format: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the function that writes NNEF op `name` in another `format` (a back end): the way back of
    `import_rule`. It is called as `rule(writer, op)` with the back end's writer and the IR operation, and writes
    that format's operators for it (raising `Unmappable` with a reason where these arguments have no form there)."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        op = _TABLE.setdefault(name, OpEntry(name))
        if format in op.writes:
            raise RuntimeError(f"op {name!r} already has a {format} write rule ({op.writes[format].__qualname__})")
        op.writes[format] = fn
        return fn
    return register


def write_rules(format: str) -> dict[str, Callable[..., Any]]:
    """Every NNEF operation a back end writes in `format`, with its rule."""
    require("write:" + format)
    return {name: op.writes[format] for name, op in _TABLE.items() if format in op.writes}


def import_rules(format: str) -> dict[str, ImportRule]:
    """Every operator of `format` that a front end reads, with its rule."""
    require("import:" + format)
    return {operator: rule for operator, (_, rule) in _IMPORTS.get(format, {}).items()}


def import_targets(format: str) -> dict[str, str]:
    """Every operator of `format` that a front end reads, with the NNEF operation its rule mainly writes."""
    require("import:" + format)
    return {operator: op.name for operator, (op, _) in _IMPORTS.get(format, {}).items()}


def export_rules() -> dict[str, Callable[..., Any]]:
    """Every ATen operation the exporter translates, with its rule."""
    require("aten")
    return {aten: op.aten[aten] for aten, op in _ATEN.items()}


def shape_rules() -> dict[str, Callable[..., Any]]:
    require("shape")
    return {name: op.shape for name, op in _TABLE.items() if op.shape is not None}


def torch_ops() -> dict[str, Callable[..., Any]]:
    require("torch")
    return {name: op.torch for name, op in _TABLE.items() if op.torch is not None}
