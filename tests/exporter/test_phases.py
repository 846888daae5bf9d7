"""What an export says while it runs: one line per phase on stderr with progress=True, nothing with progress=False;
and none of torch's warnings about its own code (nn.LSTM / nn.GRU), while the user's own warnings still show."""
from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch import nn
from torch.export import Dim

import nnef_torch
from tests.test_phases import lines


class Recurrent(nn.Module):
    def __init__(self, kind: type[nn.Module]):
        super().__init__()
        self.rnn = kind(4, 6, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


class Warns(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        warnings.warn("the user's own warning", UserWarning, stacklevel=1)
        return x.relu()


def phases(err: str) -> list[str]:
    return [re.sub(r"\b\d+ (traced )?operations?", r"N \1operations", text) for text in lines(err)]


def test_static_export_prints_its_phases_in_order(capsys):
    nnef_torch.export(nn.Sequential(nn.Linear(3, 2), nn.ReLU()).eval(), torch.randn(1, 3), progress=True)
    assert phases(capsys.readouterr().err) == ["tracing Sequential with torch.export",
                                               "converting N traced operations of Sequential to NNEF",
                                               "writing N operations as NNEF text"]


def test_progress_false_prints_nothing(capsys):
    nnef_torch.export(Recurrent(nn.LSTM).eval(), torch.randn(2, 3, 4), dynamic_batch=True, progress=False)
    assert capsys.readouterr().err == ""


def test_dynamic_batch_export_names_each_trace(capsys):
    nnef_torch.export(Recurrent(nn.GRU).eval(), torch.randn(2, 3, 4), dynamic_batch=True, progress=True)
    found = [text for text in phases(capsys.readouterr().err) if not text.startswith("writing")]
    assert found == ["tracing Recurrent with a symbolic batch", "tracing Recurrent at batch 11",
                     "tracing Recurrent at batch 13", "reading Recurrent back at batches 11, 13 and 2"]


def test_symbolic_export_reads_the_graph_back(capsys):
    nnef_torch.export(nn.Linear(3, 2).eval(), torch.randn(2, 3), dynamic_shapes=({0: Dim("b")},), progress=True)
    assert phases(capsys.readouterr().err)[-1] == "reading Linear back at other values of its symbols"


def test_save_reports_the_export_it_runs(capsys, tmp_path):
    nnef_torch.save(nn.Linear(3, 2).eval(), tmp_path / "m", torch.randn(1, 3), progress=True)
    err = capsys.readouterr().err  # the phase lines, then the bar of the tensors written
    assert err.startswith("tracing Linear with torch.export ... (")
    nnef_torch.save(nn.Linear(3, 2).eval(), tmp_path / "m", torch.randn(1, 3), progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
@pytest.mark.parametrize("how", [{}, {"dynamic_batch": True}], ids=["static", "dynamic_batch"])
def test_recurrent_export_emits_no_warning(kind, how):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nnef_torch.export(Recurrent(kind).eval(), torch.randn(2, 3, 4), **how)
    assert [str(w.message) for w in caught] == []


def test_the_users_own_warning_still_shows():
    with pytest.warns(UserWarning, match="the user's own warning"):
        nnef_torch.export(Warns(), torch.randn(2, 3))
