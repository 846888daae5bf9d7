"""Running converted models in the Khronos executor (`nnef.Session`), in this process or, for files known to abort
it, in a child process whose death is the expected result."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from exporter.consumers import close_all, compound_standard_ops, defined_fragments

# The Khronos executor has no kernel for nearest_upsample; its standard definition runs.
LOWERED = ("nearest_upsample",)


def run_khronos(folder: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    lowered = defined_fragments(folder) + compound_standard_ops() + list(LOWERED)
    with nnef.Session(str(folder), lowered=lowered) as session:
        outputs = session(*[np.ascontiguousarray(x) for x in inputs])
    return [np.asarray(output) for output in (outputs if isinstance(outputs, (tuple, list)) else [outputs])]


def session_dies(folder: Path, inputs: list[np.ndarray], scratch: Path) -> bool:
    """Whether the Khronos executor, run on `folder` in a child process, is killed (by an abort)."""
    pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    np.savez(scratch / "inputs.npz", *inputs)
    code = ("import sys, pathlib, numpy as np; sys.path.insert(0, sys.argv[3]); "
            "from formats.khronos_session import run_khronos; a = np.load(sys.argv[2]); "
            "run_khronos(pathlib.Path(sys.argv[1]), [a[f'arr_{i}'] for i in range(len(a.files))])")
    result = subprocess.run([sys.executable, "-c", code, str(folder), str(scratch / "inputs.npz"),
                             str(Path(__file__).resolve().parents[1])], capture_output=True, timeout=300)
    return result.returncode < 0


def check_session(folder: Path, inputs: list[np.ndarray], expected: list[np.ndarray], rtol: float, *,
                  fails: str | None = None, crashes: str | None = None) -> None:
    """The Khronos executor reproduces `expected`, unless a table records why it cannot: `crashes` (it aborts, run
    in a child process that must die) or `fails` (it raises or differs). A recorded failure must still happen, so
    an entry that is no longer needed is noticed."""
    if crashes:
        assert session_dies(folder, inputs, folder.parent), \
            f"recorded as crashing nnef.Session, but it ran (remove the entry): {crashes}"
        return
    try:
        close_all(run_khronos(folder, inputs), expected, rtol, "nnef.Session")
    except pytest.skip.Exception:
        raise
    except Exception as error:  # noqa: BLE001  (a failure the table may record)
        if fails:
            return
        raise AssertionError(f"nnef.Session: {type(error).__name__}: {error}") from error
    assert not fails, f"recorded as failing in nnef.Session but passed (remove it): {fails}"
