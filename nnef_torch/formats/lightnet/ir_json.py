"""LightNet's JSON IR: `{"ops": [op, ...]}`, each op `{"name", "optype", "tensors_in", "tensors_out", "params"}`,
its tensors `{"arg_name", "name"}` and its params `{"arg_name", "value"}` (a number, string, boolean or a non-empty
array of one of them).

`parse_ir` checks the container against the optype table (`optypes`): known optypes (with a clear refusal for
compiled IRs), op names unique, every tensor and param `arg_name` the optype's, each once, every param present and
of its declared type, every input tensor defined by an earlier op's outputs, every output tensor new. Every error
says which op, at the line and column where the op begins in the file (when the text is at hand). Keys are read
by name, so LightNet's hand layout and `tools/il2json`'s sorted-key layout read alike.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nnef_torch.errors import ForeignFormatError, Location, NNEFUnsupportedError
from nnef_torch.formats.json_file import item_positions, locate
from nnef_torch.formats.lightnet.optypes import OPTYPES, OpType, check_param, compiled

_OP_KEYS = ("name", "optype", "tensors_in", "tensors_out", "params")
_OFFSET_KEYS = ("offset_h", "offset_l")  # memory offsets a compiled IR's tensors carry; no meaning here


@dataclass(frozen=True)
class LnOp:
    index: int
    name: str
    optype: str
    tensors_in: dict[str, str]  # arg_name -> tensor name, in file order
    tensors_out: dict[str, str]
    params: dict[str, Any]  # arg_name -> JSON value
    location: Location = field(compare=False)

    @property
    def where(self) -> str:
        return f"op '{self.name}' ({self.optype}, ops[{self.index}])"

    @property
    def definition(self) -> OpType:
        return OPTYPES[self.optype]


@dataclass(frozen=True)
class IR:
    file: str | None
    ops: tuple[LnOp, ...]
    producers: dict[str, tuple[LnOp, str]]  # tensor name -> (the op that defines it, its arg_name)


def parse_ir(document: Any, file: str | None, text: str | bytes | None = None) -> IR:
    """The checked ops of a parsed JSON IR document; `text`, the file's text, lets errors give line and column."""
    if not isinstance(document, dict):
        raise ForeignFormatError(f"expected a JSON object with an 'ops' array, found {_kind(document)}",
                                 Location(file))
    if "ops" not in document:
        raise ForeignFormatError("the document has no 'ops' array (a LightNet IR is {\"ops\": [...]})", Location(file))
    raw_ops = document["ops"]
    if not isinstance(raw_ops, list):
        raise ForeignFormatError(f"'ops' should be an array, found {_kind(raw_ops)}", _ops_location(file, text))
    if not raw_ops:
        raise ForeignFormatError("'ops' is empty: the model has no operators", _ops_location(file, text))
    positions = op_positions(text) if text is not None else None
    if positions is not None and len(positions) != len(raw_ops):
        positions = None

    def at(index: int) -> Location:
        if positions is None:
            return Location(file)
        line, column = positions[index]
        return Location(file, line, column)

    _check_optypes(raw_ops, file, at)
    ops: list[LnOp] = []
    names: dict[str, int] = {}
    producers: dict[str, tuple[LnOp, str]] = {}
    for index, raw in enumerate(raw_ops):
        op = _op(raw, index, file, at(index))
        if op.name in names:
            raise ForeignFormatError(f"{op.where}: op name '{op.name}' is already the name of ops[{names[op.name]}]",
                                     op.location)
        names[op.name] = index
        for arg, tensor in op.tensors_in.items():
            if tensor not in producers:
                later = next((other for other in raw_ops[index:] if _defines(other, tensor)), None)
                hint = (f"; it is defined by a later op ('{later.get('name')}'): ops must come in the order they run"
                        if later is not None else "")
                raise ForeignFormatError(f"{op.where}: input '{arg}' reads tensor '{tensor}', which no earlier op "
                                         f"defines{hint}", op.location)
        for arg, tensor in op.tensors_out.items():
            if tensor in producers:
                first, first_arg = producers[tensor]
                raise ForeignFormatError(f"{op.where}: output '{arg}' defines tensor '{tensor}', already defined by "
                                         f"{first.where}", op.location)
            producers[tensor] = (op, arg)
        ops.append(op)
    return IR(file, tuple(ops), producers)


def _check_optypes(raw_ops: list[Any], file: str | None, at: Any) -> None:
    """Scan before reading: every op whose optype is not a generic LightNet optype, in one error."""
    unknown, built = [], []
    for index, raw in enumerate(raw_ops):
        optype = raw.get("optype") if isinstance(raw, dict) else None
        if not isinstance(optype, str) or optype in OPTYPES:
            continue
        name = raw.get("name")
        where = f"  ops[{index}]" + (f" '{name}'" if isinstance(name, str) else "") + f" ({optype})"
        if positions_known := at(index).line:
            where += f" at line {positions_known}"
        why = compiled(optype)
        (built if why is not None else unknown).append(where + (f": {why}" if why else ""))
    if built:
        listed = "\n".join(built + unknown)
        raise NNEFUnsupportedError(
            f"this is a compiled LightNet IR: {len(built)} op(s) are bound to an architecture by LightNet's optimizer "
            "(ln_context_compile). nnef_torch reads the generic IR a model is written in (what `lightnet -c` and "
            f"il2json take), not the compiled one:\n{listed}", Location(file))
    if unknown:
        raise NNEFUnsupportedError(f"{len(unknown)} op(s) have optypes LightNet does not define:\n" + "\n".join(unknown)
                                   + f"\n(known optypes: {', '.join(sorted(OPTYPES))})", Location(file))


def _op(raw: Any, index: int, file: str | None, location: Location) -> LnOp:
    def fail(message: str) -> ForeignFormatError:
        return ForeignFormatError(f"ops[{index}]{label}: {message}", location)

    label = ""
    if not isinstance(raw, dict):
        raise fail(f"an op should be a JSON object, found {_kind(raw)}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise fail("has no 'name' string" if name is None else f"'name' should be a non-empty string, found "
                   f"{_kind(name)}")
    label = f" '{name}'"
    missing = [key for key in _OP_KEYS if key not in raw]
    if missing:
        raise fail(f"has no {', '.join(repr(key) for key in missing)} (an op has {', '.join(_OP_KEYS)})")
    extra = sorted(set(raw) - set(_OP_KEYS))
    if extra:
        raise fail(f"has unknown keys {extra} (an op has {', '.join(_OP_KEYS)})")
    optype = raw["optype"]
    if not isinstance(optype, str):
        raise fail(f"'optype' should be a string, found {_kind(optype)}")
    definition = OPTYPES[optype]
    label = f" '{name}' ({optype})"
    tensors_in = _tensors(raw["tensors_in"], "tensors_in", definition.tensors_in, fail)
    tensors_out = _tensors(raw["tensors_out"], "tensors_out", definition.tensors_out, fail)
    params = _params(raw["params"], definition, fail)
    return LnOp(index, name, optype, tensors_in, tensors_out, params, location)


def _tensors(raw: Any, key: str, expected: tuple[str, ...], fail: Any) -> dict[str, str]:
    if not isinstance(raw, list):
        raise fail(f"'{key}' should be an array, found {_kind(raw)}")
    found: dict[str, str] = {}
    for position, item in enumerate(raw):
        if not isinstance(item, dict):
            raise fail(f"{key}[{position}] should be an object with arg_name and name, found {_kind(item)}")
        extra = sorted(set(item) - {"arg_name", "name", *_OFFSET_KEYS})
        if extra:
            raise fail(f"{key}[{position}] has unknown keys {extra} (a tensor has arg_name and name)")
        arg, tensor = item.get("arg_name"), item.get("name")
        if not isinstance(arg, str):
            raise fail(f"{key}[{position}] has no 'arg_name' string")
        if not isinstance(tensor, str) or not tensor:
            raise fail(f"{key}[{position}] ('{arg}') has no tensor 'name' string")
        if arg not in expected:
            raise fail(f"{key}[{position}] has arg_name '{arg}', which this optype does not have "
                       f"({_listing(expected)})")
        if arg in found:
            raise fail(f"{key} gives arg_name '{arg}' twice")
        found[arg] = tensor
    lacking = [arg for arg in expected if arg not in found]
    if lacking:
        raise fail(f"{key} lacks {', '.join(repr(arg) for arg in lacking)} (this optype's {key}: "
                   f"{_listing(expected)})")
    return found


def _params(raw: Any, definition: OpType, fail: Any) -> dict[str, Any]:
    if not isinstance(raw, list):
        raise fail(f"'params' should be an array, found {_kind(raw)}")
    expected = [param.name for param in definition.params]
    found: dict[str, Any] = {}
    for position, item in enumerate(raw):
        if not isinstance(item, dict):
            raise fail(f"params[{position}] should be an object with arg_name and value, found {_kind(item)}")
        extra = sorted(set(item) - {"arg_name", "value"})
        if extra:
            raise fail(f"params[{position}] has unknown keys {extra} (a param has arg_name and value)")
        arg = item.get("arg_name")
        if not isinstance(arg, str):
            raise fail(f"params[{position}] has no 'arg_name' string")
        param = definition.param(arg)
        if param is None:
            raise fail(f"has no param '{arg}' (its params: {_listing(tuple(expected))})")
        if arg in found:
            raise fail(f"param '{arg}' is given twice")
        if "value" not in item:
            raise fail(f"param '{arg}' has no 'value'")
        problem = check_param(definition, param, item["value"])
        if problem is not None:
            raise fail(f"param '{arg}' {problem}")
        found[arg] = item["value"]
    lacking = [name for name in expected if name not in found]
    if lacking:
        raise fail(f"lacks param(s) {', '.join(repr(name) for name in lacking)} (LightNet requires every param of "
                   f"{definition.name}: {_listing(tuple(expected))})")
    return found


def _defines(raw: Any, tensor: str) -> bool:
    outputs = raw.get("tensors_out") if isinstance(raw, dict) else None
    return isinstance(outputs, list) and any(isinstance(item, dict) and item.get("name") == tensor
                                             for item in outputs)


def _listing(names: tuple[str, ...]) -> str:
    return ", ".join(names) if names else "none"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _ops_location(file: str | None, text: str | bytes | None) -> Location:
    """Where the value of 'ops' begins (of the last 'ops' key, where it repeats), or the file alone."""
    if text is not None:
        try:
            return Location(file, *locate(text, ["ops"]))
        except (KeyError, IndexError, ValueError):
            pass
    return Location(file)


def op_positions(text: str | bytes) -> list[tuple[int, int]] | None:
    """(line, column) where each item of the top-level 'ops' array begins (of the last 'ops' key, the one the parsed
    document holds, where the key repeats), or None where the text is not laid out as expected (the parsed
    document was checked already; this only finds places). Linear in the text; no value is built."""
    try:
        return item_positions(text, ["ops"])
    except (KeyError, IndexError, ValueError):
        return None
