"""The command line as a whole: help with examples for every verb, exit codes, Ctrl-C, and a cheap import."""
from __future__ import annotations

import subprocess
import sys

import pytest

from cli.helpers import cli
from nnef_torch.cli import build_parser, demo_model_path, report

VERBS = ("validate", "info", "run", "export", "export-llm", "convert", "viz", "demo")


@pytest.mark.parametrize("verb", VERBS)
def test_help_of_each_verb_shows_an_example(capsys, verb):
    status, out, _ = cli(capsys, verb, "--help")
    assert status == 0
    assert "examples:" in out and f"nnef-torch {verb}" in out.split("examples:")[1]


def test_every_verb_is_registered():
    choices = build_parser()._subparsers._group_actions[0].choices
    assert set(choices) == set(VERBS)


def test_usage_errors_exit_2(capsys):
    assert cli(capsys)[0] == 2
    assert cli(capsys, "frobnicate")[0] == 2
    assert cli(capsys, "run")[0] == 2  # MODEL missing


def test_ctrl_c_exits_130_without_traceback(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(report, "info", interrupted)
    status, _, err = cli(capsys, "info", demo_model_path())
    assert status == 130 and "interrupted" in err and "Traceback" not in err


def test_os_errors_on_user_paths_exit_1(tmp_path, capsys):
    status, _, err = cli(capsys, "run", demo_model_path(), "--input", f"image={tmp_path / 'absent.npy'}")
    assert status == 1 and err.startswith("nnef-torch: error:") and "absent.npy" in err


def test_format_verbs_do_not_import_torch(tmp_path):
    script = (
        "import sys\n"
        "from nnef_torch.cli import main\n"
        "assert 'torch' not in sys.modules, 'import nnef_torch.cli imported torch'\n"
        f"model = {demo_model_path()!r}\n"
        "assert main(['validate', model]) == 0\n"
        "assert main(['info', model]) == 0\n"
        f"assert main(['convert', model, {str(tmp_path / 'm.tgz')!r}, '--tensor-layout', 'current']) == 0\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
