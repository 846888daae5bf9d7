"""`nnef_torch.phases`: one line per phase on stderr, by the progress mode; nested phases are part of the outer one."""
from __future__ import annotations

import re

import pytest

from nnef_torch.phases import phase, reporting

LINE = re.compile(r"(.+) \.\.\. \((stopped after )?\d+\.\d s\)")


def lines(text: str) -> list[str]:
    """Each phase's text, from the lines written (each must have the form 'text ... (1.2 s)')."""
    found = []
    for line in text.splitlines():
        match = LINE.fullmatch(line)
        assert match, f"not a phase line: {line!r}"
        found.append(match.group(1) + (" (stopped)" if match.group(2) else ""))
    return found


def test_progress_true_prints_each_phase_in_order(capsys):
    with reporting(True):
        with phase("tracing Net"):
            pass
        with phase("writing 3 operations"):
            pass
    captured = capsys.readouterr()
    assert captured.out == ""
    assert lines(captured.err) == ["tracing Net", "writing 3 operations"]


def test_progress_false_prints_nothing(capsys):
    with reporting(False), phase("tracing Net"):
        pass
    assert capsys.readouterr().err == ""


def test_default_prints_nothing_off_a_terminal(capsys):
    with phase("tracing Net"):  # no reporting open: the default, progress=None; pytest's stderr is no terminal
        pass
    with reporting(None), phase("tracing Net"):
        pass
    assert capsys.readouterr().err == ""


def test_nested_phase_is_part_of_the_outer_one(capsys):
    with reporting(True), phase("tracing Net at batch 11"), phase("tracing Net"):
        pass
    assert lines(capsys.readouterr().err) == ["tracing Net at batch 11"]


def test_none_inside_an_explicit_mode_keeps_it(capsys):
    with reporting(True), reporting(None), phase("inner"):
        pass
    with reporting(False), reporting(None), phase("quiet"):
        pass
    assert lines(capsys.readouterr().err) == ["inner"]


def test_a_failed_phase_says_it_stopped(capsys):
    with pytest.raises(KeyError), reporting(True), phase("tracing Net"):
        raise KeyError("x")
    assert lines(capsys.readouterr().err) == ["tracing Net (stopped)"]


def test_on_a_terminal_only_a_phase_that_lasts_shows(capsys, monkeypatch):
    import nnef_torch.phases as phases
    monkeypatch.setattr(phases, "_on_terminal", lambda: True)
    monkeypatch.setattr(phases, "SLOW", 3600.0)  # a quick phase ends long before its line would show
    with phase("quick"):
        pass
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(phases, "SLOW", 0.0)  # a phase past the threshold shows, with its time
    with phase("slow"):
        pass
    assert lines(capsys.readouterr().err) == ["slow"]
