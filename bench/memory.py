"""Resident-memory probes shared by the benchmarks (Linux /proc): the current and peak RSS of this process, a reset of
the peak, and a thread sampling RSS as a cross-check where the kernel cannot reset the peak.

    reset = reset_peak()                     # False where /proc/self/clear_refs is not writable
    before = rss_status()["VmRSS"]
    run_the_thing()
    peak_extra = rss_status()["VmHWM"] - before
"""
from __future__ import annotations

import os
import threading
import time

KEYS = ("VmRSS", "VmHWM")


def rss_status(keys: tuple[str, ...] = KEYS) -> dict[str, int]:
    """The named lines of /proc/self/status, in bytes (VmRSS: resident now, VmHWM: resident high-water mark)."""
    values = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            if key in keys:
                values[key] = int(rest.split()[0]) * 1024
    missing = set(keys) - set(values)
    if missing:
        raise KeyError(f"/proc/self/status has no {', '.join(sorted(missing))}")
    return values


def reset_peak() -> bool:
    """Reset VmHWM to the current VmRSS (`echo 5 > /proc/self/clear_refs`); False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


class RssSampler(threading.Thread):
    """The largest VmRSS seen, sampled every `interval` seconds: start(), run the work, then stop() -> bytes."""

    def __init__(self, interval: float = 0.002):
        super().__init__(daemon=True)
        self.interval, self.peak, self.running = interval, 0, True
        self.pagesize = os.sysconf("SC_PAGE_SIZE")

    def run(self) -> None:
        with open("/proc/self/statm") as handle:
            while self.running:
                handle.seek(0)
                self.peak = max(self.peak, int(handle.read().split()[1]) * self.pagesize)
                time.sleep(self.interval)

    def stop(self) -> int:
        self.running = False
        self.join()
        return self.peak
