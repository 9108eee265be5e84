"""trainers/peak_memory.py: the process tree's peak resident set is the kernel's high-water marks of
this process and of its live descendants (a spike already gone still counts), and the line
`rlvr train` ends with. A run's `memory_peak_gib` in metrics.jsonl and its closing line are checked
through the real CLI in tests/rlvr/test_screen_numbers.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from rlvr.trainers.peak_memory import GIB, descendants, high_water_bytes, memory_line, memory_metrics, tree_peak_bytes

MiB = 2**20


def test_a_spike_that_is_gone_still_counts():
    before = high_water_bytes()
    spike = bytearray(300 * MiB)  # zero-filled by Python: every page written, so resident
    spike = None  # noqa: F841 - freed: the resident set drops, its high-water mark stays
    assert high_water_bytes() >= 300 * MiB and high_water_bytes() >= before
    assert tree_peak_bytes() >= high_water_bytes()


def test_a_live_childs_peak_is_added():
    holder = "import sys, time; b = bytearray(200 * 2**20); print('held', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        assert child.pid in descendants(os.getpid())
        child_peak = high_water_bytes(child.pid)
        assert child_peak >= 200 * MiB
        own = high_water_bytes()
        assert tree_peak_bytes() >= own + child_peak - 16 * MiB  # the child's mark, beside this process's own
    finally:
        child.kill()
        child.wait()
    time.sleep(0.1)
    assert child.pid not in descendants(os.getpid())  # an exited child no longer counts


def test_metrics_and_the_closing_line():
    metrics = memory_metrics()  # no device: the CPU's numbers only
    assert set(metrics) == {"memory_peak_gib"} and metrics["memory_peak_gib"] > 0.01
    assert memory_line({"memory_peak_gib": 9.75}) == "peak memory: 9.75 GiB resident (process tree)"
    both = {"memory_peak_gib": 12.0, "cuda_max_allocated_gib": 30 * MiB / GIB * 1024}
    assert memory_line(both) == "peak memory: 12.00 GiB resident (process tree), 30.00 GiB CUDA max allocated"
    assert memory_line({}) is None
