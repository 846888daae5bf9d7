"""Hostile inputs: each is refused with a located `NNEFError`, or read, and at little cost.

Inputs built as an attacker would (spec 3-6 and the project's own limits), in three tables:

- ROWS: documents refused at their position, checked as in test_bad_inputs.py, each with what the Khronos package
  does with it.
- VALID: documents built to break a reader that are still valid: they load, into the graph Khronos reads.
- COSTLY: inputs of every kind (graph text, graph.quant, .dat files, model folders, archives) run one per child
  process, which reports the outcome and its peak resident memory. Each case has a memory bound a few times what it
  takes now (all far below 500 MB), so a regression fails; none has a time bound (the machines are shared), only a
  generous timeout that catches a hang.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from khronos import canonical_khronos, canonical_ours, khronos
from test_bad_inputs import (
    ACCEPTS,
    CRASHES,
    LOWERED,
    PARSE,
    SHAPES,
    SLOW,
    Bad,
    body,
    check_rejected,
    fragments,
    khronos_verdicts_of,
)

from nnef_torch.errors import NNEFSemanticError, NNEFShapeError
from nnef_torch.format import tensor_file
from nnef_torch.reader import read_graph

pytestmark = pytest.mark.slow

HEAD = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"


def graph(*statements: str, params: str = "input", results: str = "output", definitions: str = "") -> str:
    """A document with both extensions, `definitions` from line 3 on, then a graph of `statements`."""
    lines = [f"graph G( {params} ) -> ( {results} )", "{"] + ["    " + s for s in statements] + ["}", ""]
    return HEAD + textwrap.dedent(definitions).strip("\n") + ("\n" if definitions else "") + "\n".join(lines)


def nested_comprehensions(n: int) -> str:
    """`n` * `n` iterations in a short expression whose value is 0."""
    return (f"length_of([for i in range_of([1] * {n}) yield length_of([for j in range_of([1] * {n}) "
            f"yield i * j])]) - {n}")


ROWS = [
    # class 1: integer text. int() refuses more than 4300 digits: the value is what counts, not the digits
    # ACCEPTS: Khronos converts with atoi, whose overflowed result happens to pass the reshape check
    Bad("integer_of_5000_digit_string", body("output = reshape(input, shape = [integer('" + "9" * 5000 + "')]);",
                                             operators=True), NNEFSemanticError, 6, 38, "integer overflow",
        khronos=ACCEPTS),
    # class 2: results are counted before a list that long is built
    Bad("unstack_of_a_billion", body("big = variable(shape = [1000000000, 1], label = 'big');",
                                     "[a, b] = unstack(big, axis = 0);", "output = add(a, b);"), NNEFShapeError, 7, 14,
        "more than the limit of 65536", khronos=SHAPES),
    Bad("copy_n_of_a_hundred_million", body("[a, b] = copy_n(input, times = 100000000);", "output = add(a, b);"),
        NNEFShapeError, 6, 14, "more than the limit of 65536", khronos=SHAPES),
    # LOWERED: Khronos only checks the fragment's body when expanding it
    Bad("unstack_of_a_billion_in_fragment", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            ys = unstack(x, axis = 0);
            y = ys[0];
        }
        """, "big = variable(shape = [1000000000, 1], label = 'big');", "output = f(big);"), NNEFShapeError, 5, 10,
        "more than the limit of 65536", khronos=LOWERED),
    # ... and tensors taken as an array are counted too: each is an edge of the graph and an argument in the generated
    # code (ACCEPTS: Khronos builds the 70,000 edges)
    Bad("concat_of_70000_names", body("output = concat([" + ", ".join(["input"] * 70_000) + "], axis = 0);"),
        NNEFShapeError, 6, 14, "more than the limit of 65,536 tensors", khronos=ACCEPTS),
    # class 3: the project's own limit on fragment recursion, at the recursive call, also inside an expression
    # (CRASHES: the Khronos parser recurses until its stack overflows)
    Bad("recursion_inside_an_operator", fragments("""
        fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = f(x) + 1.0;
        }
        """), NNEFSemanticError, 5, 9, "expanding 'f'", khronos=CRASHES),
    # PARSE: Khronos wants each fragment declared before its use, so mutual recursion never parses there
    Bad("mutual_recursion_inside_operators", fragments("""
        fragment g( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = 2.0 * h(x);
        }
        fragment h( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = g(x) - 1.0;
        }
        """, "output = g(input);"), NNEFSemanticError, 9, 9, "unbounded recursion?", khronos=PARSE),
    # class 4: labels that would name files outside the model are refused at the variable (ACCEPTS: Khronos checks
    # no label)
    Bad("variable_label_with_parent_part", body("w = variable(shape = [1,4,8,8], label = '../x');",
                                                "output = add(input, w);"), NNEFShapeError, 6, 9,
        "inside the model folder", khronos=ACCEPTS),
    Bad("variable_label_absolute", body("w = variable(shape = [1,4,8,8], label = '/x');", "output = add(input, w);"),
        NNEFShapeError, 6, 9, "not an absolute path", khronos=ACCEPTS),
    Bad("variable_label_absolute_backslash", body("w = variable(shape = [1,4,8,8], label = '\\\\x');",
                                                  "output = add(input, w);"), NNEFShapeError, 6, 9,
        "not an absolute path", khronos=ACCEPTS),
    Bad("variable_label_empty_part", body("w = variable(shape = [1,4,8,8], label = 'a//b');",
                                          "output = add(input, w);"), NNEFShapeError, 6, 9,
        "may not be empty", khronos=ACCEPTS),
    # class 7: compile-time work and memory are budgeted (ACCEPTS: Khronos computes the 9M items, and the value is 0)
    Bad("nested_comprehensions_past_the_budget",
        body(f"output = reshape(input, shape = [1, 4, 8, 8 + {nested_comprehensions(3000)}]);", operators=True),
        NNEFSemanticError, 6, 108, "takes more than", khronos=ACCEPTS),
    Bad("arrays_past_the_item_budget", body("output = reshape(input, shape = [1, 4, 8, length_of([1] * 4000000 + "
                                            "[1] * 4000000) - 7999992]);", operators=True), NNEFSemanticError, 6,
        77, "computes more than", khronos=ACCEPTS),
    # SLOW: Khronos expands all 2^40 calls
    Bad("fragment_expansion_doubling", fragments("""
        fragment f40( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {
            y = x;
        }""" + "".join(f"""
        fragment f{i}( x: tensor<scalar> ) -> ( y: tensor<scalar> )
        {{
            y = f{i + 1}(x) + f{i + 1}(x);
        }}""" for i in range(39, -1, -1)) + """
        """, "output = f0(input);"), NNEFSemanticError, 9, 18, "takes more than", khronos=SLOW),
    # class 9: extents and volumes past 64 bits are refused where they arise (ACCEPTS: Khronos wraps C++ ints)
    Bad("variable_volume_past_64_bits", body("big = variable(shape = [4294967295, 4294967295, 4294967295], "
                                             "label = 'big');", "output = relu(input);"), NNEFShapeError, 6, 11,
        "has a volume beyond 2^63 - 1", khronos=ACCEPTS),
    Bad("tile_extent_past_64_bits", body("big = variable(shape = [4611686018427387904], label = 'big');",
                                         "wide = tile(big, repeats = [4]);", "output = relu(input);"), NNEFShapeError,
        7, 12, "has an extent beyond 2^63 - 1", khronos=ACCEPTS),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_hostile_document_is_rejected_at_its_position(row: Bad):
    check_rejected(row)


@pytest.fixture(scope="module")
def khronos_verdicts() -> dict[str, str]:
    return khronos_verdicts_of(ROWS)


@pytest.mark.parametrize("row", [row for row in ROWS if row.khronos != SLOW],
                         ids=[row.id for row in ROWS if row.khronos != SLOW])
def test_khronos_agrees(row: Bad, khronos_verdicts: dict[str, str]):
    assert khronos_verdicts[row.id] == row.khronos


# ---- valid documents that used to break the reader -----------------------------------------------------------

def _chain(term: str, n: int, op: str = " + ") -> str:
    return op.join([term] * n)


VALID = {
    # class 1: the digits of a literal are not its size
    "integer_literal_with_5000_leading_zeros": body("output = linear_quantize(input, min = 0.0, max = 1.0, bits = "
                                                    + "0" * 5000 + "8);"),
    "integer_of_string_with_5000_leading_zeros": body("output = reshape(input, shape = [1, 4, 8, integer('"
                                                      + "0" * 5000 + "8')]);", operators=True),
    # class 3: long chains are flat (the parser groups them to the left, nothing nests)
    "chain_of_3000_tensor_additions": body("output = " + _chain("input", 3000) + ";", operators=True),
    "chain_of_3000_integer_terms": body("output = reshape(input, shape = [1, 4, 8, " + _chain("1", 2999) + " - 2991]);",
                                        operators=True),
    "chain_of_3000_mixed_operators": body("output = " + " - ".join(f"input * {i}.0" for i in range(3000)) + ";",
                                          operators=True),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_hostile_but_valid_document_loads_as_khronos_reads_it(name):
    nnef = khronos()
    text = VALID[name]
    ours = read_graph(text)
    theirs = nnef.parse_string(text, lowered=[])
    nnef.infer_shapes(theirs)
    assert canonical_ours(ours)[1:] == canonical_khronos(theirs)[1:]  # the external aside: Khronos adds no dtype


def test_chain_of_3000_subscripts_is_read():
    """Subscripts chain like binary operators: 'a'[0][0]... is 'a' (Khronos allows no subscript on a literal)."""
    text = graph("input = external(shape = [1]);", "output = f(input);", definitions="""
        fragment f( x: tensor<scalar>, s: string = 'a' ) -> ( y: tensor<scalar> )
        {
            y = reshape(x, shape = [length_of(s""" + "[0]" * 3000 + """)]);
        }
        """)
    (reshape,) = [op for op in read_graph(text).operations if op.name == "reshape"]
    assert reshape.attribs["shape"] == [1]


def test_long_chain_prints_and_reads_back():
    from nnef_torch.format.parser import parse_document
    from nnef_torch.format.printer import print_document
    doc = parse_document(VALID["chain_of_3000_mixed_operators"])
    text = print_document(doc)
    assert print_document(parse_document(text)) == text
    assert text.count(" - ") == 2999


# ---- the cost of hostile inputs, measured in a child process -------------------------------------------------

# Runs one input, then prints the outcome and the peak resident memory it added, in MB. The peak is reset through
# /proc/self/clear_refs after the imports; where the kernel refuses that, a thread samples the resident size.
_CHILD = r"""
import json, os, sys, threading, time
mode, path = sys.argv[1], sys.argv[2]
from nnef_torch.errors import NNEFError
from nnef_torch.format.quant_file import read_quantization
from nnef_torch.reader import read_graph, read_model
from nnef_torch.stdlib import standard_fragments
from nnef_torch.tensors import read_tensor
standard_fragments()
if mode in ("load", "graph_def"):  # the torch side, imported before the measure starts
    import nnef_torch.graph_def, nnef_torch.importer.load

def status(key):
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith(key + ":"))

try:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")
    sampler = None
except OSError:
    sampler = {"peak": 0, "run": True}
    def sample():
        while sampler["run"]:
            sampler["peak"] = max(sampler["peak"], status("VmRSS"))
            time.sleep(0.001)
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
before = status("VmRSS")
try:
    if mode == "text":
        with open(path, encoding="utf-8") as handle:
            read_graph(handle.read(), file="graph.nnef")
    elif mode == "quant":
        with open(path, encoding="utf-8") as handle:
            read_quantization(handle.read(), standard_fragments())
    elif mode == "dat":
        read_tensor(path)
    elif mode == "graph":
        read_model(path, load_tensors=False)
    elif mode == "lightnet":  # the format forced, not detected
        read_model(path, format="lightnet")
    elif mode == "load":
        nnef_torch.importer.load.load(path)
    elif mode == "graph_def":
        nnef_torch.graph_def.load(path)
    elif mode == "relayviz":  # read, checked and drawn as a scene
        from nnef_torch.viz.relayviz_read import read_relayviz, scene_from_relayviz
        scene_from_relayviz(read_relayviz(path))
    else:
        read_model(path)
    outcome = {"result": "accepted"}
except NNEFError as error:
    outcome = {"result": type(error).__name__, "where": str(error.location), "message": error.message}
if sampler is None:
    peak = status("VmHWM")
else:
    sampler["run"] = False
    thread.join()
    peak = max(sampler["peak"], status("VmRSS"))
outcome["peak_mb"] = round((peak - before) / 2**20, 1)
print(json.dumps(outcome))
"""


@dataclass(frozen=True)
class Costly:
    id: str
    build: Callable[[Path], tuple[str, str]]  # writes the input under a folder: (mode, relative path)
    result: str  # 'accepted' or the error class
    where: str  # the start of the error's location, as printed
    max_mb: float  # peak resident memory allowed (a few times what it takes now)


def _text(name: str, text: str, mode: str = "text") -> Callable[[Path], tuple[str, str]]:
    def build(folder: Path) -> tuple[str, str]:
        (folder / name).write_text(text, encoding="utf-8")
        return mode, name
    return build


MODEL_GRAPH = "version 1.0;\ngraph G( input ) -> ( output )\n{\n    input = external(shape = [10]);\n" \
              "    w = variable(shape = [10], label = '{label}');\n    output = add(input, w);\n}\n"


def _model(label: str = "w", dat: Callable[[Path], None] | None = None, mode: str = "model"):
    def build(folder: Path) -> tuple[str, str]:
        (folder / "m").mkdir()
        (folder / "m" / "graph.nnef").write_text(MODEL_GRAPH.replace("{label}", label))
        (folder / "secret.dat").write_bytes(tensor_file.encode(np.ones(10, np.float32)))
        if dat is not None:
            dat(folder / "m" / "w.dat")
        return mode, "m"
    return build


GOOD_DAT = tensor_file.encode(np.arange(1, 11, dtype=np.float32))  # a first item of 0.0 would read as 2018 padding


def _sparse_dat(header: bytes, size: int) -> Callable[[Path], None]:
    """A file of `size` bytes that starts with `header` and holds no data on disk (sparse)."""
    def write(path: Path) -> None:
        with open(path, "wb") as handle:
            handle.write(header)
            handle.truncate(size)
    return write


def _dat(data: bytes) -> Callable[[Path], tuple[str, str]]:
    def build(folder: Path) -> tuple[str, str]:
        (folder / "x.dat").write_bytes(data)
        return "dat", "x.dat"
    return build


def _bomb(member_size: int) -> Callable[[Path], tuple[str, str]]:
    """A .tgz whose w.dat member inflates to `member_size` bytes: a .dat header saying 40 bytes of data, then zeros.
    Written as concatenated gzip members (one 1 MiB block of zeros, repeated), so it takes no time to build."""
    def build(folder: Path) -> tuple[str, str]:
        graph_bytes = MODEL_GRAPH.replace("{label}", "w").encode()

        def header(name: str, size: int) -> bytes:
            info = tarfile.TarInfo(name)
            info.size = size
            return info.tobuf(format=tarfile.USTAR_FORMAT)

        def pad(n: int) -> bytes:
            return bytes(-n % tarfile.BLOCKSIZE)

        start = header("graph.nnef", len(graph_bytes)) + graph_bytes + pad(len(graph_bytes))
        start += header("w.dat", member_size) + GOOD_DAT[:128]
        zeros, block = member_size - 128, 1 << 20
        parts = [gzip.compress(start), gzip.compress(bytes(block)) * (zeros // block)]
        parts.append(gzip.compress(bytes(zeros % block) + pad(member_size) + bytes(2 * tarfile.BLOCKSIZE)))
        (folder / "bomb.tgz").write_bytes(b"".join(parts))
        return "model", "bomb.tgz"
    return build


def _long_line(items: list[str]) -> str:
    values = ", ".join(items)
    return body(f"c = constant(shape = [{len(items)}], value = [{values}]);", "square = reshape(c, shape = [1000, -1]);",
                "output = relu(input);")


def _graph_def(documents: dict[str, str], sparse: dict[str, int] | None = None) -> Callable[[Path], tuple[str, str]]:
    """A graph_def model folder: the MODEL_GRAPH network (with its w.dat), the `documents` beside it and, for each
    name of `sparse`, a document of that many bytes that holds nothing on disk."""
    def build(folder: Path) -> tuple[str, str]:
        _model()(folder)
        (folder / "m" / "w.dat").write_bytes(GOOD_DAT)
        for name, text in documents.items():
            (folder / "m" / name).write_text(text)
        for name, size in (sparse or {}).items():
            with open(folder / "m" / name, "wb") as handle:
                handle.truncate(size)
        return "graph_def", "m"
    return build


def _network(name: str, comment: int = 0) -> str:
    """A network of its own `name` reading no data, after a comment line of `comment` characters."""
    return ("version 1.0;\n# " + "c" * comment + f"\ngraph {name}( input ) -> ( output )\n{{\n"
            "    input = external(shape = [10]);\n    output = relu(input);\n}\n")


def _in_folder(text: str) -> Callable[[Path], tuple[str, str]]:
    def build(folder: Path) -> tuple[str, str]:
        (folder / "m").mkdir()
        (folder / "m" / "graph.nnef").write_text(text)
        return "load", "m"
    return build


LINE_OF_NAMES = ("version 1.0;\ngraph G( x ) -> ( output )\n{\n    x = external(shape = [1, 1]);\n"
                 "    output = concat([" + ", ".join(["x"] * 200_000) + "], axis = 1);\n}\n")
LINE_OF_LOGICALS = body("c = constant(shape = [300000], value = [" + ", ".join(["true", "false"] * 150_000) + "]);",
                        "output = relu(input);")
LINE_OF_INTEGERS = _long_line([str(i % 10) for i in range(1_000_000)])
LINE_OF_SCALARS = _long_line([f"{(i % 997) / 7:.4f}" for i in range(1_000_000)])
QUANT_ZEROS = '"output": linear_quantize(min = 0.0, max = 1.0, bits = ' + "0" * 5000 + '8);\n'
QUANT_NINES = '"output": linear_quantize(min = 0.0, max = 1.0, bits = ' + "9" * 5000 + ');\n'

TRACT_RANGE_OF_1E18 = ("version 1.0;\nextension tract_registry tract_core;\ngraph G( input ) -> ( output )\n{\n"
                       "    input = tract_core_external(shape = [2], datum_type = 'f32');\n"
                       "    r = tract_core_range(0, 1000000000000000000, 1);\n    output = copy(input);\n}\n")

ROW = {row.id: row for row in ROWS}
COSTLY = [
    # 1: integer text
    Costly("integer_literal_with_5000_leading_zeros", _text("g.nnef", VALID["integer_literal_with_5000_leading_zeros"]),
           "accepted", "", 10),
    Costly("quant_integer_with_5000_leading_zeros", _text("g.quant", QUANT_ZEROS, "quant"), "accepted", "", 10),
    Costly("quant_integer_of_5000_digits", _text("g.quant", QUANT_NINES, "quant"), "NNEFQuantizationError",
           "graph.quant:1:56", 10),
    # 2: counts before lists
    Costly("unstack_of_a_billion", _text("g.nnef", ROW["unstack_of_a_billion"].text), "NNEFShapeError", "graph.nnef:7:14", 10),
    Costly("copy_n_of_a_hundred_million", _text("g.nnef", ROW["copy_n_of_a_hundred_million"].text), "NNEFShapeError", "graph.nnef:6:14", 10),
    # 3: long chains, deep recursion
    Costly("chain_of_30000_additions", _text("g.nnef", body("output = " + _chain("input", 30_000) + ";",
                                                            operators=True)), "accepted", "", 110),
    Costly("recursion_inside_an_operator", _text("g.nnef", ROW["recursion_inside_an_operator"].text), "NNEFSemanticError", "graph.nnef:5:9", 10),
    # 4: unsafe labels, refused by the graph before any file is looked at
    Costly("label_outside_the_model", _model("../secret", mode="graph"), "NNEFShapeError", "m/graph.nnef:5:9", 10),
    Costly("label_absolute", _model("/etc/passwd", mode="graph"), "NNEFShapeError", "m/graph.nnef:5:9", 10),
    # 5: a size that fits the 2018 layout only by accident
    Costly("dat_with_4_trailing_bytes", _dat(GOOD_DAT + b"\x01\x02\x03\x04"), "NNEFTensorFileError",
           "x.dat (byte 128)", 10),
    Costly("dat_2018_layout", _dat(GOOD_DAT[:128] + bytes(4) + GOOD_DAT[128:]), "accepted", "", 10),
    # 6: headers are checked before bodies are read or inflated
    Costly("dat_of_2_gib_with_a_40_byte_header", _model(dat=_sparse_dat(GOOD_DAT[:128], 2 << 30)),
           "NNEFTensorFileError", "m/w.dat (byte 168)", 10),
    Costly("dat_of_1_gib_with_another_shape", _model(dat=_sparse_dat(tensor_file.encode(
        np.zeros(1 << 28, np.float32))[:128], 128 + (1 << 30))), "NNEFTensorFileError", "m/w.dat (byte 12)", 10),
    Costly("archive_member_inflating_to_1_gib", _bomb(1 << 30), "NNEFTensorFileError", "bomb.tgz:w.dat (byte 168)",
           10),
    # 7: compile-time work and memory
    Costly("comprehension_over_a_16m_string", _text("g.nnef", body(
        "output = reshape(input, shape = [1, 4, 8, length_of([for c in range_of('" + "a" * (16 << 20)
        + "') yield c]) - 16777208]);", operators=True)), "NNEFSemanticError", "graph.nnef:6:67", 100),
    Costly("nested_comprehensions", _text("g.nnef", ROW["nested_comprehensions_past_the_budget"].text), "NNEFSemanticError", "graph.nnef:6:108", 10),
    Costly("fragment_expansion_doubling", _text("g.nnef", ROW["fragment_expansion_doubling"].text), "NNEFSemanticError", "graph.nnef:9:18", 90),
    Costly("arrays_past_the_item_budget", _text("g.nnef", ROW["arrays_past_the_item_budget"].text), "NNEFSemanticError", "graph.nnef:6:77", 90),
    # 8: memory against the source on long lines: at most 20 times the size of the text
    Costly("line_of_1m_integers", _text("g.nnef", LINE_OF_INTEGERS), "accepted", "", 20 * len(LINE_OF_INTEGERS) / 2**20),
    Costly("line_of_1m_scalars", _text("g.nnef", LINE_OF_SCALARS), "accepted", "", 20 * len(LINE_OF_SCALARS) / 2**20),
    # ... also arrays of names and logicals (kept compact, as numbers are), and a name repeated in a tensor array past
    # the limit of tensors an operation takes (each one costs an edge and an argument of the generated code)
    Costly("line_of_200k_names_past_the_tensor_limit", _in_folder(LINE_OF_NAMES), "NNEFShapeError",
           "m/graph.nnef:5:14", 20 * len(LINE_OF_NAMES) / 2**20),
    Costly("line_of_300k_logicals", _text("g.nnef", LINE_OF_LOGICALS), "accepted", "", 20 * len(LINE_OF_LOGICALS) / 2**20),
    # 10: graph_def documents: bounded before they are read, and read one at a time
    Costly("graph_def_document_past_the_size_limit", _graph_def({}, {"big.nnef": 40 << 20}), "NNEFContainerError",
           "m/big.nnef", 10),
    Costly("graph_def_documents_read_one_at_a_time", _graph_def({f"n{i}.nnef": _network(f"n{i}", 2 << 20)
                                                                 for i in range(8)}), "accepted", "", 10),
    # 9: extents past 64 bits
    Costly("tile_extent_past_64_bits", _text("g.nnef", ROW["tile_extent_past_64_bits"].text), "NNEFShapeError", "graph.nnef:7:12", 10),
    # 10: what a dialect computes (tract_core_range's items), counted before it is built
    Costly("tract_core_range_of_1e18_items", _text("g.nnef", TRACT_RANGE_OF_1E18), "NNEFShapeError",
           "graph.nnef:6:9", 10),
]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads peak memory from /proc (Linux)")
@pytest.mark.parametrize("case", COSTLY, ids=[case.id for case in COSTLY])
def test_hostile_input_costs_little(case: Costly, tmp_path: Path, capsys):
    mode, path = case.build(tmp_path)
    child = subprocess.run([sys.executable, "-c", _CHILD, mode, path], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert child.returncode == 0, child.stderr[-3000:]
    outcome = json.loads(child.stdout)
    with capsys.disabled():
        print(f"\n[hostile] {case.id}: {outcome['result']}, peak {outcome['peak_mb']} MB (bound {case.max_mb:.0f})",
              end="")
    assert outcome["result"] == case.result, outcome
    assert outcome.get("where", "").startswith(case.where), outcome
    assert outcome["peak_mb"] <= case.max_mb, outcome


def sparse_file(header: bytes, size: int) -> Callable[[Path], None]:
    """A writer of a file of `size` bytes that starts with `header` and holds nothing more on disk."""
    def write(path: Path) -> None:
        with open(path, "wb") as handle:
            handle.write(header)
            handle.truncate(size)
    return write
