"""The README's agent example ("### Agents you already run") runs as written, and the agent learns: its
python block is written to my_agent.py and its command trains the tiny model inside that agent through
the gateway (vLLM, asynchronous), raising held-out accuracy by at least 10 points (issue 31's target is
10 points within 150 steps; the command runs 20)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from tests.conftest import require
from tests.test_readme_commands import outputs, readme_command, run_here

README = Path(__file__).resolve().parents[1] / "README.md"
HEADING = "### Agents you already run"
# Held-out accuracy is measured on the same 400 tasks with the same sampling seeds before and after
# (tests/trainers/test_learning.py derives the noise): the rise's standard deviation is at most 3.5
# points. Measured: 0.155 -> 0.328, +17.2 points (2026-11-27, AMD EPYC, loaded), so the target of 10
# is 2 standard deviations below the measured rise at that loose bound (about 3 at a flip rate of a
# quarter of the tasks, which the two accuracies imply).
TARGET = 10.0


def agent_example() -> str:
    text = README.read_text(encoding="utf-8")
    assert text.count(f"\n{HEADING}\n") == 1, f"the README has no single {HEADING!r} section"
    section = re.split(r"\n#{2,3} ", text.split(f"\n{HEADING}\n", 1)[1], maxsplit=1)[0]
    (block,) = [b for b in re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M) if "# my_agent.py" in b]
    assert len(block.strip().splitlines()) < 20, "the example agent should stay under 20 lines"
    return block


@pytest.mark.slow
@pytest.mark.vllm
def test_the_readme_agent_trains_as_written_and_learns(tmp_path, capsys, monkeypatch):
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    (tmp_path / "my_agent.py").write_text(agent_example(), encoding="utf-8")
    command = readme_command("python -m rlvr train --env rlvr/Agent-v0")
    run_here(command, tmp_path, capsys, monkeypatch)
    metrics, evals = outputs(tmp_path, command)
    before, after = evals[0]["accuracy"], evals[-1]["accuracy"]
    assert 100 * (after - before) >= TARGET, f"held-out accuracy {before:.3f} -> {after:.3f}"
    assert len(metrics) == 20 and sum(m["errors"] for m in metrics) == 0
    # asynchronous: the gateway served the version the sampler held, and every token recorded it
    assert all(m["staleness_max"] <= 1 for m in metrics) and any(m["staleness_1_frac"] > 0 for m in metrics)
    # every agent run made its two calls, a planner's and a solver's: two segments, counted once
    assert all(m["episodes"] == 16 * 8 for m in metrics)
    samples = [json.loads(x) for x in (tmp_path / "runs" / "agent" / "samples.jsonl").read_text().splitlines()]
    assert samples and {"best", "worst"} <= {s["rank"] for s in samples}
