"""The error hierarchy: every problem with user input is an `NNEFError` that knows where it happened."""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Location:
    """Where a problem is: a text position (1-based line and column) or a byte offset in a binary file."""

    file: str | None = None
    line: int | None = None
    column: int | None = None
    offset: int | None = None

    def __str__(self) -> str:
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        text = ":".join(parts)
        if self.offset is not None:
            text += f" (byte {self.offset})"
        return text


SHOWN_LINE = 120  # characters of a source line shown under a message: a window around the column on longer lines


class NNEFError(Exception):
    """Root of every error raised for bad NNEF input (text, tensor files, quantization files, archives)."""

    def __init__(self, message: str, location: Location | None = None, source_line: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location
        self.source_line = source_line
        self.source_column: int | None = None  # the column's place in `source_line` (it may be a window)

    def with_source(self, text: str | None, file: str | None = None) -> NNEFError:
        """Attach the offending line of `text` (the contents of `file`) for compiler-style printing: at most
        SHOWN_LINE characters of it, around the column."""
        loc = self.location
        if loc is None:
            return self
        if loc.file is None and file is not None:
            self.location = loc = replace(loc, file=file)
        if text is not None and self.source_line is None and loc.line is not None and loc.file == file:
            line = _line_of(text, loc.line)  # the lexer counts lines at '\n' only
            if line is not None:
                self.source_line, self.source_column = _window(line, loc.column)
        return self

    def __str__(self) -> str:
        head = f"{self.location}: error: {self.message}" if self.location else f"error: {self.message}"
        if not self.source_line or self.location is None or self.location.column is None:
            return head  # (a source_line of "" says that no line of the file may be shown)
        line, column = self.source_line, self.source_column
        if column is None:
            line, column = _window(line, self.location.column)
        caret = " " * (column - 1) + "^"
        return f"{head}\n    {line.replace(chr(9), ' ')}\n    {caret}"


def _line_of(text: str, number: int) -> str | None:
    """Line `number` (1-based) of `text`, found without splitting the whole text."""
    start = 0
    for _ in range(number - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return None
    end = text.find("\n", start)
    return text[start:] if end < 0 else text[start:end]


def _window(line: str, column: int | None) -> tuple[str, int | None]:
    """At most SHOWN_LINE characters of `line` around `column` ('...' where cut), and the column's place there."""
    if len(line) <= SHOWN_LINE:
        return line, column
    at = (column or 1) - 1
    start = max(0, min(at - SHOWN_LINE // 2, len(line) - SHOWN_LINE))
    end = start + SHOWN_LINE
    shown = ("..." if start else "") + line[start:end] + ("..." if end < len(line) else "")
    return shown, None if column is None else column - start + (3 if start else 0)


class NNEFSyntaxError(NNEFError, ValueError):
    """The text does not follow the NNEF grammar (lexical or syntactic error)."""


class NNEFSemanticError(NNEFError, ValueError):
    """The text parses but breaks a rule of spec chapter 3.3 (declarations, invocations, identifiers)."""


class NNEFTypeError(NNEFSemanticError, TypeError):
    """An expression's type does not match or cannot be cast to what is required."""


class NNEFShapeError(NNEFError, ValueError):
    """Argument validity or shape agreement of an operation fails (spec chapter 4)."""


class NNEFTensorFileError(NNEFError, ValueError):
    """A .dat tensor file is corrupt, truncated, or disagrees with the graph."""


class NNEFQuantizationError(NNEFError, ValueError):
    """A graph.quant file is malformed or names an unknown quantization op or tensor."""


class NNEFContainerError(NNEFError, ValueError):
    """A model folder or archive is missing files or holds unsafe members."""


class ForeignFormatError(NNEFError, ValueError):
    """A file of another graph format (NNVM or MXNet JSON, .params, LightNet JSON or .wts, ...) is malformed or
    disagrees with itself; the message names the node (index and name) or the array it is about."""


class NNEFOptionError(NNEFError, ValueError):
    """An option given with a model (input_shapes=, inputs=, outputs=, params=) does not fit it: it names an input
    the model lacks, repeats one, or does not apply to the model's format."""


class NNEFUnsupportedError(NNEFError, NotImplementedError):
    """Valid NNEF that this implementation cannot handle (e.g. custom ops without an implementation)."""


class NNEFDeviationWarning(UserWarning):
    """A file deviates from the spec in a way real producers do, and was read leniently (`lenient=True`); the
    message names the file, line and column, and the rule bent (`rule`, one of `nnef_torch.ir.deviations.RULES`)."""

    def __init__(self, message: str, location: Location | None = None, rule: str | None = None):
        super().__init__(f"{location}: warning: {message} [{rule}]" if location else f"warning: {message} [{rule}]")
        self.message, self.location, self.rule = message, location, rule


class NNEFShapeWarning(UserWarning):
    """A module ran inputs of shapes its graph fixes otherwise (another batch size than a reshape's literal
    extent): read leniently, with the code generated for the shapes it was loaded with; the message names the
    operation, file, line and column."""

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(f"{location}: warning: {message}" if location else f"warning: {message}")
        self.message, self.location = message, location


class ExportError(NNEFError, ValueError):
    """A torch module cannot be written as NNEF; `problems` lists every operation that stops it, with the source
    line of the user's code that produced it."""

    def __init__(self, message: str, problems: list[str] | None = None):
        self.problems = list(problems or [])
        if self.problems:
            message = message + "\n" + "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(message)
