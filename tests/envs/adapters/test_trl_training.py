"""TRL's own `GRPOTrainer` (trl from the dev extras) trains on an rlvr environment through the adapter: the
README's example ("Use rlvr from other trainers"), run as written in a fresh interpreter in an empty folder,
takes two GRPO steps of the tiny model on rlvr/Arithmetic-v0 on the CPU, offline, and the reward function
was called on every completion and gave the environment's typed rewards."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[3] / "README.md"
HEADING = "## Use rlvr from other trainers"
# Appended to the example: what the test reads back (the example's own objects, after it ran).
REPORT = """
import json as _json
_json.dump({"steps": trainer.state.global_step, "columns": dataset.column_names,
            "scores": [[s.reward, str(s.outcome)] for s in reward.last],
            "outcomes": {str(k): v for k, v in reward.outcomes.items()}}, open("report.json", "w"))
"""


def example() -> str:
    text = README.read_text(encoding="utf-8")
    assert text.count(f"\n{HEADING}\n") == 1, f"the README has no single {HEADING!r} section"
    section = re.split(r"\n## ", text.split(f"\n{HEADING}\n", 1)[1], maxsplit=1)[0]
    blocks = [b for b in re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M) if "GRPOTrainer" in b]
    assert len(blocks) == 1, f"the {HEADING!r} section should hold exactly one python block training with TRL"
    return blocks[0]


def test_the_readme_example_is_under_15_lines():
    assert len(example().strip().splitlines()) < 15


def test_trls_grpo_trainer_trains_two_steps_with_the_environments_reward(tmp_path):
    pytest.importorskip("trl")  # the dev extras
    script = tmp_path / "trl_example.py"
    script.write_text(example() + REPORT, encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["steps"] == 2 and report["columns"] == ["prompt", "rlvr_task"]
    # each step generates 8 completions (TRL's default: one prompt x 8), each scored by Arithmetic's verifier
    assert sum(report["outcomes"].values()) == 16, report
    assert set(report["outcomes"]) <= {"correct", "incorrect", "format_error", "truncated"}, report
    assert len(report["scores"]) == 8
    for value, outcome in report["scores"]:
        assert value == (1.0 if outcome == "correct" else 0.0), report
    summary = re.search(r"^16 completions scored: .+$", done.stdout, re.M)
    assert summary, done.stdout[-2000:]
    print(f"{summary.group(0)}; {seconds:.1f} s")  # the wall time, with -s
