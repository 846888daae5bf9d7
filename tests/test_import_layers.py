"""The layer rules of docs/architecture.md, checked over the package's sources with `ast` (nothing is imported).

- `format/` (NNEF's own files) imports none of the layers above it (the IR, the op table, the reader, the front
  ends, the importer, the exporter, the writers, QAT or the tools);
- `ir/` imports neither the reader, the front ends, the importer, the exporter, the writers, QAT nor the tools, not
  even inside a function;
- the importer does not import the writers at module level (`NNEFModule.save` reaches them when it is called);
- every `nnef_torch` import left inside a function says why, in a comment on its line or on the line above it
  (`# lazy: ...`, `# cycle: ...`, `# up-edge kept: ...`); an import right below an explained one shares its comment.

An edge the rules refuse, or an unexplained local import, that has to stay is listed below with the file it is in
and why (both lists are empty today); an entry that no longer matches anything fails too, so the lists only shrink.
"""
from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "nnef_torch"
ROOT = "nnef_torch"

# layer (folder or module under nnef_torch/) -> the layers it must not import
FORBIDDEN = {
    "format": frozenset({"ir", "importer", "exporter", "writers", "formats", "reader", "ops", "quant", "viz", "cli",
                         "graph_def"}),
    "ir": frozenset({"importer", "exporter", "writers", "reader", "formats", "quant", "viz", "cli", "graph_def"}),
}

# (importing file, imported module) pairs that break FORBIDDEN, each with the reason it is kept (none today)
LAYER_EXCEPTIONS: set[tuple[str, str]] = set()

# (file, imported module) pairs of function-local imports without a comment (none today)
UNEXPLAINED: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Edge:
    file: str  # the importing file, relative to nnef_torch/ ('format/recode.py')
    target: str  # the imported module ('nnef_torch.ir.graph')
    line: int
    end_line: int
    local: bool  # inside a function (or a lambda)
    after: Edge | None  # the nnef_torch import statement right above it in the same block, if any

    @property
    def where(self) -> str:
        return f"nnef_torch/{self.file}:{self.line}"


def layer(module: str) -> str:
    """The layer of a module of the package: its folder (or module) under nnef_torch/; '' for nnef_torch itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The package's modules a statement imports (`from nnef_torch import formats` imports nnef_torch.formats)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parent = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(parent + ([base] if base else []))
    found = [f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}")]
    return found if len(found) == len(node.names) else [base, *found]


def _edges_of(path: Path) -> list[Edge]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    file = path.relative_to(PACKAGE).as_posix()
    edges: list[Edge] = []

    def block(statements: list[ast.stmt], local: bool) -> None:
        previous: Edge | None = None
        for statement in statements:
            ours = None
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                targets = [t for t in _targets(statement, package) if t == ROOT or t.startswith(ROOT + ".")]
                for target in targets:
                    adjacent = previous if previous is not None and previous.end_line == statement.lineno - 1 else None
                    ours = Edge(file, target, statement.lineno, statement.end_lineno or statement.lineno, local,
                                adjacent)
                    edges.append(ours)
            previous = ours
            visit(statement, local)

    def visit(node: ast.AST, local: bool) -> None:
        inner = local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for _field, value in ast.iter_fields(node):
            if isinstance(value, list) and value and all(isinstance(item, ast.stmt) for item in value):
                block(value, inner)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        visit(item, inner)
            elif isinstance(value, ast.AST):
                visit(value, inner)

    block(tree.body, False)
    return edges


@cache
def all_edges() -> tuple[Edge, ...]:
    return tuple(edge for path in sorted(PACKAGE.rglob("*.py")) for edge in _edges_of(path))


@cache
def _comments(file: str) -> tuple[frozenset[int], frozenset[int]]:
    """The lines of `file` with a comment that explains (not a `noqa` or `type:` marker), and those of them that
    hold nothing but the comment."""
    text = (PACKAGE / file).read_text(encoding="utf-8")
    anywhere, alone = set(), set()
    code_lines = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            marker = token.string.lstrip("#").strip().lower()
            if marker and not marker.startswith(("noqa", "type:", "pragma")):
                anywhere.add(token.start[0])
                if token.start[0] not in code_lines:
                    alone.add(token.start[0])
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
            code_lines.update(range(token.start[0], token.end[0] + 1))
    return frozenset(anywhere), frozenset(alone)


def explained(edge: Edge) -> bool:
    """A comment on the statement's lines, or alone on the line above it, or the import right above it explained."""
    anywhere, alone = _comments(edge.file)
    if any(line in anywhere for line in range(edge.line, edge.end_line + 1)) or edge.line - 1 in alone:
        return True
    return edge.after is not None and explained(edge.after)


def test_the_scan_finds_the_package() -> None:
    edges = all_edges()
    assert len({edge.file for edge in edges}) > 50
    assert any(edge.local for edge in edges) and any(not edge.local for edge in edges)


@pytest.mark.parametrize("lower", sorted(FORBIDDEN))
def test_no_layer_imports_a_layer_above_it(lower: str) -> None:
    found = [edge for edge in all_edges() if edge.file.split("/")[0] == lower and layer(edge.target) in FORBIDDEN[lower]]
    refused = [f"{edge.where} imports {edge.target}" for edge in found if (edge.file, edge.target) not in LAYER_EXCEPTIONS]
    assert not refused, f"{lower}/ imports a layer above it:\n" + "\n".join(refused)
    keys = {(edge.file, edge.target) for edge in found}
    stale = sorted(key for key in LAYER_EXCEPTIONS if key[0].split("/")[0] == lower and key not in keys)
    assert not stale, f"LAYER_EXCEPTIONS entries that no longer match (remove them): {stale}"


def test_the_importer_does_not_import_the_writers_at_module_level() -> None:
    found = [f"{edge.where} imports {edge.target}" for edge in all_edges()
             if edge.file.startswith("importer/") and layer(edge.target) == "writers" and not edge.local]
    assert not found, "\n".join(found)


def test_every_function_local_import_says_why() -> None:
    unexplained = [edge for edge in all_edges() if edge.local and not explained(edge)]
    missing = [f"{edge.where}: {edge.target}" for edge in unexplained if (edge.file, edge.target) not in UNEXPLAINED]
    assert not missing, ("function-local imports without a comment saying why (# lazy: ..., # cycle: ..., "
                         "# up-edge kept: ...):\n" + "\n".join(missing))
    stale = sorted(UNEXPLAINED - {(edge.file, edge.target) for edge in unexplained})
    assert not stale, f"UNEXPLAINED entries that no longer match (remove them): {stale}"
