"""Mutation fuzzing of what real producers write (hypothesis): the tract_core fixtures (torch_to_nnef's TractNNEF
target, fixtures/) and the documents the lenient reading is for (tests/format/producers: nnef_tools and
torch_to_nnef's KhronosNNEF target), edited a few times each, then loaded with their tensor files by
`nnef_torch.load`, leniently (the default) and strictly. Each either loads or is refused with an `NNEFError`
that has a location and prints; nothing else escapes (RecursionError, IndexError, MemoryError, ValueError...).

The edits are those that break a reader of these documents: tokens deleted, repeated, swapped or replaced by
the dialect's vocabulary (its ops, datum types, scan kinds) and by extreme integers; statements repeated
(duplicate assignments), deleted, moved. An escape found here is fixed at its root and gets a regression test
(tests/formats/tract_core/test_hostile.py, tests/format/test_lenient.py).
"""
from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

import nnef_torch
from nnef_torch.errors import NNEFDeviationWarning, NNEFError

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"
PRODUCERS = Path(__file__).parents[2] / "format" / "producers"
SEEDS = {folder.name: folder for root in (FIXTURES, PRODUCERS) for folder in sorted(root.iterdir())
         if (folder / "graph.nnef").is_file()}
TEXTS = {name: (folder / "graph.nnef").read_text() for name, folder in SEEDS.items()}


def _options(name: str) -> dict:
    """`positions` declares `extension tract_symbol S;`: its length is bound by the input's shape."""
    if name == "positions":
        return {"input_shapes": {"input": list(np.load(SEEDS[name] / "input.npy").shape)}}
    return {}


_TOKEN_SPAN = re.compile(r"\w+|'[^'\n]*'|\"[^\"\n]*\"|->|<=|>=|==|!=|&&|\|\||\S")
_INTEGER = re.compile(r"[0-9]+")
NUMBERS = ["0", "1", "2", "3", "5", "16", "17", "4096", "4097", "65537", "1000000", "1000000000000000000",
           "9223372036854775807"]
VOCABULARY = NUMBERS + [
    "-1", "-7", "0.0", "1e30", "-1.5", "true", "'i64'", "'f32'", "'tdim'", "'bool'", "'u8'", "'x64'", "'full'",
    "'last'", '"full"', '"last"', "'bij,bkj->bik'", "'a->a'", "'ab,bc->ac'", "tract_core_range", "tract_core_gather",
    "tract_core_gather_elements", "tract_core_scan", "tract_core_shape_of", "tract_core_cast", "tract_core_external",
    "tract_core_einsum", "tract_core_erf", "tract_core_properties", "tract_symbol", "tract_registry", "S",
    "external", "variable", "constant", "copy", "slice", "squeeze", "unsqueeze", "reshape", "add", "sub", "mul",
    "concat", "gather", "erf", "softmax", "matmul", "fragment", "graph", "input", "output", "<integer>",
    "<scalar>", "<?>", "[", "]", "(", ")", ",", "=", ";", "[]", "-", "+", "*",
]
EDITS = ["token-delete", "token-replace", "token-own", "token-duplicate", "token-swap", "token-insert", "number",
         "statement-duplicate", "statement-delete", "statement-move"]


@st.composite
def mutated(draw) -> tuple[str, str]:
    """(fixture name, its graph.nnef with 1 to 4 edits)."""
    name = draw(st.sampled_from(sorted(SEEDS)))
    text = TEXTS[name]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(EDITS))
        if kind.startswith("statement"):
            lines = text.split("\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if kind == "statement-duplicate":
                lines.insert(j, lines[i])
            elif kind == "statement-delete":
                del lines[i]
            else:
                lines.insert(j, lines.pop(i))
            text = "\n".join(lines)
            continue
        if kind == "number":
            spans = [match.span() for match in _INTEGER.finditer(text)]
            start, end = draw(st.sampled_from(spans))
            text = text[:start] + draw(st.sampled_from(NUMBERS)) + text[end:]
            continue
        spans = [match.span() for match in _TOKEN_SPAN.finditer(text)]
        i, j = sorted(draw(st.lists(st.integers(0, len(spans) - 1), min_size=2, max_size=2, unique=True)))
        (start, end), (start2, end2) = spans[i], spans[j]
        if kind == "token-delete":
            text = text[:start] + text[end:]
        elif kind == "token-replace":
            text = text[:start] + draw(st.sampled_from(VOCABULARY)) + text[end:]
        elif kind == "token-own":  # another token of the same document (identifiers, labels, names)
            text = text[:start] + text[start2:end2] + text[end:]
        elif kind == "token-duplicate":
            text = text[:end] + " " + text[start:end] + text[end:]
        elif kind == "token-insert":
            text = text[:start] + draw(st.sampled_from(VOCABULARY)) + " " + text[start:]
        else:
            text = text[:start] + text[start2:end2] + text[end:start2] + text[start:end] + text[end2:]
    return name, text


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """A copy of each fixture folder (its tensor files), whose graph.nnef each example overwrites."""
    root = tmp_path_factory.mktemp("mutated")
    return {name: Path(shutil.copytree(folder, root / name)) for name, folder in SEEDS.items()}


def load_or_refuse(folder: Path, lenient: bool, options: dict) -> str:
    """Load the model; the only failure allowed is an NNEFError with a location that prints."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NNEFDeviationWarning)
            nnef_torch.load(folder, lenient=lenient, **options)
        return "loaded"
    except NNEFError as error:
        assert error.location is not None, f"{type(error).__name__} without a location: {error.message}"
        str(error)
        return "refused"


def test_seed_documents_load():
    """The mutations start from models that load (leniently: the producer fixtures need it)."""
    for name, folder in SEEDS.items():
        assert load_or_refuse(folder, True, _options(name)) == "loaded", name


@fuzz(60)
@given(mutated())
def test_mutated_producer_documents_load_or_are_refused_cleanly(folders, case):
    name, text = case
    (folders[name] / "graph.nnef").write_text(text)
    for lenient in (True, False):
        load_or_refuse(folders[name], lenient, _options(name))
