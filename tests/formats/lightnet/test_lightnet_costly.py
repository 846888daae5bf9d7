"""The cost of hostile LightNet files, measured as tests/test_hostile_inputs.py measures every input: each is read by
`read_model` in a child process that reports the outcome and its peak resident memory (a bound a few times what it
takes now, and at most 20 times the files), with a generous timeout that only catches a hang.

Each model is `model.json` with `model.wts` beside it, scaled down from what an attacker would send (100M blank
lines, 6M short words, 1.25 GiB files) but still far past what reading them whole would cost."""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_hostile_inputs import Costly, sparse_file
from test_hostile_inputs import test_hostile_input_costs_little as run_in_child

from formats.lightnet.lightnet_ir import create, document, hand_layout

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"
# a model of one constant, so that what the child measures is the weight file, none of whose arrays it reads
MODEL = hand_layout(document(create("x", [1, 4], [1, 2, 3, 4])))


def _model(wts: bytes | Callable[[Path], None]) -> Callable[[Path], tuple[str, str]]:
    """MODEL and, beside it, model.wts: these bytes, or what a function writes there."""
    def build(folder: Path) -> tuple[str, str]:
        (folder / "model.json").write_text(MODEL)
        if callable(wts):
            wts(folder / "model.wts")
        else:
            (folder / "model.wts").write_bytes(wts)
        return "model", "model.json"
    return build



def _forced(header: bytes, size: int) -> Callable[[Path], tuple[str, str]]:
    def build(folder: Path) -> tuple[str, str]:
        sparse_file(header, size)(folder / "big.json")
        return "lightnet", "big.json"
    return build


BLANK_LINES = b"1\n" + b"\n" * 10_000_000 + b"w 0 1 3f800000\n"
SHORT_WORDS = b"1\nw 2 600000 " + b"1 " * 600_000 + b"\n"
ARRAYS_PAST_THE_LIMIT = b"16385\n" + b"".join(b"a%d 0 1 0\n" % i for i in range(16385))
COSTLY = [  # every bound is at most 20 times the files (10 MB, 1.2 MB, 0.15 MB, 1.25 GiB)
    # a .wts file is read a chunk at a time, nothing kept per line or per word
    Costly("wts_of_10m_blank_lines", _model(BLANK_LINES), "accepted", "", 10),
    Costly("wts_of_600k_short_words", _model(SHORT_WORDS), "accepted", "", 10),
    # ... holding no more arrays than allowed
    Costly("wts_of_more_arrays_than_allowed", _model(ARRAYS_PAST_THE_LIMIT), "ForeignFormatError",
           "model.wts:1:1", 10),
    # sizes are checked before a file is read
    Costly("wts_of_1_25_gib", _model(sparse_file(b"1\nw 0 1 ", 5 << 28)), "ForeignFormatError", "model.wts", 10),
    Costly("json_of_1_25_gib_forced_to_lightnet", _forced(b'{"ops": [', 5 << 28), "ForeignFormatError",
           "big.json", 10),
]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads peak memory from /proc (Linux)")
@pytest.mark.parametrize("case", COSTLY, ids=[case.id for case in COSTLY])
def test_hostile_lightnet_file_costs_little(case: Costly, tmp_path: Path, capsys):
    run_in_child(case, tmp_path, capsys)


def test_the_valid_model_is_accepted_in_the_child(tmp_path: Path, capsys):
    """The measuring child reads the fixture network and its weights (so that a refusal above is the file's doing)."""
    def build(folder: Path) -> tuple[str, str]:
        doc = json.loads((FIXTURES / "net_il2json.json").read_text())
        doc["ops"][0]["params"] = [{"arg_name": "dtype", "value": "TL_FLOAT"},
                                   {"arg_name": "dims", "value": [1, 3, 8, 8]}, {"arg_name": "data", "value": [0]},
                                   {"arg_name": "ran", "value": [0, 0]}, {"arg_name": "from_file", "value": False}]
        (folder / "model.json").write_text(json.dumps(doc))
        (folder / "model.wts").write_bytes((FIXTURES / "net_il2json.wts").read_bytes())
        return "model", "model.json"

    run_in_child(Costly("valid", build, "accepted", "", 30), tmp_path, capsys)
