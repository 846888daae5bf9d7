"""Rendering DOT with Graphviz's dot: SVG keeps the node ids, PNG and PDF are what their magic says, and every
failure (dot missing, bad DOT, too slow, unknown format) is a RenderError that leaves the target alone."""
from __future__ import annotations

import importlib
import shutil
import subprocess

import pytest

import nnef_torch
from nnef_torch.cli import demo_model_path
from nnef_torch.errors import NNEFError
from nnef_torch.viz.dot import dot_text
from nnef_torch.viz.from_ir import scene_of
from nnef_torch.viz.render import GRAPHVIZ_HINT, RenderError, find_dot, render

# the module (the package's `render` attribute is the function of the same name)
render_module = importlib.import_module("nnef_torch.viz.render")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (apt-get install graphviz)")


@pytest.fixture(scope="module")
def demo_dot():
    return dot_text(scene_of(nnef_torch.read_model(demo_model_path()).graph))


def test_find_dot_is_the_one_on_the_path():
    assert find_dot() == shutil.which("dot")


@needs_dot
def test_svg_keeps_node_ids_and_classes(demo_dot, tmp_path):
    path = tmp_path / "demo.svg"
    written = render(demo_dot, str(path), "svg")
    data = path.read_bytes()
    assert written == data
    text = data.decode("utf-8")
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    operations = len(nnef_torch.read_model(demo_model_path()).graph.operations)
    assert '<g id="n0" class="node input' in text
    for index in range(operations):
        assert f'<g id="n{index}" class="node ' in text


@needs_dot
@pytest.mark.parametrize("format, magic", [("png", b"\x89PNG\r\n\x1a\n"), ("pdf", b"%PDF")])
def test_binary_formats(demo_dot, tmp_path, format, magic):
    path = tmp_path / f"demo.{format}"
    render(demo_dot, path, format)
    assert path.read_bytes().startswith(magic)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left beside it


@needs_dot
def test_path_none_only_returns(demo_dot, tmp_path):
    assert render(demo_dot, None, "svg").startswith(b"<?xml")


@needs_dot
def test_bad_dot_raises_with_dots_complaint(tmp_path):
    path = tmp_path / "bad.svg"
    path.write_bytes(b"old")
    with pytest.raises(RenderError, match="syntax error") as caught:
        render("digraph { a -> [ }", str(path), "svg")
    assert isinstance(caught.value, NNEFError) and isinstance(caught.value, RuntimeError)
    assert "dot -Tsvg failed" in str(caught.value)
    assert path.read_bytes() == b"old"


def test_unknown_format_is_refused(demo_dot, tmp_path):
    with pytest.raises(RenderError, match="expected one of svg, png, pdf"):
        render(demo_dot, str(tmp_path / "x.gif"), "gif")


def test_missing_dot_says_how_to_install(demo_dot, tmp_path, monkeypatch):
    monkeypatch.setattr(render_module.shutil, "which", lambda name: None)
    assert find_dot() is None
    with pytest.raises(RenderError) as caught:
        render(demo_dot, str(tmp_path / "x.svg"), "svg")
    assert GRAPHVIZ_HINT in str(caught.value)
    for hint in ("apt-get install graphviz", "brew install graphviz", "conda install graphviz", "graphviz.org"):
        assert hint in GRAPHVIZ_HINT
    assert not (tmp_path / "x.svg").exists()


def test_timeout_is_a_render_error(demo_dot, tmp_path, monkeypatch):
    def too_slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])

    monkeypatch.setattr(render_module.shutil, "which", lambda name: "/usr/bin/dot")
    monkeypatch.setattr(render_module.subprocess, "run", too_slow)
    with pytest.raises(RenderError, match="did not finish within 1.5 s"):
        render(demo_dot, str(tmp_path / "x.svg"), "svg", timeout=1.5)


@needs_dot
def test_layout_says_what_it_does_with_progress(demo_dot, capsys):
    render(demo_dot, None, "svg", progress=True)
    assert capsys.readouterr().err.startswith("laying out the drawing with Graphviz's dot -Tsvg ... (")
    render(demo_dot, None, "svg", progress=False)
    assert capsys.readouterr().err == ""
