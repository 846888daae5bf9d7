"""A model's graph.nnef held in memory: its text, its parsed document, or both.

A file read from disk has text and is parsed when first needed; a graph a front end built has a document and is
printed only when text is asked for (to write a file, or to show the line an error points at). Either way each
form is made once and kept.
"""
from __future__ import annotations

from collections.abc import Callable

from nnef_torch.errors import NNEFError
from nnef_torch.format import ast
from nnef_torch.format.parser import parse_document


class GraphFile:
    """The graph.nnef of a model named `file` in messages: from `text`, or from `document` and the `printer` that
    writes it as text (its locations point at the lines that text has)."""

    __slots__ = ("file", "_text", "_document", "_printer", "_size")

    def __init__(self, text: str | None = None, *, document: ast.Document | None = None,
                 printer: Callable[[], str] | None = None, size: int = 0, file: str = "graph.nnef"):
        if text is None and (document is None or printer is None):
            raise ValueError("a GraphFile needs its text, or a document and the printer of its text")
        self.file = file
        self._text = text
        self._document = document
        self._printer = printer
        self._size = size

    @property
    def size(self) -> int:
        """The length of its text: known, or (not printed yet) at least the `size` it was made with."""
        return len(self._text) if self._text is not None else self._size

    @property
    def text(self) -> str:
        if self._text is None:
            assert self._printer is not None
            self._text = self._printer()
        return self._text

    @property
    def held_text(self) -> str | None:
        """The text if it is at hand (None: not printed yet)."""
        return self._text

    @property
    def document(self) -> ast.Document:
        """The parsed document (an `NNEFSyntaxError` for text that does not parse)."""
        if self._document is None:
            self._document = parse_document(self.text, self.file)
        return self._document

    @property
    def parsed(self) -> bool:
        """Whether the document is at hand without parsing."""
        return self._document is not None

    def located(self, error: NNEFError) -> NNEFError:
        """`error` with the line of this file it points at."""
        return error.with_source(self.text, self.file)

    def __repr__(self) -> str:
        held = "+".join(part for part, value in (("text", self._text), ("document", self._document)) if value)
        return f"GraphFile({self.file!r}, {held or 'empty'})"


__all__ = ["GraphFile"]
