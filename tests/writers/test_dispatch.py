"""`nnef_torch.save` and `NNEFModule.save`: one dispatcher picks the writer, and the format asked for is the one
written, whatever the path's suffix says."""
from __future__ import annotations

import nnef
import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.cli import demo_model_path


def test_format_nnef_wins_over_a_json_suffix(tmp_path):
    module = nnef_torch.load(demo_model_path())
    target = tmp_path / "m.json"
    nnef_torch.save(module, target, format="nnef")
    assert target.is_dir() and (target / "graph.nnef").is_file()
    assert not (tmp_path / "m.wts").exists()
    graph = nnef.load_graph(str(target))  # the Khronos parser reads it as NNEF
    assert [op.name for op in graph.operations].count("conv") == 2
    x = torch.randn(1, 1, 16, 16)
    reread = nnef_torch.load(target, format="nnef")
    torch.testing.assert_close(reread(x), module(x))


def test_module_save_is_the_same_dispatcher(tmp_path):
    module = nnef_torch.load(demo_model_path())
    module.save(tmp_path / "a.json", format="nnef")
    nnef_torch.save(module, tmp_path / "b.json", format="nnef")
    assert (tmp_path / "a.json" / "graph.nnef").read_text() == (tmp_path / "b.json" / "graph.nnef").read_text()
    module.save(tmp_path / "c.json")  # the suffix picks LightNet when no format is given
    assert (tmp_path / "c.json").is_file() and (tmp_path / "c.wts").is_file()
    np.testing.assert_array_equal(sorted(p.name for p in (tmp_path / "a.json").iterdir()),
                                  sorted(p.name for p in (tmp_path / "b.json").iterdir()))


def test_each_writer_declares_its_options_and_one_check_refuses_the_others(tmp_path):
    from nnef_torch.errors import NNEFOptionError
    from nnef_torch.writers import WRITERS, check_options, writer_for
    assert writer_for(tmp_path / "m.JSON").name == "lightnet" and writer_for(tmp_path / "m.tgz").name == "nnef"
    assert writer_for(tmp_path / "m.json", "nnef").name == "nnef"
    for writer in WRITERS.values():
        assert check_options(writer, {key: 1 for key in writer.options}) == {key: 1 for key in writer.options}
    module = nnef_torch.load(demo_model_path())
    with pytest.raises(NNEFOptionError, match=r"compress= applies to NNEF models; a LightNet model \(format='lightnet'\)"):
        module.save(tmp_path / "m.json", compress=True)
    assert not (tmp_path / "m.json").exists()


def test_convert_picks_its_target_from_the_same_table(tmp_path):
    from nnef_torch.cli import main
    from nnef_torch.writers import FORMATS
    assert main(["convert", str(demo_model_path()), str(tmp_path / "m.json")]) == 0
    assert (tmp_path / "m.json").is_file() and (tmp_path / "m.wts").is_file()
    assert main(["convert", str(demo_model_path()), str(tmp_path / "n.json"), "--to", "nnef"]) == 0
    assert (tmp_path / "n.json" / "graph.nnef").is_file()
    assert set(FORMATS) == {"nnef", "lightnet"}
