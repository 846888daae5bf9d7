"""The checks of bench/bench_onnx_front_ends.py, one function per contender and check, run in its worker processes:
each raises (AssertionError with the difference, or the contender's own error) unless the check passes, and
`NotTried` where an earlier step of its contender failed."""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RTOL, ATOL = 1e-3, 1e-4
OTHER_BATCH = 5


class NotTried(Exception):
    """A check that cannot be tried because an earlier step of its contender failed."""



@dataclass
class Case:
    onnx: Path
    scratch: Path
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    other_inputs: list[np.ndarray]  # empty unless the file has a dynamic batch
    other_expected: list[np.ndarray]


def failure(error: BaseException) -> str:
    """Exception type and the first line of its message (for a chained tract error, its innermost cause)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if "Caused by:" in lines:
        causes = []
        for line in lines[lines.index("Caused by:") + 1:]:
            if not re.match(r"\d+: ", line):  # the numbered causes end where a backtrace may begin
                break
            causes.append(line.split(": ", 1)[1])
        lines = causes[-1:] or lines
    return f"{type(error).__name__}: {(lines or [''])[0][:180]}".rstrip(": ")


def compare(found: list[Any], expected: list[np.ndarray], who: str = "output") -> None:
    """Raises AssertionError unless every output has the expected shape and is close (RTOL, ATOL)."""
    found = [np.asarray(x.detach().numpy() if hasattr(x, "detach") else x) for x in found]
    if len(found) != len(expected):
        raise AssertionError(f"{len(found)} outputs, expected {len(expected)}")
    for i, (f, e) in enumerate(zip(found, expected)):
        if f.shape != e.shape:
            raise AssertionError(f"{who} {i}: shape {f.shape}, expected {e.shape}")
        if not np.allclose(f.astype(np.float64), e.astype(np.float64), rtol=RTOL, atol=ATOL):
            diff = np.abs(f.astype(np.float64) - e.astype(np.float64)).max()
            raise AssertionError(f"{who} {i}: max |difference| {diff:.3g} (largest |expected| "
                                 f"{np.abs(e).max():.3g})")


def as_list(outputs: Any) -> list[Any]:
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def tensors(arrays: list[np.ndarray]) -> list[Any]:
    import torch
    return [torch.from_numpy(np.array(a)) for a in arrays]


def check_gradients(module: Any, outputs: list[Any]) -> list[Any]:
    """Backward of the float outputs' sum; every float parameter must get a finite gradient. Returns them."""
    import torch
    parameters = [p for p in module.parameters() if p.is_floating_point()]
    if not parameters:
        raise AssertionError("the module has no float parameters")
    loss = sum(o.float().sum() for o in outputs if torch.is_tensor(o) and o.is_floating_point())
    if not torch.is_tensor(loss) or not loss.requires_grad:
        raise AssertionError("the outputs do not depend on any parameter")
    loss.backward()
    missing = [p for p in parameters if p.grad is None]
    if missing:
        raise AssertionError(f"{len(missing)} of {len(parameters)} parameters got no gradient")
    if not all(bool(torch.isfinite(p.grad).all()) for p in parameters):
        raise AssertionError("a gradient is not finite")
    return parameters


def check_other_batch(module: Any, case: Case) -> None:
    if case.other_inputs:
        compare(as_list(module(*tensors(case.other_inputs))), case.other_expected, f"batch {OTHER_BATCH} output")


# onnx2torch


def onnx2torch_runs(case: Case, state: dict[str, Any]) -> None:
    import onnx2torch
    import torch
    state["module"] = onnx2torch.convert(str(case.onnx))
    with torch.no_grad():
        compare(as_list(state["module"](*tensors(case.inputs))), case.expected)


def onnx2torch_trains(case: Case, state: dict[str, Any]) -> None:
    if "module" not in state:
        raise NotTried()
    module = state["module"]
    check_gradients(module, as_list(module(*tensors(case.inputs))))
    check_other_batch(module, case)


# nnef_tools


def nnef_tools_runs(case: Case, state: dict[str, Any]) -> None:
    folder = str(case.scratch / "nnef_tools.nnef")
    nnef_tools_convert(case, folder)
    state["folder"] = folder
    compare(run_session(folder, case.inputs), case.expected)


def nnef_tools_convert(case: Case, folder: str) -> None:
    import onnx
    from nnef_tools import convert
    graph = onnx.load(str(case.onnx), load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    symbolic = any(not d.HasField("dim_value") for i in inputs for d in i.type.tensor_type.shape.dim)
    shapes = str({i.name: tuple(x.shape) for i, x in zip(inputs, case.inputs)}) if symbolic else None
    args = argparse.Namespace(
        input_model=str(case.onnx), output_model=folder, input_format="onnx", output_format="nnef",
        input_shapes=shapes, io_transpose=None, fold_constants=True, optimize=False, dequantize=False,
        custom_converters=None, custom_shapes=None, custom_fragments=None, custom_optimizers=None,
        mirror_unsupported=False, generate_custom_fragments=False, keep_io_names=False, decompose=None,
        input_names=None, output_names=None, static_only=False, tensor_mapping=None, annotate_shapes=False,
        compress=None)
    messages = io.StringIO()
    with contextlib.redirect_stdout(messages), contextlib.redirect_stderr(messages):
        status = convert.main(args)
    if status != 0 or not os.path.isdir(folder):
        lines = [line.strip() for line in messages.getvalue().splitlines() if line.strip()]
        telling = [line for line in lines if re.search(r"not (implemented|possible)|error|cannot|could not|must",
                                                       line, flags=re.I) and not line.startswith("Found ")]
        raise RuntimeError(f"nnef_tools.convert returned {status}: "
                           + " | ".join(dict.fromkeys((telling or lines)[:2])))


def nnef_tools_tract(case: Case, state: dict[str, Any]) -> None:
    if "folder" not in state:
        raise NotTried("not converted")
    compare(run_tract(state["folder"], case.inputs), case.expected)


def run_tract(folder: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    import tract
    model = tract.nnef().load(folder).into_runnable()
    outputs = model.run([np.ascontiguousarray(x.astype(np.int64) if x.dtype.kind in "iu" else x) for x in inputs])
    return [outputs[i].to_numpy() for i in range(len(outputs))]


def run_session(folder: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The Khronos executor, told to expand the document's own fragments and the compound standard ops."""
    import nnef

    from nnef_torch.stdlib import standard_fragments
    native = {"max_pool", "max_pool_with_index", "avg_pool", "rms_pool", "separable_conv", "separable_deconv",
              "nearest_upsample", "nearest_downsample", "area_downsample"}  # expanded, these hit executor bugs
    lowered = re.findall(r"^fragment (\w+)", Path(folder, "graph.nnef").read_text(), flags=re.M)
    lowered += [n for n, f in standard_fragments().items() if f.body is not None and n not in native]
    arrays = [np.ascontiguousarray(x.astype(np.int32) if x.dtype.kind in "iu" else x) for x in inputs]
    with nnef.Session(folder, lowered=lowered) as session:
        return [np.asarray(o) for o in as_list(session(*arrays))]


# nnef_torch


def nnef_torch_runs(case: Case, state: dict[str, Any]) -> None:
    import torch

    import nnef_torch
    state["module"] = nnef_torch.load(case.onnx)
    with torch.no_grad():
        compare(as_list(state["module"](*tensors(case.inputs))), case.expected)


def nnef_torch_trains(case: Case, state: dict[str, Any]) -> None:
    import torch
    if "module" not in state:
        raise NotTried()
    module = state["module"]
    parameters = check_gradients(module, as_list(module(*tensors(case.inputs))))
    check_other_batch(module, case)  # before the step changes the weights
    with torch.no_grad():
        before = [o.clone() for o in as_list(module(*tensors(case.inputs)))]
        torch.optim.SGD(parameters, lr=0.1).step()
        after = as_list(module(*tensors(case.inputs)))
    if all(torch.equal(a, b) for a, b in zip(after, before)):
        raise AssertionError("one SGD step left the output unchanged")


def saved_by_nnef_torch(case: Case, folder: Path, target: str) -> tuple[Any, list[Any]]:
    """A freshly loaded module, called once on the inputs (symbolic extents bind at the first call, and saving
    asks for them), saved for `target` in `folder`; the module and its input tensors."""
    import nnef_torch
    inputs = tensors(case.inputs)
    module = nnef_torch.load(case.onnx)
    module(*inputs)
    nnef_torch.save(module, folder, inputs[0] if len(inputs) == 1 else tuple(inputs), target=target)
    return module, inputs


def nnef_torch_nnef(case: Case, state: dict[str, Any]) -> None:
    if "module" not in state:
        raise NotTried()
    import torch

    import nnef_torch
    folder = case.scratch / "nnef_torch.nnef"
    module, inputs = saved_by_nnef_torch(case, folder, "standard")
    if (folder / "graph.quant").exists():
        # the Khronos executor ignores graph.quant: it must give the float graph (the module with its fake
        # quantization off), and the file read back with its graph.quant must give onnxruntime's outputs
        with torch.no_grad():
            compare(run_session(str(folder), case.inputs),
                    [o.numpy() for o in as_list(module.set_quantization(enabled=False)(*inputs))], "float graph")
            compare(as_list(nnef_torch.load(folder)(*inputs)), case.expected, "read back with graph.quant")
        return
    try:
        compare(run_session(str(folder), case.inputs), case.expected)
    except AssertionError as error:  # say whether tract, which reads graph.quant, agrees with onnxruntime
        try:
            compare(run_tract(str(folder), case.inputs), case.expected)
            verdict = "tract matches"
        except Exception as other:  # noqa: BLE001  (reported)
            verdict = f"tract: {failure(other)}"
        raise AssertionError(f"{error}; {verdict}") from None


def nnef_torch_tract(case: Case, state: dict[str, Any]) -> None:
    """save(..., target="tract") of a freshly loaded module (the file's dim_params as tract symbols), run by tract."""
    if "module" not in state:
        raise NotTried()
    folder = case.scratch / "nnef_torch.tract"
    saved_by_nnef_torch(case, folder, "tract")
    compare(run_tract(str(folder), case.inputs), case.expected)


WORKERS: dict[str, dict[str, Callable[[Case, dict[str, Any]], None]]] = {
    "onnx2torch": {"runs": onnx2torch_runs, "trains": onnx2torch_trains},
    "nnef_tools": {"NNEF runs": nnef_tools_runs, "tract": nnef_tools_tract},
    "nnef_torch": {"runs": nnef_torch_runs, "trains": nnef_torch_trains, "NNEF": nnef_torch_nnef,
                   "tract": nnef_torch_tract},
}
