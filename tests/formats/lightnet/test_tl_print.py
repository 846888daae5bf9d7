"""TensorLight's text form of tensors (`tl_tensor_print`), which LightNet's print and fprint write: `%.3f` for
floating types, decimals for integers, 0 / 1 for booleans, one bracket per dimension, a block of the last k
dimensions closed with k brackets, a line break and ndim - k spaces; and the print op as a submodule that
dead-code elimination keeps."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.fx as fx

import nnef_torch
from formats.lightnet.lightnet_ir import create, document, op, write
from nnef_torch.ops.torch_lightnet import TensorPrint, print_text, tensor_text


@pytest.mark.parametrize(("array", "text"), [
    (np.array([1.5, -2.25, 0.0005, 0.0004], np.float32), "[1.500 -2.250 0.001 0.000]\n"),
    (np.array([[2, 3, 4], [6, 7, 8]], np.float32), "[[2.000 3.000 4.000]\n [6.000 7.000 8.000]]\n"),
    (np.arange(8).reshape(2, 2, 2), "[[[0 1]\n  [2 3]]\n [[4 5]\n  [6 7]]]\n"),
    (np.arange(6).reshape(2, 1, 3), "[[[0 1 2]]\n [[3 4 5]]]\n"),
    (np.arange(4).reshape(1, 4, 1), "[[[0]\n  [1]\n  [2]\n  [3]]]\n"),
    (np.array([[1.0]], np.float64), "[[1.000]]\n"),
    (np.array([True, False]), "[1 0]\n"),
    (np.array([-1, 2**40], np.int64), "[-1 1099511627776]\n"),
    (np.array([-0.0, np.inf, -np.inf, np.nan, -np.nan], np.float32), "[-0.000 inf -inf nan -nan]\n"),
    (np.array([0.0625, 2.0005, 1e10], np.float64), "[0.062 2.001 10000000000.000]\n"),  # C rounds exactly
])
def test_tensor_text(array: np.ndarray, text: str) -> None:
    assert tensor_text(array) == text


def test_print_text_puts_the_message_first() -> None:
    assert print_text("out:", np.zeros(2, np.float32)) == "out:\n[0.000 0.000]\n"


def test_dead_code_elimination_keeps_impure_modules() -> None:
    """torch.fx's eliminate_dead_code asks a call_module node's module for `_is_impure`."""
    root = torch.nn.Module()
    root.add_module("show", TensorPrint("m"))
    graph = fx.Graph(owning_module=root)
    x = graph.placeholder("x")
    graph.call_module("show", (x,))
    graph.output(x)
    graph.eliminate_dead_code()
    assert [node.op for node in graph.nodes] == ["placeholder", "call_module", "output"]
    TensorPrint._is_impure = False
    try:
        graph.eliminate_dead_code()
        assert [node.op for node in graph.nodes] == ["placeholder", "output"]
    finally:
        TensorPrint._is_impure = True


def test_messages_keep_quotes_and_backslashes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message = "it's \"x\" \\ 100%\ttab"
    module = nnef_torch.load(write(tmp_path, document(create("c", [1], [3]),
                                                      op("print", "p", {"src": "c"}, {}, msg=message))))
    capsys.readouterr()
    module()
    assert capsys.readouterr().out == f"{message}\n[3.000]\n"
    module.save(tmp_path / "nnef")
    capsys.readouterr()
    nnef_torch.load(tmp_path / "nnef")()  # the saved NNEF keeps the print
    assert capsys.readouterr().out == f"{message}\n[3.000]\n"


def test_messages_nnef_cannot_hold_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, document(create("c", [1], [3]), op("print", "p", {"src": "c"}, {}, msg="größe")))
    with pytest.raises(nnef_torch.NNEFUnsupportedError, match="param 'msg' holds 'ö': NNEF strings hold printable"):
        nnef_torch.load(path)
