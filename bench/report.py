"""The summary table of bench/run.py and its results files: what ran where (date, machine, versions, command line)
and one markdown table, rows = model x metric, columns = ours, native torch and the anchors.

Each cell other than `ours` reads `time (ratio)` with ratio = that column's time / ours: above 1, ours is faster.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata

COLUMNS = ("ours", "native", "khronos", "tract", "t2n", "onnx+nt")
HEADERS = {"ours": "ours", "native": "native torch", "khronos": "Khronos interp.", "tract": "tract",
           "t2n": "t2n", "onnx+nt": "onnx+nt"}
METRICS = ("load", "forward b1", "train step", "export")
LOAD_FAILED = "load failed"  # a forward cell of a runtime that could not load the model
PACKAGES = ("torch", "nnef-torch", "nnef", "nnef_tools", "tract", "torch_to_nnef", "onnx")


@dataclass
class Row:
    """One model x metric: seconds per column that ran, the reason for each column that failed."""

    model: str
    metric: str
    seconds: dict[str, float] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    flagged: dict[str, str] = field(default_factory=dict)  # ran, but its result is wrong or unreadable: marked †
    note: str = ""


@dataclass
class Run:
    """Everything a results file holds."""

    started: str
    command: str
    machine: dict[str, str]
    versions: dict[str, str]
    settings: dict[str, object]
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    finished: str = ""
    load_end: str = ""
    columns: dict[str, str] | None = None  # column -> header, in order; default HEADERS (bench/run.py's)
    legend: str = ""  # what the ratios mean; default RATIO_LEGEND


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def versions(repo: str) -> dict[str, str]:
    found = {"python": sys.version.split()[0]}
    found.update({package: version(package) for package in PACKAGES})
    commit = _git(repo, "rev-parse", "--short", "HEAD")
    if commit:
        dirty = _git(repo, "status", "--porcelain", "--untracked-files=no")
        found["nnef-torch"] += f" (git {commit}{', modified' if dirty else ''})"
    return found


def _git(repo: str, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def load_average() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "?"


def busy_warning() -> str:
    """A warning when the last minute's load average exceeds half the cores: other work shared the CPU."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return ""
    cores = os.cpu_count() or 1
    if load <= 0.5 * cores:
        return ""
    return (f"WARNING: load average {load:.1f} on {cores} cores at the end of the run: other processes shared the "
            "CPU, timings are noisy (compare ratios, rerun on a quiet machine)")


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cores": str(os.cpu_count()), "system": f"{platform.system()} {platform.release()}",
            "load average at start (1, 5, 15 min)": load_average()}


def now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def _duration(seconds: float) -> str:
    if seconds >= 10:
        return f"{seconds:.1f} s"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    ms = seconds * 1e3
    return f"{ms:.3g} ms" if ms >= 0.1 else f"{ms * 1e3:.3g} us"


def _cell(row: Row, column: str) -> str:
    if column in row.failures:
        return "fails"
    if column not in row.seconds:
        return ""
    text = _duration(row.seconds[column])
    ours = row.seconds.get("ours")
    if column != "ours" and ours:
        text += f" ({row.seconds[column] / ours:.2f}x)"
    return text + (" †" if column in row.flagged else "")


def table(rows: list[Row], columns: dict[str, str] | None = None) -> str:
    """The markdown table; ratios = column / ours (> 1: ours is faster). `columns`: column -> header, in order
    (default: bench/run.py's, HEADERS)."""
    columns = columns or HEADERS
    lines = ["| model | metric | " + " | ".join(columns.values()) + " |",
             "|---|---|" + "---:|" * len(columns)]
    for row in rows:
        lines.append(f"| {row.model} | {row.metric} | " + " | ".join(_cell(row, c) for c in columns) + " |")
    return "\n".join(lines)


def failures(rows: list[Row], columns: dict[str, str] | None = None) -> list[str]:
    """A line per failed cell (`fails`) and per flagged cell (†)."""
    columns = columns or HEADERS
    failed = [f"{row.model} {row.metric}, {columns.get(column, column)}: {reason}" for row in rows
              for column, reason in row.failures.items() if reason != LOAD_FAILED]
    return failed + [f"† {row.model} {row.metric}, {columns.get(column, column)}: {reason}" for row in rows
                     for column, reason in row.flagged.items()]


RATIO_LEGEND = ("times are medians; (x) = that column's time / ours, so > 1 means ours is faster "
                "(native torch: the hand-written twin, or torch.export for load/export)")


def markdown(run: Run) -> str:
    lines = [f"# Benchmark results, {run.started}", "",
             f"Command: `{run.command}`", "",
             "## Machine", ""]
    lines += [f"- {key}: {value}" for key, value in run.machine.items()]
    lines += [f"- load average at end: {run.load_end}", f"- finished: {run.finished}", "", "## Versions", ""]
    lines += [f"- {key}: {value}" for key, value in run.versions.items()]
    lines += ["", "## Settings", ""]
    lines += [f"- {key}: {value}" for key, value in run.settings.items()]
    lines += ["", "## Results", "", (run.legend or RATIO_LEGEND) + ".", "", table(run.rows, run.columns), ""]
    failed = failures(run.rows, run.columns)
    if failed:
        lines += ["Cells that say `fails` or carry †:", ""] + [f"- {text}" for text in failed] + [""]
    if run.notes:
        lines += ["## Notes", ""] + [f"- {text}" for text in run.notes] + [""]
    return "\n".join(lines)


def write(run: Run, path: str) -> tuple[str, str]:
    """Write `path` (markdown) and the same data as JSON next to it; return both paths."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(markdown(run))
    json_path = os.path.splitext(path)[0] + ".json"
    with open(json_path, "w", encoding="utf-8") as handle:
        json.dump(asdict(run), handle, indent=1)
        handle.write("\n")
    return path, json_path
