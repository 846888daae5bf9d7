"""The cost of hostile JSON files, measured as tests/test_hostile_inputs.py measures every input: each is read in a
child process that reports the outcome and its peak resident memory, with a generous timeout that only catches a
hang. Graph files go through `read_model` (which parses the JSON to tell its format, then refuses what is no graph
format), RelayViz files through `read_relayviz` and `scene_from_relayviz`.

Inputs are scaled down from what an attacker sends (tens of MB rather than hundreds) but keep its shape; the memory
bounds are 20 times the file (the promise) or a few times what the reading takes now, whichever is lower."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from test_hostile_inputs import Costly
from test_hostile_inputs import test_hostile_input_costs_little as run_in_child

pytestmark = pytest.mark.slow

MB = 1 << 20
SIZE = 16 * MB  # the size of the large inputs
SCANNED = 5 * SIZE / MB  # what reading them may take: the bytes, their skeleton and the scan's chunks, the text


def _file(name: str, *parts: bytes, mode: str = "model", size: int | None = None) -> Callable[[Path], tuple[str, str]]:
    """A file of `parts` (a sparse file of `size` bytes when given); read in `mode`."""
    def build(folder: Path) -> tuple[str, str]:
        with open(folder / name, "wb") as handle:
            for part in parts:
                handle.write(part)
            if size is not None:
                handle.truncate(size)
        return mode, name
    return build


def _repeated(item: bytes, size: int) -> bytes:
    return b",".join([item] * (size // (len(item) + 1)))


def _relayviz(nodes: Callable[[], list[dict]], spaces: int = 0) -> Callable[[Path], tuple[str, str]]:
    """A RelayViz document of the `nodes` made when the test runs, one per line, `spaces` spaces before the last."""
    def build(folder: Path) -> tuple[str, str]:
        lines = [json.dumps(node) for node in nodes()]
        (folder / "g.json").write_text('{"format": "relayviz", "version": [1, 0], "nodes": [\n' +
                                       ",\n".join(lines[:-1]) + ",\n" + " " * spaces + lines[-1] + "\n]}\n")
        return "relayviz", "g.json"
    return build


VAR = {"node_kind": "Var", "name": "x", "dtype": "float32", "shape": [2]}
NODES = 150_000
NODE_BYTES = len(json.dumps({"node_kind": "Tuple", "fields": [NODES]})) + 2


def functions() -> list[dict]:
    return [VAR] + [{"node_kind": "Function", "body": index, "params": [0]} for index in range(30_000)]


def dangling() -> list[dict]:
    return [VAR] + [{"node_kind": "Tuple", "fields": [index]} for index in range(NODES)] + \
        [{"node_kind": "Tuple", "fields": [NODES + 7]}]


def late() -> list[dict]:
    return [VAR, {"node_kind": "Op", "name": "neg"}, {"node_kind": "Call", "op": 1, "args": [0]},
            {"node_kind": "Const", "value": "1.5", "dtype": "float32"}]


NUMBERS = b'{"a": [' + _repeated(b"0.5", SIZE // 2)

COSTLY = [
    # memory: a file past the size limit is refused before it is read (a sparse file: it takes no disk)
    Costly("json_of_400_mb", _file("big.json", b'{"a": ', size=400 * MB), "ForeignFormatError", "big.json", 10),
    # memory: whitespace costs what its bytes do, and an error after it is located at its column
    Costly("json_with_16_mb_of_spaces", _file("f.json", b'{"a": ', b" " * SIZE, b"0}"), "ForeignFormatError",
           "f.json", SCANNED),
    Costly("json_error_after_16_mb_of_spaces", _file("f.json", b'{"a": ', b" " * SIZE, b"x}"),
           "ForeignFormatError", f"f.json:1:{SIZE + 7}", SCANNED),
    # memory: the values of an accepted document stay within 20 times the file; tiny containers are refused unbuilt
    Costly("json_of_8_mb_of_floats", _file("f.json", NUMBERS, b"]}"), "ForeignFormatError", "f.json",
           20 * (len(NUMBERS) + 2) / MB),
    Costly("json_of_16_mb_of_empty_objects", _file("f.json", b'{"a": [', _repeated(b"{}", SIZE), b"]}"),
           "ForeignFormatError", "f.json", SCANNED),
    Costly("json_of_16_mb_of_one_item_lists", _file("f.json", b'{"a": [', _repeated(b"[0]", SIZE), b"]}"),
           "ForeignFormatError", "f.json", SCANNED),
    Costly("json_of_16_mb_of_brackets", _file("f.json", b'{"a": ', b"[" * SIZE), "ForeignFormatError", "f.json:1:70",
           SCANNED),
    # numbers: the one that reads as an infinity is found after 8 MB of others, each read once
    Costly("json_1e999_after_8_mb_of_floats", _file("f.json", NUMBERS, b",\n 1e999]}"), "ForeignFormatError",
           "f.json:2:2", 6 * len(NUMBERS) / MB),
    Costly("json_of_4_mb_of_numbers_near_the_largest_float", _file("f.json", b'{"a": [', _repeated(b"1.5e308", 4 * MB),
                                                                  b"]}"), "ForeignFormatError", "f.json", 80),
    # time: an unterminated string of escaped quotes (a backtracking pattern took quadratic time on it)
    Costly("json_unterminated_string_of_200k_escaped_quotes", _file("f.json", b'{"a": "', b'\\"' * 200_000),
           "ForeignFormatError", "f.json:1:7", 10),
    # time: RelayViz documents that took quadratic time (functions, each inside the next) or a Python step per
    # character to locate an error (a dangling reference at the end, an error after 24 MB of spaces)
    Costly("relayviz_chain_of_30k_functions", _relayviz(functions), "accepted", "", 150),
    Costly("relayviz_150k_nodes_the_last_dangling", _relayviz(dangling), "ForeignFormatError", f"g.json:{NODES + 3}:35",
           20 * NODES * NODE_BYTES / MB),
    Costly("relayviz_error_after_16_mb_of_spaces", _relayviz(late, spaces=SIZE), "ForeignFormatError",
           f"g.json:5:{SIZE + 33}", SCANNED),
]


@pytest.mark.parametrize("case", COSTLY, ids=[case.id for case in COSTLY])
def test_hostile_json_costs_little(case: Costly, tmp_path: Path, capsys):
    run_in_child(case, tmp_path, capsys)
