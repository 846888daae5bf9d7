"""`ops=`: an export written with a given list of NNEF operations only.

An accelerator's importer knows a fixed list of operation names and no fragments (AMD MIVisionX's NNEF importer
maps 28 names and raises on any other). With `ops=`, every fragment of the exported graph that is not in the list
(a compound standard operation such as `linear` or `layer_norm`'s `moments`, a fragment of the extension library
such as `gelu_erf` or `hard_swish`) is expanded into its body, recursively, until each operation is in the list.
The expansion is the reader's own: the graph is handed to `ir.lower` as a document (`ir.document.graph_document`,
built without printing) with the listed names kept whole. The result defines only the fragments it still uses
(listed ones, and those their bodies invoke). `external` and `variable` are always allowed.

What is still outside the list (a primitive such as `exp`, or `constant`) stops the export: one `ExportError`
names every such operation with the torch node, source line and module it was written for (when known), and
says which names the list would need.
"""
from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from nnef_torch.errors import ExportError, NNEFError
from nnef_torch.exporter.emitter import Emitter, exporter_fragments
from nnef_torch.exporter.model import Model
from nnef_torch.exporter.naming import module_path
from nnef_torch.exporter.problems import Problem, node_problem
from nnef_torch.exporter.quantization import quant_text
from nnef_torch.ir.document import graph_document, graph_text
from nnef_torch.ir.graph import Graph, Operation
from nnef_torch.ir.lower import lower
from nnef_torch.stdlib import standard_fragments

ALWAYS = frozenset({"external", "variable"})  # every graph declares its inputs and weights
FILE = "graph.nnef"

# the traced node a tensor of the graph was written for (None: unknown)
Locate = Callable[[str], "torch.fx.Node | None"]

__all__ = ["ALWAYS", "checked_ops", "known_ops", "restrict", "restrict_model"]


def known_ops() -> frozenset[str]:
    """The names `ops=` may hold: the standard operations and the fragments of the extension library."""
    return frozenset(standard_fragments()) | frozenset(exporter_fragments())


def checked_ops(ops: Any, target: str = "standard") -> frozenset[str] | None:
    """`ops=` as given to export / save (None, or an iterable of operation names) as the set of names allowed,
    `external` and `variable` added; `ExportError` for anything else, an unknown name (with the nearest known
    ones suggested) or a target it does not apply to."""
    if ops is None:
        return None
    if isinstance(ops, (str, bytes)) or not isinstance(ops, Iterable):
        raise ExportError(f"ops= takes a list of NNEF operation names (e.g. ['conv', 'relu', 'add']), not "
                          f"{type(ops).__name__} {ops!r}")
    names = list(ops)
    wrong = [name for name in names if not isinstance(name, str)]
    if wrong:
        raise ExportError(f"ops= holds operation names (str), found {', '.join(map(repr, wrong))}")
    known = known_ops()
    unknown = [name for name in dict.fromkeys(names) if name not in known]
    if unknown:
        hints = []
        for name in unknown:
            near = [known_name for known_name in sorted(known) if known_name == name.lower()
                    or len(known_name) > 2 and name.lower().startswith(known_name)]
            near = list(dict.fromkeys(near + difflib.get_close_matches(name.lower(), sorted(known), n=3)))[:3]
            hints.append(f"'{name}'" + (f" (did you mean {', '.join(map(repr, near))}?)" if near else ""))
        raise ExportError(f"ops= names {len(unknown)} operation(s) that are neither standard NNEF nor fragments of "
                          f"nnef_torch's extension library: {'; '.join(hints)}. The known names are NNEF's "
                          "standard operations (nnef_torch/stdlib/stdlib.nnef) and the extension fragments "
                          "(nnef_torch/stdlib/extensions.nnef)")
    if target == "tract":
        raise ExportError("ops= restricts a standard NNEF export (target='standard'); target='tract' writes tract's "
                          "own operations, which ops= does not cover")
    return frozenset(names) | ALWAYS


def restrict(graph: Graph, fragments: Sequence[str], ops: frozenset[str], locate: Locate | None = None
             ) -> tuple[Graph, tuple[str, ...]]:
    """`graph` (defining the extension fragments named in `fragments`) with every operation not in `ops` expanded
    into the body of its fragment, recursively, and the fragments the result still uses (each after those its body
    invokes). Raises `ExportError` naming every operation that is left outside `ops`; `locate` gives the traced
    node of a tensor, for the source line."""
    if all(op.name in ops for op in graph.operations):
        return graph, tuple(fragments)  # nothing to expand: the fragments defined are those used
    doc = graph_document(graph, fragments, exporter_fragments(), FILE)
    assert doc.graph is not None
    statements = {statement.loc.line or 0: op for statement, op in zip(doc.graph.body, graph.operations)}
    try:
        lowered = lower(doc, atomic=lambda name: name in ops)
    except NNEFError as error:  # the graph read before it was written: an invariant of our own broke
        raise ExportError(f"{graph.name}: expanding its fragments for ops= failed: {error} (a bug in nnef_torch)"
                          ) from error
    outside = [op for op in lowered.operations if op.name not in ops]
    if outside:
        raise _refusal(graph.name, outside, statements, locate)
    used = Emitter()  # the fragments still invoked, each after those it invokes
    for name in fragments:
        if any(op.name == name for op in lowered.operations):
            used.define(name)
    quantization = {name: spec for name, spec in graph.quantization.items() if name in lowered.tensors}
    restricted = dataclasses.replace(lowered, version=graph.version, extensions=graph.extensions,
                                     custom_fragments=(), quantization=quantization, dialect=graph.dialect)
    return restricted, tuple(used.fragments)


def _refusal(name: str, outside: list[Operation], statements: dict[int, Operation], locate: Locate | None
             ) -> ExportError:
    """One error with a problem per operation of the exported graph that expands to operations outside the list."""
    groups: dict[int, tuple[dict[str, None], dict[str, None]]] = {}  # statement line -> names, fragments expanded
    for op in outside:
        line = (op.location.line if op.location is not None else None) or 0
        names, fragments = groups.setdefault(line, ({}, {}))
        names[op.name] = None
        fragments.update(dict.fromkeys(scope.split("#")[0] for scope in op.scope))
    problems: list[str] = [_problem(list(names), list(fragments), statements.get(line), locate)
                           for line, (names, fragments) in groups.items()]
    needed = dict.fromkeys(name for names, _ in groups.values() for name in names)
    wholes = dict.fromkeys(fragment for _, fragments in groups.values() for fragment in fragments)
    alternatives = f" (or, kept whole, fragments they come from: {', '.join(map(repr, wholes))})" if wholes else ""
    return ExportError(f"{name} cannot be written with the operations of ops= only: {len(problems)} operation(s) "
                       f"need others; ops= would need {', '.join(map(repr, needed))}{alternatives}", problems)


def _problem(names: list[str], fragments: list[str], source: Operation | None, locate: Locate | None) -> Problem:
    shown = ", ".join(map(repr, names))
    reason = f"{shown} {'is' if len(names) == 1 else 'are'} not in ops="
    if fragments:
        reason += f" (expanding {', '.join(map(repr, fragments))})"
    written = next(source.output_refs(), None) if source is not None else None
    if written is not None:
        reason += f", writing '{written.name}'"
    node = locate(written.name) if written is not None and locate is not None else None
    if node is None:
        return Problem(reason)
    path = module_path(node)
    return node_problem(node, reason + (f", in module '{path}'" if path else ""))


def restrict_model(model: Model, ops: frozenset[str], locate: Locate | None = None) -> Model:
    """`model` written with the operations of `ops` only (`restrict`): its graph, text, fragments and graph.quant;
    its tensors, their storage and its symbols are those of `model`."""
    graph, fragments = restrict(model.graph, model.fragments, ops, locate)
    if graph is model.graph:
        return model
    return dataclasses.replace(model, graph=graph, text=graph_text(graph, fragments), fragments=fragments,
                               quant_text=quant_text(graph))
