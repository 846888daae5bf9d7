"""Type checkers see the public API: mypy accepts tests/typing_client.py and rejects exactly its marked misuses.

The misuses prove the check can fail: were `nnef_torch.load` (imported lazily by the package `__getattr__`) or the
package itself invisible to mypy, every name would be `Any` and the marked lines would pass.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLIENT = Path(__file__).with_name("typing_client.py")
_EXPECT = re.compile(r"#\s*expect:\s*([a-z-]+)\s*$")
_ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*?)\s+\[(?P<code>[a-z-]+)\]$")


def _expected() -> set[tuple[int, str]]:
    lines = CLIENT.read_text().splitlines()
    return {(number, match[1]) for number, line in enumerate(lines, 1) if (match := _EXPECT.search(line))}


def _cache_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A stable cache under .pytest_cache (a cold run analyses torch: tens of seconds), else a fresh one."""
    cache = getattr(request.config, "cache", None)
    return cache.mkdir("mypy") if cache is not None else tmp_path / "mypy"


def test_mypy_sees_the_public_api(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is not installed")
    command = [sys.executable, "-m", "mypy", "--config-file=", "--follow-imports=silent", "--ignore-missing-imports",
               "--show-error-codes", "--no-error-summary", "--no-pretty", "--cache-dir",
               str(_cache_dir(request, tmp_path)), str(CLIENT.relative_to(ROOT))]
    # run from the repository root so that mypy finds the package source (an editable install may be a path hook)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    errors = [match for line in result.stdout.splitlines() if (match := _ERROR.match(line))]
    assert result.returncode in (0, 1) and all(Path(e["path"]).name == CLIENT.name for e in errors), output
    found = {(int(e["line"]), e["code"]) for e in errors}
    assert _expected(), "the client marks no misuse: the check could not fail"
    assert found == _expected(), output
