"""Run a command in a child process and measure its peak memory.

Two measures, the larger is reported. `ru_maxrss` from `wait4`: the kernel's exact high-water
mark of the resident set of the child, or of a descendant it waited for if that was larger, but
of one process at a time, never of several alive together (the trainer plus a vLLM engine core
or a verifier's worker processes). And the largest total seen by polling the process tree: the
child's resident set plus each descendant's unique set size (USS), a descendant counted once it
is `SETTLE_SECONDS` old. Unique, not resident, so that libraries shared with the parent are not
counted twice; and not while newborn, because between fork and exec a child maps all of its
parent's memory. Polling may miss a short spike; `ru_maxrss` does not.

The allocator decides much of a CPU process's peak. glibc's malloc raises its mmap threshold each
time a large block is freed (up to 32 MiB): after the first backward pass, activations come from
the heap, whose freed holes the process keeps and fragments. Measured on the ~30M model
(benchmarks/README.md), that added 0.6-1.6 GiB to a training run's peak, more with LoRA's many
small tensors than without, enough to reverse LoRA's saving. `allocator_env(..., "fixed")` pins the
threshold (`MALLOC_MMAP_THRESHOLD_`, which also stops the adjustment), so that a comparison of
training options measures their tensors; "glibc" leaves glibc's default.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

import psutil

SETTLE_SECONDS = 1.0
MALLOC_CHOICES = ("fixed", "glibc")
FIXED_MMAP_THRESHOLD = 128 * 1024  # glibc's initial threshold, kept


def allocator_env(env: dict[str, str], malloc: str) -> dict[str, str]:
    """`env` for a measured child: with "fixed", large blocks go back to the kernel when freed."""
    if malloc not in MALLOC_CHOICES:
        raise ValueError(f"malloc must be one of {MALLOC_CHOICES}, got {malloc!r}")
    if malloc == "glibc":
        return {k: v for k, v in env.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    return {**env, "MALLOC_MMAP_THRESHOLD_": str(FIXED_MMAP_THRESHOLD)}


@dataclass(frozen=True)
class Measured:
    returncode: int
    seconds: float
    peak_rss_bytes: int  # max(tree_peak_bytes, maxrss_bytes)
    tree_peak_bytes: int
    maxrss_bytes: int


def _tree_memory(root: psutil.Process) -> int:
    """The root's resident set plus its descendants' unique set sizes, in bytes."""
    try:
        total = root.memory_info().rss
        children = root.children(recursive=True)
    except psutil.Error:
        return 0
    now = time.time()
    for child in children:
        try:
            if now - child.create_time() >= SETTLE_SECONDS:
                total += child.memory_full_info().uss
        except psutil.Error:  # exited between listing and reading
            pass
    return total


def run_measured(
    cmd: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    poll_seconds: float = 0.05,
    timeout: float | None = None,
    output: IO | None = None,
) -> Measured:
    """Run `cmd` to completion (its output goes to ours, or to the file `output`) and return its peak memory."""
    started = time.perf_counter()
    proc = subprocess.Popen(list(cmd), env=env, cwd=cwd, stdout=output, stderr=output)
    peak = [0]
    done = threading.Event()

    def poll() -> None:
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            return
        while not done.is_set():
            peak[0] = max(peak[0], _tree_memory(root))
            done.wait(poll_seconds)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        returncode, maxrss_kib = _wait(proc, timeout)
    finally:
        done.set()
        poller.join()
    maxrss = maxrss_kib * 1024  # Linux reports ru_maxrss in KiB
    return Measured(returncode, time.perf_counter() - started, max(peak[0], maxrss), peak[0], maxrss)


def _wait(proc: subprocess.Popen, timeout: float | None) -> tuple[int, int]:
    """`wait4` for the child's exit status and its own rusage; kill it (and its group) on timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_maxrss
        if deadline is not None and time.monotonic() > deadline:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            deadline = None  # the next wait4 reaps it
        time.sleep(0.05)
