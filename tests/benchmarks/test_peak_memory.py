"""benchmarks/_peak_memory.py, the memory benchmarks' measure: a child's peak is seen, and the
allocator setting that makes peaks measure tensors rather than glibc's retained heap."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _peak_memory import FIXED_MMAP_THRESHOLD, allocator_env, run_measured  # noqa: E402

MiB = 2**20


def test_a_childs_peak_is_measured():
    """The polled resident set of the running child (`ru_maxrss` would also count the pages the
    child shared with this big pytest process between fork and exec)."""
    held = "import time; b = b'x' * (300 * 2**20); time.sleep(0.5)"  # written: every page is resident
    m = run_measured([sys.executable, "-c", held])
    assert m.returncode == 0 and m.tree_peak_bytes >= 300 * MiB and m.peak_rss_bytes >= m.tree_peak_bytes
    assert run_measured([sys.executable, "-c", "import time; time.sleep(0.5)"]).tree_peak_bytes < 100 * MiB


def test_allocator_env_pins_or_leaves_glibcs_threshold():
    env = {"PATH": os.environ.get("PATH", ""), "MALLOC_MMAP_THRESHOLD_": "1"}
    assert allocator_env(env, "fixed")["MALLOC_MMAP_THRESHOLD_"] == str(FIXED_MMAP_THRESHOLD)
    assert "MALLOC_MMAP_THRESHOLD_" not in allocator_env(env, "glibc")
    assert env["MALLOC_MMAP_THRESHOLD_"] == "1"  # the caller's mapping is not changed
    with pytest.raises(ValueError, match="malloc"):
        allocator_env(env, "jemalloc")
