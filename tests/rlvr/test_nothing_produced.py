"""A run that produces nothing stops and says why, through the real `rlvr` CLI (`rlvr.cli.main`, in this process:
the subject is the run's exit code and its lines, not the process, and a subprocess would pay the imports again):
an environment whose `respond` still returns the older 4-tuple fails every episode with a
TypeError naming `TurnResult`; `rlvr train` stops after `max_error_steps` such steps in a row and
`rlvr eval` after its first chunk, each with one line naming the error, exit 2. A shorter outage
(a grader down for one step) is survived with one warning."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import rlvr_here

# run_test_envs lives in tests/, which tests/conftest.py puts on sys.path
OLD_API = "run_test_envs:test/OldApiGuessNumber-v0"
SMALL = ["--max-tokens", "4", "--sampler", "hf", "--no-progress"]
TRAIN = ["train", "--tasks-per-step", "2", "--group-size", "2", "--warmup-steps", "0", "--log-every", "0", *SMALL]


def error_line(done: subprocess.CompletedProcess, command: str) -> str:
    """The run's one error line: the last on stderr (a run's start prints its plan before)."""
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert sum("error:" in line for line in lines) == 1, lines
    assert lines[-1].startswith(f"rlvr {command}: error: "), lines
    return lines[-1]


def test_train_on_the_old_api_stops_after_max_error_steps(tmp_path, capsys):
    done = rlvr_here(capsys, *TRAIN, "--env", OLD_API, "--steps", "20", "--out", tmp_path / "run")
    line = error_line(done, "train")
    assert "every episode was an error for 5 steps in a row (steps 1-5" in line
    assert "TypeError" in line and "TurnResult" in line and "at step 1" in line
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3, 4, 5] and all(m["skipped"] for m in metrics)


def test_train_max_error_steps_is_a_setting(tmp_path, capsys):
    done = rlvr_here(
        capsys, *TRAIN, "--env", OLD_API, "--steps", "20", "--max-error-steps", "2", "--out", tmp_path / "run"
    )
    assert "for 2 steps in a row (steps 1-2" in error_line(done, "train")


def test_train_survives_a_short_outage_with_one_warning(tmp_path, capsys):
    # the grader is down for the first 4 verifications: step 1's 2 tasks x 2 samples
    done = rlvr_here(
        capsys,
        *TRAIN,
        "--env",
        "run_test_envs:test/GraderOutage-v0",
        "--env-arg",
        "outage=4",
        "--env-arg",
        f"key={tmp_path.name}",  # the count of verifications is per process: this run's own
        "--steps",
        "3",
        "--out",
        tmp_path / "run",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: every episode")]
    assert len(warnings) == 1, done.stderr
    assert "of step 1 was an error: 1 step(s) skipped" in warnings[0] and "the grader is down" in warnings[0]
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    # skipped for its errors: step 1 only (a step without reward variance is skipped too: trainers.zero_signal)
    assert [int(m.get("skipped", 0) and not m["zero_signal"]) for m in metrics] == [1, 0, 0]


def test_train_stops_when_the_evaluation_before_training_is_all_errors(tmp_path, capsys):
    done = rlvr_here(capsys, *TRAIN, "--env", OLD_API, "--steps", "20", "--eval-tasks", "2", "--out", tmp_path / "run")
    line = error_line(done, "train")
    assert "held-out evaluation at step 0: every one of its 2 episodes was an error" in line and "TurnResult" in line


def test_eval_on_the_old_api_stops_with_the_first_error(tmp_path, capsys):
    done = rlvr_here(
        capsys, "eval", "--env", OLD_API, "--tasks", "4", "--chunk", "2", *SMALL, "--out", tmp_path / "run"
    )
    line = error_line(done, "eval")
    assert "every one of the 2 episodes sampled was an error" in line and "TurnResult" in line
    assert not (tmp_path / "run" / "summary.json").exists()
