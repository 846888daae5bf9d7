"""IR graph -> NNEF document: one flat invocation per operation, tensor inputs positional and attributes by name
(those equal to their declared default are left out), preceded by the library fragments the graph uses (the
exporter's, or a front end's; see `ir.builder`). `graph_file` hands the document over in memory, printing its text
only when asked; `graph_text` prints it."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nnef_torch.errors import ExportError, Location
from nnef_torch.format import ast
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.format.parser import parse_expression
from nnef_torch.format.printer import print_assignment, print_fragment, print_literal
from nnef_torch.ir.builder import Library, default_value, is_tensor_param
from nnef_torch.ir.graph import Graph, Operation, Ref
from nnef_torch.ir.values import Extent
from nnef_torch.stdlib import extension_fragments, standard_fragments

FRAGMENT_EXTENSIONS = ("KHR_enable_fragment_definitions", "KHR_enable_operator_expressions")


def _value(value: Any) -> ast.Expr:
    if isinstance(value, Ref):
        return ast.Identifier(value.name)
    if isinstance(value, Extent):  # a symbolic extent: its expression over the document's declared symbols
        return parse_expression(value.expr)
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
    except (ExportError, TypeError):  # no literal (inf, a symbolic extent): no default; printing names it
        return False


def _assignment(op: Operation, library: Library, loc: Location | None = None) -> ast.Assignment:
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
    return ast.Assignment(lhs, call) if loc is None else ast.Assignment(lhs, call, loc)


def _needs_generic(op: Operation, decl: ast.Fragment) -> bool:
    """Write `<type>` only where the inputs do not determine it (external, variable, constant, cast)."""
    for param in decl.params:
        if isinstance(param.type, ast.TensorType) and param.type.item is not None and param.type.item.name == "?":
            if isinstance(op.inputs.get(param.name), Ref):
                return False
    return True


def _head(graph: Graph, fragments: Sequence[str], library: Library) -> list[str]:
    """The lines of the document before its first operation: version, extensions, fragments, graph header."""
    lines = ["version 1.0;"]
    if fragments:
        lines.append(f"extension {', '.join(FRAGMENT_EXTENSIONS)};")
    lines.append("")
    lines.extend(print_fragment(library[name]) for name in fragments)
    lines.append(f"graph {graph.name}( {', '.join(graph.inputs)} ) -> ( {', '.join(graph.outputs)} )")
    lines.append("{")
    return lines


def graph_text(graph: Graph, fragments: Sequence[str] = (), library: Library | None = None) -> str:
    """The graph.nnef text of `graph`, defining the fragments of `library` named in `fragments` (in that order;
    the extension library's by default)."""
    if library is None:
        library = extension_fragments()
    lines = _head(graph, fragments, library)
    lines.extend(f"    {print_assignment(_assignment(op, library))}" for op in graph.operations)
    lines.append("}")
    return "\n".join(lines) + "\n"


def graph_document(graph: Graph, fragments: Sequence[str] = (), library: Library | None = None,
                   file: str = "graph.nnef") -> ast.Document:
    """The document `graph_text` prints, built without printing: each statement located at the line it has in that
    text of `file`."""
    if library is None:
        library = extension_fragments()
    head = _head(graph, fragments, library)
    first = 1 + sum(line.count("\n") + 1 for line in head)  # the line of the first operation
    body = tuple(_assignment(op, library, Location(file, first + i, 5)) for i, op in enumerate(graph.operations))
    definition = ast.GraphDef(graph.name, tuple(graph.inputs), tuple(graph.outputs), body,
                              Location(file, first - 2, 1))
    extensions = FRAGMENT_EXTENSIONS if fragments else ()
    return ast.Document("1.0", extensions, tuple(library[name] for name in fragments), definition,
                        Location(file, 1, 1), Location(file, 1, 9))


def as_nnef(source: str | None) -> str:
    """How messages name the NNEF form of a model of another format read from `source`."""
    return f"{source} (as NNEF)" if source else "graph.nnef"


def graph_file(graph: Graph, fragments: Sequence[str] = (), library: Library | None = None,
               file: str = "graph.nnef") -> GraphFile:
    """`graph` as a model's graph.nnef held in memory: its document now, its text when first asked for."""
    if library is None:
        library = extension_fragments()
    return GraphFile(document=graph_document(graph, fragments, library, file),
                     printer=lambda: graph_text(graph, fragments, library), size=_least_length(graph), file=file)


def _least_length(graph: Graph) -> int:
    """Fewer characters than the printed graph has: two per literal item and per operation."""
    def items(value: Any) -> int:
        if isinstance(value, (list, tuple)):
            return sum(items(item) for item in value) + 1
        return 1
    return sum(2 + 2 * (items(list(op.inputs.values())) + items(list(op.attribs.values())))
               for op in graph.operations)
