"""The public surface other code relies on: names and signatures pinned."""
from __future__ import annotations

import inspect

import nnef_torch


def test_public_names():
    for name in ("read_graph", "read_model", "read_tensor", "write_tensor", "NNEFError", "NNEFSyntaxError",
                 "NNEFSemanticError", "NNEFTypeError", "NNEFShapeError", "NNEFTensorFileError",
                 "NNEFQuantizationError", "NNEFContainerError", "NNEFUnsupportedError", "ForeignFormatError",
                 "Location"):
        assert hasattr(nnef_torch, name), name
    for name in ("NNEFSyntaxError", "NNEFSemanticError", "NNEFShapeError", "NNEFTensorFileError",
                 "NNEFQuantizationError", "NNEFContainerError", "NNEFUnsupportedError", "ForeignFormatError"):
        assert issubclass(getattr(nnef_torch, name), nnef_torch.NNEFError)


def test_signatures():
    def sig(fn):
        return str(inspect.signature(fn))
    assert sig(nnef_torch.read_tensor) == "(source: 'str | os.PathLike | bytes | bytearray | memoryview') -> 'np.ndarray'"
    assert sig(nnef_torch.write_tensor) == ("(path: 'str | os.PathLike', array: 'Any', *, "
                                            "quantization: 'dict[str, Any] | None' = None, layout: 'str' = 'current', "
                                            "item_type: 'str | None' = None) -> 'None'")
    assert list(inspect.signature(nnef_torch.read_model).parameters) == [
        "path", "load_tensors", "atomic", "custom_shapes", "input_shapes", "format", "params", "inputs", "outputs",
        "batch_size", "batch_axes", "lenient"]
    assert list(inspect.signature(nnef_torch.read_graph).parameters) == [
        "text", "file", "quant_text", "quant_file", "atomic", "custom_shapes", "input_shapes", "batch_size",
        "batch_axes", "lenient", "constants"]
    assert inspect.signature(nnef_torch.read_model).parameters["lenient"].default is True
    assert inspect.signature(nnef_torch.read_graph).parameters["lenient"].default is True


def test_torch_side_signatures():
    import inspect
    params = inspect.signature(nnef_torch.load).parameters
    assert list(params) == ["path", "params", "format", "device", "dtype", "input_shapes", "custom_ops", "progress",
                            "inputs", "outputs", "batch_size", "batch_axes", "fuse", "lenient"]
    assert params["fuse"].default is True and params["lenient"].default is True
    assert all(params[name].kind is inspect.Parameter.KEYWORD_ONLY for name in list(params)[1:])
    assert all(params[name].default is None for name in ("inputs", "outputs", "batch_size", "batch_axes"))
    params = inspect.signature(nnef_torch.save).parameters
    assert list(params) == ["module", "path", "example_inputs", "quantization", "compress", "progress", "format",
                            "weights", "dialect", "dynamic_batch", "dynamic_shapes", "target", "fold_batch_norm",
                            "input_names", "output_names", "ops"]
    assert all(params[name].kind is inspect.Parameter.KEYWORD_ONLY and params[name].default is None
               for name in list(params)[3:] if name not in ("dynamic_batch", "fold_batch_norm"))
    assert params["dynamic_batch"].kind is inspect.Parameter.KEYWORD_ONLY and params["dynamic_batch"].default is False
    assert params["fold_batch_norm"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["fold_batch_norm"].default is False
    assert list(inspect.signature(nnef_torch.NNEFModule.save).parameters) == [
        "self", "path", "compress", "progress", "format", "weights", "dialect", "target"]
    assert issubclass(nnef_torch.NNEFModule, __import__("torch").fx.GraphModule)


def test_export_surface():
    params = inspect.signature(nnef_torch.export).parameters
    assert list(params) == ["module", "example_inputs", "quantization", "dynamic_batch", "dynamic_shapes", "target",
                            "fold_batch_norm", "input_names", "output_names", "ops", "progress"]
    assert params["progress"].kind is inspect.Parameter.KEYWORD_ONLY and params["progress"].default is None
    assert params["ops"].kind is inspect.Parameter.KEYWORD_ONLY and params["ops"].default is None
    assert params["fold_batch_norm"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["fold_batch_norm"].default is False
    assert all(params[name].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and
               params[name].default is inspect.Parameter.empty for name in ("module", "example_inputs"))
    assert params["quantization"].kind is inspect.Parameter.KEYWORD_ONLY and params["quantization"].default is None
    assert params["dynamic_batch"].kind is inspect.Parameter.KEYWORD_ONLY and params["dynamic_batch"].default is False
    from nnef_torch.exporter.quantization import QuantExport
    assert [f.name for f in __import__("dataclasses").fields(QuantExport)] == ["op", "inline", "weights", "block_weights"]
    assert QuantExport() == QuantExport(op=None, inline=False, weights="float")
    assert nnef_torch.save.__kwdefaults__["quantization"] is None
    assert inspect.isclass(nnef_torch.Model) and callable(nnef_torch.Model.save)
    assert list(inspect.signature(nnef_torch.Model.save).parameters) == ["self", "path", "compress", "progress"]
    assert issubclass(nnef_torch.ExportError, nnef_torch.NNEFError) and issubclass(nnef_torch.ExportError, ValueError)
    assert "problems" in inspect.signature(nnef_torch.ExportError).parameters


def test_quantization_surface():
    from nnef_torch import quant
    assert {"FakeQuantize", "fake_quantize", "prepare", "calibrate", "QuantConfig", "QuantScheme", "QuantExport",
            "quantizers", "set_enabled", "set_observing", "MinMaxObserver", "MovingAverageObserver",
            "PercentileObserver"} <= set(quant.__all__)
    assert list(inspect.signature(quant.prepare).parameters) == ["module", "config", "inplace"]
    assert list(inspect.signature(quant.calibrate).parameters)[:2] == ["module", "batches"]
    assert list(inspect.signature(quant.FakeQuantize).parameters)[:1] == ["op"]
    module = nnef_torch.NNEFModule
    assert callable(module.quantizers) and callable(module.set_quantization)
    params = inspect.signature(module.set_quantization).parameters
    assert list(params) == ["self", "enabled", "tensors", "learnable"]


def test_importing_the_format_layer_does_not_import_torch():
    import subprocess
    import sys
    code = ("import sys, nnef_torch, nnef_torch.formats.nnvm; nnef_torch.read_graph; nnef_torch.ExportError; "
            "print('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_viz_surface():
    from nnef_torch import viz
    assert {"draw", "scene", "tree", "relayviz", "read_relayviz", "parse_relayviz", "dot_text", "RenderError",
            "Scene", "Node", "Edge"} <= set(viz.__all__)
    assert list(inspect.signature(viz.draw).parameters) == [
        "source", "output", "example_inputs", "embed_weights", "collapse_fragments", "clusters", "around", "radius",
        "highlight", "options"]
    assert issubclass(viz.RenderError, nnef_torch.NNEFError)
    assert nnef_torch.viz is viz


def test_graph_def_surface():
    from nnef_torch import graph_def
    assert {"load", "save", "ProtoGraph", "ProtoNetwork", "ProtoFunction", "ProtoVariable", "NetworkPass",
            "create_graph_from_module", "graph", "get_default_graph", "reset_default_graph"} <= set(graph_def.__all__)
    assert list(inspect.signature(graph_def.load).parameters) == [
        "path", "batch_size", "exclude_parameter", "parameter_only", "parameters"]
    assert list(inspect.signature(graph_def.save).parameters)[:4] == [
        "path", "content", "include_parameters", "variable_batch_size"]
    network = graph_def.ProtoNetwork
    for method in ("module", "forward_sequence", "execute_on_proto", "promote", "save", "__call__"):
        assert callable(getattr(network, method))
    for decorator in ("on_function_pass_by_name", "on_function_pass_by_type", "on_generate_variable",
                      "on_generate_function_by_name", "on_generate_function_by_type"):
        assert callable(getattr(graph_def.NetworkPass, decorator))
    assert nnef_torch.graph_def is graph_def
