"""Bad ONNX files give a ForeignFormatError that says where and what."""
import sys
from pathlib import Path

import pytest

import nnef_torch
from nnef_torch.errors import ForeignFormatError

onnx = pytest.importorskip("onnx")
MLP = Path(__file__).parent / "fixtures" / "mlp13.onnx"


def _edited(tmp_path, edit):
    model = onnx.load(str(MLP))
    edit(model)
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_truncated_file(tmp_path):
    path = tmp_path / "cut.onnx"
    path.write_bytes(MLP.read_bytes()[:-300])
    with pytest.raises(ForeignFormatError, match="not a valid ONNX protobuf|node"):
        nnef_torch.load(path, format="onnx")


def test_opset_12_is_refused(tmp_path):
    path = _edited(tmp_path, lambda m: m.opset_import[0].__setattr__("version", 12))
    with pytest.raises(ForeignFormatError, match="opset 12 .* opsets 13 to 21"):
        nnef_torch.load(path)


def test_unknown_op_names_the_node(tmp_path):
    path = _edited(tmp_path, lambda m: m.graph.node[1].__setattr__("op_type", "FancyRelu"))
    with pytest.raises(ForeignFormatError, match=r"node 1 '.*' \(FancyRelu\)"):
        nnef_torch.load(path)


def test_missing_initializer_names_the_node(tmp_path):
    path = _edited(tmp_path, lambda m: m.graph.initializer.pop(0))
    with pytest.raises(ForeignFormatError, match=r"node 0 '.*' \(Gemm\) reads '0.weight'.*missing"):
        nnef_torch.load(path)


def test_unsupported_attribute_value_names_node_and_attribute(tmp_path):
    model = onnx.load(str(MLP.with_name("cnn13.onnx")))
    pool = next(n for n in model.graph.node if n.op_type == "MaxPool")
    kept = [a for a in pool.attribute if a.name != "storage_order"]
    del pool.attribute[:]
    pool.attribute.extend(kept + [onnx.helper.make_attribute("storage_order", 1)])
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ForeignFormatError, match=r"\(MaxPool\): attribute 'storage_order' = 1 is not supported"):
        nnef_torch.load(path)


def test_cycle_names_the_node(tmp_path):
    def cycle(model):  # node 1 (Relu) reads the output of node 2 (Gemm), which reads node 1's
        model.graph.node[1].input[0] = model.graph.node[2].output[0]
    path = _edited(tmp_path, cycle)
    with pytest.raises(ForeignFormatError, match=r"node 1 '/1/Relu' \(Relu\) reads '/2/Gemm_output_0', a later "
                                                 r"node's output \(a cycle"):
        nnef_torch.load(path)


def test_missing_onnx_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError
    with pytest.raises(ForeignFormatError, match=r"needs the onnx package: pip install nnef-torch\[onnx\]"):
        nnef_torch.load(MLP)
