"""IR graph -> NNEF document text: one flat invocation per operation, tensor inputs positional and attributes by
name (those equal to their declared default are left out), preceded by the library fragments the graph uses (the
exporter's, or a front end's; see `ir.builder`)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nnef_torch.errors import ExportError
from nnef_torch.format import ast
from nnef_torch.format.printer import print_assignment, print_fragment, print_literal
from nnef_torch.ir.builder import Library, default_value, is_tensor_param
from nnef_torch.ir.graph import Graph, Operation, Ref
from nnef_torch.stdlib import extension_fragments, standard_fragments

FRAGMENT_EXTENSIONS = ("KHR_enable_fragment_definitions", "KHR_enable_operator_expressions")


def _value(value: Any) -> ast.Expr:
    if isinstance(value, Ref):
        return ast.Identifier(value.name)
    if isinstance(value, list):
        return ast.ArrayExpr(tuple(_value(item) for item in value))
    if isinstance(value, tuple):
        return ast.TupleExpr(tuple(_value(item) for item in value))
    kind = {bool: "logical", int: "integer", float: "scalar", str: "string"}[type(value)]
    return ast.Literal(value, kind)


def _same(a: Any, b: Any) -> bool:
    """Equal as NNEF values (a tuple and a list of the same items are not)."""
    try:
        return type(a) is type(b) and print_literal(a) == print_literal(b)
    except ExportError:  # a value with no literal (inf) is no default: printing it refuses it, naming it
        return False


def _assignment(op: Operation, library: Library) -> ast.Assignment:
    decl = standard_fragments().get(op.name) or library[op.name]
    args = []
    tensors = [p for p in decl.params if p.name in op.inputs and is_tensor_param(p.type)]
    while tensors and tensors[-1].default is not None and _same(op.inputs[tensors[-1].name],
                                                                default_value(tensors[-1].default)):
        tensors.pop()  # trailing tensor inputs left at their default (a conv without bias)
    for param in decl.params:
        if param in tensors:
            args.append(ast.Argument(None, _value(op.inputs[param.name])))
        elif param.name in op.attribs:
            value = op.attribs[param.name]
            if param.default is not None and _same(value, default_value(param.default)):
                continue
            args.append(ast.Argument(param.name, _value(value)))
    generic = ast.PrimitiveType(op.dtype) if op.dtype is not None and _needs_generic(op, decl) else None
    outputs = [_value(op.outputs[result.name]) for result in decl.results]
    lhs = outputs[0] if len(outputs) == 1 else ast.TupleExpr(tuple(outputs))
    call = ast.Invocation(op.name, generic, tuple(args))
    if op.location is not None:  # where the operation was read, for a value that cannot be printed
        call = ast.Invocation(op.name, generic, tuple(args), op.location)
    return ast.Assignment(lhs, call)


def _needs_generic(op: Operation, decl: ast.Fragment) -> bool:
    """Write `<type>` only where the inputs do not determine it (external, variable, constant, cast)."""
    for param in decl.params:
        if isinstance(param.type, ast.TensorType) and param.type.item is not None and param.type.item.name == "?":
            if isinstance(op.inputs.get(param.name), Ref):
                return False
    return True


def graph_text(graph: Graph, fragments: Sequence[str] = (), library: Library | None = None) -> str:
    """The graph.nnef text of `graph`, defining the fragments of `library` named in `fragments` (in that order;
    the extension library's by default)."""
    if library is None:
        library = extension_fragments()
    lines = ["version 1.0;"]
    if fragments:
        lines.append(f"extension {', '.join(FRAGMENT_EXTENSIONS)};")
    lines.append("")
    for name in fragments:
        lines.append(print_fragment(library[name]))
    inputs = ", ".join(graph.inputs)
    outputs = ", ".join(graph.outputs)
    lines.append(f"graph {graph.name}( {inputs} ) -> ( {outputs} )")
    lines.append("{")
    lines.extend(f"    {print_assignment(_assignment(op, library))}" for op in graph.operations)
    lines.append("}")
    return "\n".join(lines) + "\n"
