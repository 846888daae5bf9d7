"""The tract target for an exported module (`save(..., target="tract")`): its graph as tract reads it.

With symbolic extents (`dynamic_shapes=`), each symbol is declared (`extension tract_symbol S;`) with the range
torch.export gave it (`extension tract_assert S >= 1;`, which tract needs to simplify shapes), and each input is
declared with its symbols (`external<scalar>(shape = [B, S, 64])`). The operations are written relative to their
inputs where standard NNEF can, and otherwise with the symbols (`reshape(x, shape = [B, S])`,
`tract_core_range(0, S, 1)`, an `Extent` of the IR), so tract runs the file at any value of the symbols.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from nnef_torch.format import ast
from nnef_torch.format.parser import parse_expression
from nnef_torch.format.printer import print_assignment, print_fragment
from nnef_torch.formats.tract_core import declarations, recurrence_fragments
from nnef_torch.ir.document import FRAGMENT_EXTENSIONS, graph_document
from nnef_torch.ir.graph import Graph
from nnef_torch.stdlib import extension_fragments

REGISTRY = "tract_registry tract_core"


def exported_text(graph: Graph, fragments: tuple[str, ...], dims: Mapping[str, tuple[int | str, ...]],
                  symbols: Mapping[str, tuple[int, int | None]]) -> str:
    """The graph.nnef of an exported graph for tract: `dims` gives each input's shape with its symbols by name,
    `symbols` each symbol's range (lowest, highest or None). `fragments` are defined from the exporter's library
    (`defined_fragments`)."""
    library = defined_fragments()
    document = graph_document(graph, fragments, {**library, **declarations()})
    lines = ["version 1.0;", "", f"extension {REGISTRY};"]
    if fragments:
        lines.append(f"extension {', '.join(FRAGMENT_EXTENSIONS)};")
    for name, (low, high) in symbols.items():
        lines.append(f"extension tract_symbol {name};")
        lines.append(f"extension tract_assert {name} >= {low};")
        if high is not None:
            lines.append(f"extension tract_assert {name} <= {high};")
    lines.append("")
    lines.extend(print_fragment(library[name]) for name in fragments)
    lines.append(f"graph {graph.name}( {', '.join(graph.inputs)} ) -> ( {', '.join(graph.outputs)} )")
    lines.append("{")
    for statement in document.graph.body:
        lines.append("    " + print_assignment(_declared(statement, dims)))
    lines.append("}")
    return "\n".join(lines) + "\n"


def defined_fragments() -> dict[str, ast.Fragment]:
    """The fragments a document for tract may define: the exporter's extension library, and the recurrent layers
    written as tract_core_scan (`recurrence.nnef`)."""
    return {**extension_fragments(), **recurrence_fragments()}


def _declared(statement: ast.Assignment, dims: Mapping[str, tuple[int | str, ...]]) -> ast.Assignment:
    """An `external` statement with its symbolic extents (others as they are)."""
    call = statement.rhs
    if not isinstance(call, ast.Invocation) or call.name != "external" or not isinstance(statement.lhs,
                                                                                        ast.Identifier):
        return statement
    shape = dims.get(statement.lhs.name)
    if shape is None:
        return statement
    extents = tuple(ast.Literal(d, "integer") if isinstance(d, int) else parse_expression(d) for d in shape)
    args = tuple(ast.Argument("shape", ast.ArrayExpr(extents)) if arg.name == "shape" else arg for arg in call.args)
    return dataclasses.replace(statement, rhs=dataclasses.replace(call, args=args))


__all__ = ["defined_fragments", "exported_text"]
