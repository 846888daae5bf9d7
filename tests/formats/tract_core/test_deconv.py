"""`deconv` in a tract_core document, read as tract reads it: the filter as [out, in/groups, ...] (a conv filter's
layout, where NNEF and torch have [in, out/groups, ...]) and `output_shape` as the spatial extents. Checked against
torch's conv_transpose (the independent reference for what tract computes), then nnef_torch's reading, its standard
save (Khronos parser, strict re-import) and its tract_core save (tract again)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nnef_torch
from nnef_torch.format.tensor_file import encode

HEAD = "version 1.0;\nextension tract_registry tract_core;\n"

# (in channels, out channels, groups, kernel, stride, padding, output padding, dilation)
CASES = {
    "plain": (4, 6, 1, (2, 2), (2, 2), (0, 0), (0, 0), (1, 1)),
    "groups_output_padding": (4, 6, 2, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),
    "groups_dilation_uneven": (6, 4, 2, (3, 2), (2, 1), (1, 0), (1, 0), (1, 2)),
    "depthwise": (4, 4, 4, (3, 3), (1, 1), (1, 1), (0, 0), (1, 1)),
}


def _case(case: tuple, tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """A tract_core document with one deconv whose filter is torch's weight in tract's layout; its input, and
    torch's conv_transpose2d of it."""
    cin, cout, groups, kernel, stride, padding, output_padding, dilation = case
    generator = torch.Generator().manual_seed(5)
    weight = torch.randn(cin, cout // groups, *kernel, generator=generator)
    x = torch.randn(1, cin, 5, 6, generator=generator)
    expected = F.conv_transpose2d(x, weight, None, stride, padding, output_padding, groups, dilation)
    tract_filter = weight.reshape(groups, cin // groups, cout // groups, *kernel).transpose(1, 2) \
        .reshape(cout, cin // groups, *kernel)
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "w.dat").write_bytes(encode(tract_filter.numpy()))
    pads = ", ".join(f"({p}, {p})" for p in padding)
    (tmp_path / "graph.nnef").write_text(
        HEAD + "graph g(x) -> (y)\n{\n"
        f"    x = tract_core_external(shape = [1, {cin}, 5, 6], datum_type = 'f32');\n"
        f"    w = variable<scalar>(label = 'w', shape = {list(tract_filter.shape)});\n"
        f"    y = deconv(x, w, padding = [{pads}], stride = {list(stride)}, dilation = {list(dilation)}, "
        f"output_shape = {list(expected.shape[2:])}, groups = {groups});\n}}\n")
    return tmp_path, x.numpy(), expected.numpy()


def _tract(folder: Path, x: np.ndarray) -> np.ndarray:
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    return tract.nnef().load(str(folder)).into_runnable().run([x])[0].to_numpy()


def _ours(folder: Path, x: np.ndarray, **options) -> np.ndarray:
    with torch.no_grad():
        return nnef_torch.load(folder, **options)(torch.from_numpy(x)).numpy()


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_deconv_reads_as_tract(case, tmp_path):
    folder, x, expected = _case(case, tmp_path / "in")
    tolerance = 1e-5 * np.abs(expected).max()
    np.testing.assert_allclose(_tract(folder, x), expected, atol=tolerance)  # what tract does
    np.testing.assert_allclose(_ours(folder, x), expected, atol=tolerance)
    loaded = nnef_torch.load(folder)
    loaded.save(tmp_path / "standard")
    text = (tmp_path / "standard" / "graph.nnef").read_text()
    assert "tract" not in text and f"output_shape = {list(expected.shape)}" in text
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    graph = nnef.load_graph(str(tmp_path / "standard"))
    nnef.infer_shapes(graph)
    assert list(graph.tensors[graph.outputs[0]].shape) == list(expected.shape)
    np.testing.assert_allclose(_ours(tmp_path / "standard", x, lenient=False), expected, atol=tolerance)
    loaded.save(tmp_path / "tract", dialect="tract_core")
    np.testing.assert_allclose(_tract(tmp_path / "tract", x), expected, atol=tolerance)


def test_whole_output_shape_is_ignored_as_tract_ignores_it(tmp_path):
    """tract reads an `output_shape` of any other length than the spatial rank as absent (no output padding)."""
    folder, x, _ = _case(CASES["groups_output_padding"], tmp_path)
    text = (folder / "graph.nnef").read_text().replace("output_shape = [10, 12]", "output_shape = [1, 6, 10, 12]")
    (folder / "graph.nnef").write_text(text)
    found = _tract(folder, x)
    assert found.shape == (1, 6, 9, 11)
    np.testing.assert_array_equal(_ours(folder, x).shape, found.shape)
    np.testing.assert_allclose(_ours(folder, x), found, atol=1e-5 * np.abs(found).max())
