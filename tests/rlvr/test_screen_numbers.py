"""Every number `rlvr train` shows means what the README says (issue 43, item 4 and 6): the progress
line's `gap mean` is the quantity the weight-sync bound is on (the mean over the current version's
tokens), never the max; `kl` is k3's mean, which cannot go below 0, whatever estimator the loss or
reward uses (rloo's is k1); a step without signal records `optimizer_steps: 0` and the run's closing
lines count the optimizer steps taken; the peak memory is in every step's metrics and in one line at
the end. Through the real command, in this process (tiny model, HF sampler)."""

from __future__ import annotations

import json
import re

from rlvr.trainers.metrics import progress_line
from tests.conftest import rlvr_here, train_device


def test_the_progress_line_shows_the_bounded_mean_labelled_not_the_max():
    # an agent run at --max-staleness 1: stale tokens make the max large; the bound is on the mean of the rest
    line = progress_line({"reward_mean": 0.5, "kl": 0.0012, "logprob_gap_max": 0.91, "sync_gap_mean": 3.1e-5})
    assert line == "reward 0.500 | kl 0.0012 | gap mean 3.1e-05"


def test_a_run_shows_what_its_steps_did(tmp_path, capsys):
    out = tmp_path / "run"
    # rloo: k1 KL in the reward. The first step's 16 verifications are flat (no signal, no optimizer step);
    # then an answer of odd length scores 1 (tests/run_test_envs.py): signal, at a temperature that varies lengths
    env = ["--env", "run_test_envs:test/FlatThenLearnable-v0", "--env-arg", "flat=16", "--env-arg", "key=screen"]
    argv = ["train", "--algo", "rloo", *env, "--steps", "3", "--tasks-per-step", "2", "--group-size", "8"]
    argv += ["--max-tokens", "24", "--temperature", "1.5", "--eval-tasks", "0", "--sampler", "hf"]
    argv += ["--warmup-steps", "0", "--lr", "1e-3", "--device", train_device()]
    argv += ["--threads", "1", "--no-progress", "--log-every", "1", "--out", out]
    done = rlvr_here(capsys, *argv)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["zero_signal"], r["optimizer_steps"]) for r in records] == [(1, 1, 0), (2, 0, 1), (3, 0, 1)]
    assert all(0 <= r["kl"] and r["sync_gap_mean"] < 1e-3 and r["sync_gap_tokens"] > 0 for r in records), records
    assert all(r["memory_peak_gib"] > 0.05 for r in records)
    shown = re.findall(r"^step (\d)/3 \| .*\| kl (\S+) \|.*\| gap mean (\S+) \|", done.stderr, re.M)
    assert [s for s, _, _ in shown] == ["1", "2", "3"], done.stderr
    for (_, kl, gap), r in zip(shown, records):
        assert float(kl) >= 0 and gap == f"{r['sync_gap_mean']:.1e}", (kl, gap, r)
    assert "1 of 3 steps took no optimizer step (2 optimizer steps in all)" in done.stdout, done.stdout
    peak = max(r["memory_peak_gib"] for r in records)
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("peak memory: ")]
    assert re.fullmatch(r"peak memory: \d+\.\d\d GiB resident \(process tree\)", line)
    assert float(line.split()[2]) >= round(peak, 2) - 0.01  # the end's peak: the steps' and the evaluations'
