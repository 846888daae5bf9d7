"""The op table: one entry per NNEF operation, keyed by its NNEF name, shared by import and export.

Each facet of an entry (shape rule, torch implementation, ATen export rules, import rules of other formats) is
added by a decorator, and adding the same facet twice for one op raises, so every op has exactly one definition of
each. Export rules are also indexed by the ATen operation they translate, and import rules by the format and
operator they read; each has exactly one rule.

The table is assembled in one place, `FACETS`: the modules that add each facet, imported the first time that facet
is looked up (so that reading a graph never imports torch, and exporting never imports a front end). Every lookup
goes through the functions of this module.

A dialect (`DIALECTS`: tract_core) has a table of its own layered on the standard one: a lookup in it finds the
dialect's entries first, then the standard ones, and the standard table never sees a dialect's ops. A document
chooses its table by its `extension` lines (`dialect_of`); the decorators of a dialect's modules name it
(`@shape_rule("tract_core_erf", dialect="tract_core")`), and so do the lookups (`entry(name, dialect=...)`,
with the `dialect` an IR graph records).
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


class _Table:
    """The entries of one op table by NNEF name: the standard table, or a dialect's, whose lookups fall back on
    the standard table (`base`) for the names it does not hold."""

    def __init__(self, dialect: str | None, base: _Table | None = None):
        self.dialect = dialect
        self.base = base
        self.own: dict[str, OpEntry] = {}

    def get(self, name: str) -> OpEntry | None:
        found = self.own.get(name)
        return found if found is not None or self.base is None else self.base.get(name)

    def entries(self) -> dict[str, OpEntry]:
        """Every entry it sees, by name (its own over the standard ones)."""
        return {**(self.base.entries() if self.base is not None else {}), **self.own}


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
        "elementwise", "indexing", "nn", "patches", "recurrence", "reduce", "sampling", "tensor")) + (
        "nnef_torch.exporter.quantization",),
    "import:nnvm": tuple(_NNVM + family for family in (
        "elementwise", "nn", "nnvm_tensor", "nnvm_top", "pooling", "rearrange", "rnn", "spatial", "statistics",
        "tensor")),
    "import:lightnet": tuple(_LIGHTNET + "rules." + family for family in ("detection", "nn", "tensor")) + (
        _LIGHTNET + "rules",),  # the package records the optypes it refuses
    "import:onnx": tuple("nnef_torch.formats.onnx.rules." + family for family in (
        "control", "einsum", "elementwise", "indexing", "nn", "normalization", "quantized", "rearrangement",
        "recurrent", "reductions", "refused", "scatter", "sequences", "tensor")),
    "write:lightnet": (_LIGHTNET + "write_rules", _LIGHTNET + "write_rules_tensor"),
    "dialect:tract_core": (_TRACT + "lowering", _TRACT + "ops", _TRACT + "scan", _TRACT + "by_value"),
    "dialect:tract_transformers": ("nnef_torch.formats.tract_transformers.ops",),
}
# dialect -> the extension line that makes a document read with its table (its modules: FACETS["dialect:<name>"]);
# the first whose line a document has wins, so a dialect layered on another comes before it
DIALECTS: dict[str, tuple[str, ...]] = {"tract_transformers": ("tract_registry", "tract_transformers"),
                                        "tract_core": ("tract_registry", "tract_core")}
# dialect -> the dialect its table is layered on (its lookups fall back on that one's, then the standard table)
LAYERED_ON: dict[str, str] = {"tract_transformers": "tract_core"}
_LOADED: set[str] = set()
_STANDARD = _Table(None)
_DIALECTS = {dialect: _Table(dialect, _STANDARD) for dialect in DIALECTS if dialect not in LAYERED_ON}
_DIALECTS.update({dialect: _Table(dialect, _DIALECTS[base]) for dialect, base in LAYERED_ON.items()})
_TYPINGS: dict[str, Any] = {}  # dialect -> its reading of types (`dialect_typing`); the spec's where it has none


def require(*facets: str) -> None:
    """Import the modules that add `facets` to the table (once)."""
    for facet in facets:
        if facet not in _LOADED:
            _LOADED.add(facet)
            for module in FACETS.get(facet, ()):  # a facet nothing adds (a format without a writer) is empty
                importlib.import_module(module)


def _table(dialect: str | None) -> _Table:
    if dialect is None:
        return _STANDARD
    table = _DIALECTS.get(dialect)
    if table is None:
        raise ValueError(f"no op table for dialect {dialect!r} (dialects: {', '.join(DIALECTS)})")
    return table


def _dialect_facet(dialect: str | None) -> tuple[str, ...]:
    """The facets that add `dialect`'s ops to its table and to the tables it is layered on (none for the standard
    table)."""
    if dialect is None:
        return ()
    return (*_dialect_facet(LAYERED_ON.get(dialect)), "dialect:" + dialect)


def dialect_of(extensions: tuple[str, ...] | list[str]) -> str | None:
    """The dialect whose table a document reads with: the one whose extension line (`extension tract_registry
    tract_core;`) is among the document's `extensions` (names in order); None for standard NNEF."""
    names = list(extensions)
    for dialect, line in DIALECTS.items():
        if any(names[i:i + len(line)] == list(line) for i in range(len(names) - len(line) + 1)):
            return dialect
    return None


def entry(name: str, *facets: str, dialect: str | None = None) -> OpEntry | None:
    """The entry of NNEF op `name` in the standard table, or in `dialect`'s table (its own ops, then the standard
    ones), with its shape rule and the other `facets` ('torch', ...) loaded."""
    table = _table(dialect)
    require("shape", *facets, *_dialect_facet(dialect))
    return table.get(name)


def _register(name: str, facet: str, fn: Callable[..., Any], dialect: str | None = None) -> OpEntry:
    op = _table(dialect).own.setdefault(name, OpEntry(name))
    if getattr(op, facet) is not None:
        where = f" in the {dialect} table" if dialect is not None else ""
        raise RuntimeError(f"op {name!r} already has a {facet} rule{where} ({getattr(op, facet).__qualname__})")
    setattr(op, facet, fn)
    return op


def shape_rule(name: str, *, dialect: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the shape rule of NNEF op `name`.

    The rule keeps the NNEF signature: tensor inputs positionally (a shape tuple each; a list of shapes for a
    tensor-array input; `()` for a literal), then the attributes as keywords with their NNEF names (a name that is
    a Python keyword gets a trailing underscore: selu's `lambda_`). It returns the
    result shape, a tuple of shapes for several results, or a list of shapes for an array result, and raises
    `NNEFShapeError` (without location; the caller adds it) when argument validity fails. `dialect`: the op is
    one of that dialect's (its table only).
    """
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _register(name, "shape", fn, dialect)
        return fn
    return register


def torch_op(name: str, *, typed: bool = False, dialect: str | None = None
             ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the torch implementation of NNEF op `name`.

    The function keeps the NNEF signature like a shape rule, with tensors (or Python numbers where a literal was
    given) in place of shapes, and returns a tensor, a tuple of tensors for several results, or a list for an array
    result. It must also trace: the importer calls it once per operation with `torch.fx.Proxy` inputs, so the
    attribute logic runs at load time and only torch calls reach the generated code. It may branch on attributes
    and on `torch_common.static_shape` / `static_dtype` of its inputs, never on tensor values. With `typed=True` it
    also receives the operation's generic type as `dtype=`. `dialect`: as `shape_rule`'s.
    """
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _register(name, "torch", fn, dialect).typed = typed
        return fn
    return register


def lowering_rule(name: str, *, dialect: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register how the lowerer writes op `name` of `dialect` as other operations (`nnef_torch.formats.dialects`):
    the rule is called as `rule(lowerer, arguments, generic_type, location, hint)` and returns the op's result(s).
    The standard table has none: the lowerer writes standard ops as they are."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _register(name, "lower", fn, dialect)
        return fn
    return register


def lowering_rule_of(name: str, dialect: str | None) -> Callable[..., Any] | None:
    """How the lowerer writes op `name` of a document read with `dialect`'s table, if that table has a rule for
    it (None for a standard document)."""
    if dialect is None:
        return None
    op = entry(name, dialect=dialect)
    return op.lower if op is not None else None


def dialect_typing(dialect: str) -> Callable[[type], type]:
    """Register how documents read with `dialect`'s table are typed where the spec types them statically (a class
    of `nnef_torch.ir.types.Typing`, made once): the checker and the lowerer of such a document ask it. A dialect
    registers one at most; one that registers none is typed by the spec."""
    def register(cls: type) -> type:
        _table(dialect)  # a dialect of DIALECTS
        if dialect in _TYPINGS:
            raise RuntimeError(f"dialect {dialect!r} already has a typing ({type(_TYPINGS[dialect]).__qualname__})")
        _TYPINGS[dialect] = cls()
        return cls
    return register


def typing_of(dialect: str | None) -> Any:
    """The reading of types of documents read with `dialect`'s table (`dialect_typing`), or None: the spec's."""
    if dialect is None:
        return None
    _table(dialect)
    require(*_dialect_facet(dialect))
    found = _TYPINGS.get(dialect)
    return found if found is not None or dialect not in LAYERED_ON else typing_of(LAYERED_ON[dialect])


def torch_module(name: str, *, state: tuple[str, ...] = (), dialect: str | None = None) -> Callable[[type], type]:
    """Register the torch implementation of NNEF op `name` as an `nn.Module` class, for operations whose behaviour
    depends on the module's training mode (batch statistics, dropout): the importer makes one submodule per
    operation, constructed with the operation's attributes (NNEF names) and called with its tensor inputs. In eval
    mode it must compute what the op's NNEF definition says. `state`: the tensor inputs it updates in training (a
    variable read there is a buffer of the imported module, not a Parameter). `dialect`: as `shape_rule`'s."""
    def register(cls: type) -> type:
        _register(name, "module", cls, dialect).state = tuple(state)
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
        op = _STANDARD.own.setdefault(name, OpEntry(name))
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
        op = _STANDARD.own.setdefault(name, OpEntry(name))
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
        op = _STANDARD.own.setdefault(name, OpEntry(name))
        if format in op.writes:
            raise RuntimeError(f"op {name!r} already has a {format} write rule ({op.writes[format].__qualname__})")
        op.writes[format] = fn
        return fn
    return register


def write_rules(format: str) -> dict[str, Callable[..., Any]]:
    """Every NNEF operation a back end writes in `format`, with its rule."""
    require("write:" + format)
    return {name: op.writes[format] for name, op in _STANDARD.own.items() if format in op.writes}


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


def shape_rules(dialect: str | None = None) -> dict[str, Callable[..., Any]]:
    """Every shape rule of the standard table, or of `dialect`'s (its own ops and the standard ones)."""
    table = _table(dialect)
    require("shape", *_dialect_facet(dialect))
    return {name: op.shape for name, op in table.entries().items() if op.shape is not None}


def torch_ops(dialect: str | None = None) -> dict[str, Callable[..., Any]]:
    """Every torch implementation of the standard table, or of `dialect`'s."""
    table = _table(dialect)
    require("torch", *_dialect_facet(dialect))
    return {name: op.torch for name, op in table.entries().items() if op.torch is not None}
