"""benchmarks/trl_compare.py's settings and verdicts: both sides follow one device, and on a GPU the
verdict compares CUDA peaks against the GPU target (1.5x), on the CPU resident sets against 2x."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _trl_compare_common import Settings  # noqa: E402
from _trl_compare_report import CUDA_SPEEDUP_TARGET, SPEEDUP_TARGET, table, verdicts  # noqa: E402

MiB = 2**20


def side(seconds: float, rss_mib: float, cuda_mib: float | None = None) -> dict:
    out = {
        "step_seconds": [9.0, seconds, seconds],
        "step_cpu_seconds": [1.0, 1.0, 1.0],
        "peak_rss_bytes": rss_mib * MiB,
        "train_rewards": [0.1, 0.2, 0.3],
    }
    if cuda_mib is not None:
        out["cuda_peak_bytes"] = cuda_mib * MiB
    return out


def test_settings_follow_the_device():
    assert not Settings(model="m", device="cpu").on_cuda
    assert Settings(model="m").on_cuda == torch.cuda.is_available()  # auto
    assert Settings(model="m", device="cuda").on_cuda
    for bad in ({"device": "gpu"}, {"dtype": "float16"}):
        with pytest.raises(ValueError, match="device must be|dtype must be"):
            Settings(model="m", **bad)


def test_on_the_cpu_resident_sets_and_2x():
    v = verdicts(side(4.0, 800), side(2.0, 400), None)
    assert v["speedup_target"] == SPEEDUP_TARGET == 2.0 and v["faster"] and v["speedup"] == 2.0
    assert v["memory_measure"] == "peak_rss_bytes" and v["memory_ratio"] == 0.5 and v["leaner"]
    assert "CUDA" not in table(side(4.0, 800), side(2.0, 400), {}, None)


def test_on_a_gpu_cuda_peaks_and_1_5x():
    """rlvr 1.6x faster, less CUDA memory but more host memory: the GPU verdicts pass."""
    trl, rlvr = side(8.0, 3000, cuda_mib=20_000), side(5.0, 4000, cuda_mib=10_000)
    v = verdicts(trl, rlvr, None)
    assert v["speedup_target"] == CUDA_SPEEDUP_TARGET == 1.5 and v["faster"] and v["speedup"] == 1.6
    assert v["memory_measure"] == "cuda_peak_bytes" and v["memory_ratio"] == 0.5 and v["leaner"]
    text = table(trl, rlvr, {}, None)
    cuda_row = next(line for line in text.splitlines() if line.startswith("peak CUDA memory (MiB)"))
    assert "20,000" in cuda_row and "10,000" in cuda_row and "0.50x" in cuda_row and "PASS" in cuda_row
    assert ">= 1.5x: PASS" in text
