"""benchmarks/gpu_table.py: its CPU smoke mode trains real rows of the table (tiny model, 2 steps),
and a row's numbers are the medians after the warm-up step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import gpu_table  # noqa: E402


def test_the_cpu_smoke_run_trains_the_rows_it_is_given(tmp_path, capsys):
    argv = ["--model", "tiny", "--steps", "2", "--tasks-per-step", "2", "--group-size", "4", "--max-tokens", "6"]
    argv += ["--device", "cpu", "--threads", "1", "--in-process", "--only", "bf16+lora16"]
    assert gpu_table.main([*argv, "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert [r["name"] for r in rows] == ["bf16+lora16"]  # one row: a few seconds; the GPU check runs them all
    for r in rows:
        assert len(r["steps"]) == 2 and r["device"] == "cpu"
        assert all(s["time_sampling"] > 0 for s in r["steps"])
        # a step without reward variance takes no update (trainers.zero_signal): at least one trained
        assert any(s.get("time_training", 0) > 0 for s in r["steps"]), r["steps"]
        assert all("mfu" not in s for s in r["steps"])  # CPU: no MFU (trainers.flops)
    assert 0 < rows[0]["trainable"] < rows[0]["parameters"] / 4  # LoRA trains the adapter only
    out = capsys.readouterr().out
    assert "| setting | peak GiB |" in out and "| bf16+lora16 | - |" in out
    assert (tmp_path / "table.md").read_text().strip() in out


def test_a_rows_numbers_are_medians_after_the_warmup():
    steps = [
        {"time_sampling": 9.0, "time_training": 9.0, "time_step": 20.0, "tokens_generated": 100, "mfu": 0.5},
        {"time_sampling": 2.0, "time_training": 1.0, "time_step": 4.0, "tokens_generated": 1000, "mfu": 0.1},
        {"time_sampling": 4.0, "time_training": 3.0, "time_step": 8.0, "tokens_generated": 1000, "mfu": 0.2},
    ]
    s = gpu_table.summary({"name": "x", "steps": steps, "cuda_peak_bytes": 3 * 2**30})
    assert (s["sampling_s"], s["training_s"], s["mfu"]) == (3.0, 2.0, 0.15000000000000002)
    assert s["sample_tok_s"] == 1000 / 3.0 and s["step_tok_s"] == 1000 / 6.0
    assert s["peak_gib"] == 3.0 and s["peak_kind"] == "cuda"
    assert "| x | 3.00 | 3.00 | 2.00 | 333 | 167 | 15.0% | - |" in gpu_table.table(
        [{"name": "x", "steps": steps, "cuda_peak_bytes": 3 * 2**30}]
    )


def test_bad_settings_are_one_line(capsys):
    assert gpu_table.main(["--only", "fp64"]) == 2
    assert capsys.readouterr().err.startswith("gpu_table: error: need --steps >= 1")
