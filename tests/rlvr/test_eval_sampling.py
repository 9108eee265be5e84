"""`rlvr eval`'s default sampling follows the samples asked for (rlvr/envs/eval_sampling.py): greedy
for pass@1 from one sample per task, temperature 1.0 when several are asked (pass@k needs samples
that differ); a --temperature given is kept; the table names the sampling that produced the score,
and so does the Python API's `evaluate`. Through the real command (tiny model, HF sampler)."""

from __future__ import annotations

import json
import re

import pytest

from rlvr.envs.eval_sampling import default_temperature, describe
from tests.conftest import rlvr_here

SHORT = ["--sampler", "hf", "--tasks", "2", "--max-tokens", "4", "--no-progress"]


def test_the_rule_and_its_words():
    assert default_temperature(1) == 0.0 and default_temperature(2) == default_temperature(8) == 1.0
    assert describe({"temperature": 0.0, "top_p": 0.9, "max_tokens": 32}) == "greedy, up to 32 tokens"
    assert describe({"temperature": 0.7, "top_p": 1.0}) == "temperature 0.7, top_p 1.0"


@pytest.mark.parametrize(
    ("flags", "temperature", "words"),
    [
        ([], 0.0, "greedy, up to 4 tokens"),  # --k 1: one sample per task
        (["--k", "1,2"], 1.0, "temperature 1.0, top_p 1.0, up to 4 tokens"),
        (["--samples", "3"], 1.0, "temperature 1.0, top_p 1.0, up to 4 tokens"),
        (["--temperature", "0.5"], 0.5, "temperature 0.5, top_p 1.0, up to 4 tokens"),  # asked: kept
    ],
)
def test_eval_names_the_sampling_that_produced_the_score(tmp_path, capsys, flags, temperature, words):
    done = rlvr_here(capsys, "eval", *SHORT, *flags, "--out", tmp_path / "eval")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["sampling"]["temperature"] == temperature
    assert re.search(rf"^sampling\s+{re.escape(words)}$", done.stdout, re.M), done.stdout
    rows = [line.split()[0] for line in done.stdout.splitlines() if line and not line.startswith(("results", "--"))]
    assert rows.index("sampling") < rows.index("pass@1")  # named before the score it produced


def test_a_greedy_rerun_keeps_its_episodes(tmp_path, capsys):
    """The chosen temperature is the run's (run.json): the same command continues it, not refused."""
    out = tmp_path / "eval"
    assert rlvr_here(capsys, "eval", *SHORT, "--out", out).returncode == 0
    again = rlvr_here(capsys, "eval", *SHORT, "--out", out)
    assert again.returncode == 0 and "this evaluation is complete" in again.stdout, again.stderr[-2000:]


def test_help_says_the_default(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    from rlvr.cli import main

    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.strip().startswith("--temperature"))
    line = " ".join(lines[at : at + 2])  # the option on one line, its description on the next
    assert "0 (greedy) with one sample per task" in line and "else 1.0" in line and "(default: none)" in line


def test_the_api_chooses_as_the_command(tmp_path):
    from rlvr.trainers import evaluate

    greedy = evaluate("tiny", "rlvr/Arithmetic-v0", tasks=2, max_tokens=4)
    assert greedy.summary["sampling"]["temperature"] == 0.0 and "sampling          greedy" in str(greedy)
    sampled = evaluate("tiny", "rlvr/Arithmetic-v0", tasks=2, k=[1, 2], max_tokens=4)
    assert sampled.summary["sampling"]["temperature"] == 1.0
