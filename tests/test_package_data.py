"""Every data file the package reads at run time (fragment libraries, the demo model) is named by a package-data
pattern in pyproject.toml, so that a wheel holds it, not only a source checkout."""
from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

ROOT = Path(__file__).resolve().parents[1]


def test_every_data_file_is_packaged():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["nnef_torch"]
    package = ROOT / "nnef_torch"
    data = [path.relative_to(package).as_posix() for path in package.rglob("*")
            if path.is_file() and (path.suffix in (".nnef", ".dat", ".quant", ".json", ".js", ".css")
                                   or path.name == "LICENSE")]
    assert data, "no data files found"
    missing = [name for name in data if not any(fnmatch.fnmatch(name, pattern) and name.count("/") ==
                                                pattern.count("/") for pattern in patterns)]
    assert not missing, f"not in package-data: {missing}"
