"""A run's peak memory, as it goes: every step's `memory_peak_gib` in metrics.jsonl, and one line at
the end of `rlvr train`.

- `memory_peak_gib`: the process tree's peak resident set so far. The kernel keeps each process's
  high-water mark (`VmHWM` in /proc/PID/status), exact however short the spike (a backward pass,
  a log-softmax over the vocabulary); this process's (the trainer, with the vLLM engine in it) plus
  that of each live descendant (the math grader's workers, a Ray worker started here). Summed peaks
  of different moments: an upper bound on the tree's peak at one moment, never below it. The workers
  are started with exec, so their marks do not count the trainer's pages twice.
- `cuda_max_allocated_gib` (CUDA only): `torch.cuda.max_memory_allocated`, the peak of the tensors
  torch's allocator held on the training GPU (vLLM's weights and KV cache included when it runs in
  this process on that GPU); what `nvidia-smi` shows is higher by the allocator's cache.

Linux only (/proc); elsewhere `memory_peak_gib` is left out rather than guessed.
"""

from __future__ import annotations

import os
from pathlib import Path

GIB = 2**30


def high_water_bytes(pid: int | str = "self") -> int | None:
    """A process's peak resident set (`VmHWM`), in bytes; None when it is gone or there is no /proc."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024  # the kernel writes kB
    return None


def descendants(pid: int) -> list[int]:
    """The live descendants of `pid` (from each of its threads' `children` lists, Linux >= 3.5)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                children = Path(f"/proc/{parent}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.append(child)
                    todo.append(child)
    return found


def tree_peak_bytes() -> int | None:
    """This process's peak resident set plus each live descendant's (the module's docstring)."""
    own = high_water_bytes()
    if own is None:
        return None
    return own + sum(high_water_bytes(pid) or 0 for pid in descendants(os.getpid()))


def memory_metrics(device=None) -> dict[str, float]:
    """The step's memory metrics: `memory_peak_gib`, and on a CUDA `device` `cuda_max_allocated_gib`."""
    metrics: dict[str, float] = {}
    tree = tree_peak_bytes()
    if tree is not None:
        metrics["memory_peak_gib"] = tree / GIB
    if device is not None and getattr(device, "type", None) == "cuda":
        import torch

        metrics["cuda_max_allocated_gib"] = torch.cuda.max_memory_allocated(device) / GIB
    return metrics


def memory_line(metrics: dict[str, float]) -> str | None:
    """The line `rlvr train` ends with (None when nothing was measured)."""
    parts = []
    if "memory_peak_gib" in metrics:
        parts.append(f"{metrics['memory_peak_gib']:.2f} GiB resident (process tree)")
    if "cuda_max_allocated_gib" in metrics:
        parts.append(f"{metrics['cuda_max_allocated_gib']:.2f} GiB CUDA max allocated")
    return "peak memory: " + ", ".join(parts) if parts else None
