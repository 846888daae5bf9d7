"""The cost of hostile NNVM / MXNet files, measured as tests/test_hostile_inputs.py measures every input: each is
read by `read_model` in a child process that reports the outcome and its peak resident memory (a bound a few times
what it takes now, or 20 times the file, whichever is lower), with a generous timeout that only catches a hang.

Each file is a symbol `m-symbol.json` (its input shape given by `__shape__`) with `m-0000.params` beside it, scaled
down from what an attacker would send but still far past what the limits allow."""
from __future__ import annotations

import json
import os
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_hostile_inputs import Costly, sparse_file
from test_hostile_inputs import test_hostile_input_costs_little as run_in_child

from formats.nnvm.test_bad_nnvm import params, params_file

pytestmark = pytest.mark.slow

MB = 1 << 20


def _graph(*nodes: dict, heads: int = 1) -> dict:
    """data (of shape (1, 2, 5, 5)) followed by `nodes`; the last one is the head (`heads` times)."""
    everything = [{"op": "null", "name": "data", "inputs": [], "attrs": {"__shape__": "(1, 2, 5, 5)"}}, *nodes]
    return {"nodes": everything, "arg_nodes": [0], "heads": [[len(everything) - 1, 0, 0]] * heads}


def _relu(attrs: dict[str, str] | None = None, op: str = "Activation", inputs: int = 1) -> dict:
    return {"op": op, "name": "node", "inputs": [[0, 0, 0]] * inputs, "attrs": attrs or {"act_type": "relu"}}


def _nnvm(document: dict, params_bytes: bytes | Callable[[Path], None] | None = None
          ) -> Callable[[Path], tuple[str, str]]:
    """A symbol and, beside it, `m-0000.params`: these bytes, what a function writes there, or no arrays."""
    def build(folder: Path) -> tuple[str, str]:
        (folder / "m-symbol.json").write_text(json.dumps(document))
        target = folder / "m-0000.params"
        if callable(params_bytes):
            params_bytes(target)
        else:
            target.write_bytes(params_file({}) if params_bytes is None else params_bytes)
        return "model", "m-symbol.json"
    return build



def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _empty_arrays(count: int) -> bytes:
    """A .params file of `count` empty arrays (V2, rank 0), named a0, a1, ..."""
    array = struct.pack("<Iii", 0xF993FAC9, 0, 0)
    names = b"".join(struct.pack("<Q", len(name)) + name for name in (f"arg:a{i}".encode() for i in range(count)))
    return struct.pack("<QQQ", 0x112, 0, count) + array * count + struct.pack("<Q", count) + names


TUPLE_OF_1M = "(" + ", ".join(["1"] * 1_000_000) + ")"
ARRAYS_PAST_THE_LIMIT = _empty_arrays((1 << 18) + 1)

COSTLY = [
    # sizes computed from attributes are checked before the arrays they give are built
    Costly("nnvm_arange_of_10m_items", _nnvm(_graph({"op": "_arange", "name": "node", "inputs": [],
                                                     "attrs": {"start": "0", "stop": "1e7"}})),
           "ForeignFormatError", "m-symbol.json", 10),
    Costly("nnvm_one_hot_of_depth_2_23", _nnvm(_graph(_relu({"depth": str(1 << 23)}, "one_hot"))),
           "ForeignFormatError", "m-symbol.json", 10),
    # an attribute tuple is refused while it is read, once it holds more than a shape can
    Costly("nnvm_reshape_to_a_tuple_of_1m_items", _nnvm(_graph(_relu({"shape": TUPLE_OF_1M}, "Reshape"))),
           "ForeignFormatError", "m-symbol.json", 20 * len(TUPLE_OF_1M) / MB),
    # a .params file is read past its first bytes only once they say it is one, holding no more arrays than allowed
    Costly("nnvm_params_of_256_mib_with_another_magic", _nnvm(_graph(_relu()), sparse_file(b"\x13\x01" + bytes(22),
                                                                                        256 * MB)),
           "ForeignFormatError", "m-0000.params (byte 0)", 10),
    Costly("nnvm_params_of_more_arrays_than_allowed", _nnvm(_graph(_relu()), ARRAYS_PAST_THE_LIMIT),
           "ForeignFormatError", "m-0000.params (byte 16)", 10),
    # a FIFO beside the symbol is refused, not waited on
    Costly("nnvm_params_that_is_a_fifo", _nnvm(_graph(_relu()), _fifo), "ForeignFormatError", "m-0000.params", 10),
    # outputs are bounded
    Costly("nnvm_5000_heads", _nnvm(_graph(_relu(), heads=5000)), "ForeignFormatError", "m-symbol.json", 10),
]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads peak memory from /proc (Linux)")
@pytest.mark.parametrize("case", COSTLY, ids=[case.id for case in COSTLY])
def test_hostile_nnvm_file_costs_little(case: Costly, tmp_path: Path, capsys):
    run_in_child(case, tmp_path, capsys)


def test_the_valid_model_is_accepted_in_the_child(tmp_path: Path, capsys):
    """The measuring child reads a valid symbol and its parameters (so that a refusal above is the file's doing)."""
    document = json.loads(json.dumps(_graph()))
    document["nodes"] = [dict(document["nodes"][0]), {"op": "null", "name": "conv_weight", "inputs": []},
                         {"op": "null", "name": "conv_bias", "inputs": []},
                         {"op": "Convolution", "name": "conv", "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
                          "attrs": {"kernel": "(3, 3)", "num_filter": "3", "pad": "(1, 1)"}}]
    document["arg_nodes"], document["heads"] = [0, 1, 2], [[3, 0, 0]]
    run_in_child(Costly("valid", _nnvm(document, params_file(params())), "accepted", "", 30), tmp_path, capsys)
