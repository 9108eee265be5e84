"""One `--out`, one run (rlvr/run_lock.py), with real processes: a second `rlvr train` or `rlvr eval`
on the --out of a running `rlvr train` (a process of its own) ends in one line naming the holder, exit 2;
Ctrl-C releases the lock; a lock file left by a dead process is taken over. The second runs, and the
one that takes over, are `rlvr.cli.main` in this process (another process than the holder all the
same): their subject is the lock, and a subprocess would pay the imports again."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlvr.run_lock import LOCK_NAME, OutInUse, run_lock
from tests.conftest import rlvr_here

REPO = Path(__file__).resolve().parents[2]
SMALL = ["--env", "rlvr/GuessNumber-v0", "--max-tokens", "4", "--sampler", "hf", "--no-progress"]
TRAIN = ["train", *SMALL, "--tasks-per-step", "2", "--group-size", "2", "--log-every", "0"]
EVAL = ["eval", *SMALL, "--tasks", "2"]


def rlvr_argv(*argv) -> list[str]:
    return [sys.executable, "-m", "rlvr", *map(str, argv)]


def holder(out: Path) -> int | None:
    """The pid the lock file of `out` names, once its holder has written it."""
    try:
        return json.loads((out / LOCK_NAME).read_text()).get("pid")
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def one_line_error(done: subprocess.CompletedProcess, command: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith(f"rlvr {command}: error: "), lines
    return lines[0]


def test_a_lock_is_exclusive_and_removed_on_exit(tmp_path):
    with run_lock(tmp_path, "first") as path:
        holder = json.loads(path.read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(OutInUse, match=f"pid {os.getpid()} on host"):
            with run_lock(tmp_path, "second"):
                pass
    assert not path.exists()
    with pytest.raises(RuntimeError):  # released on an error too
        with run_lock(tmp_path, "third"):
            raise RuntimeError("boom")
    assert not path.exists()


def test_a_second_run_on_a_running_out_names_the_holder(tmp_path, capsys):
    out = tmp_path / "run"
    first = subprocess.Popen(
        rlvr_argv(*TRAIN, "--steps", "100000", "--out", out),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while holder(out) != first.pid:  # the lock is taken (and named) before anything loads
            assert first.poll() is None, first.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the first run did not start"
            time.sleep(0.1)
        for command, argv in (("train", TRAIN), ("eval", EVAL)):
            line = one_line_error(
                rlvr_here(capsys, *argv, "--steps" if command == "train" else "--seed", "1", "--out", out), command
            )
            assert f"is in use by another run: pid {first.pid} on host {socket.gethostname()} (rlvr train" in line
        while not (out / "metrics.jsonl").is_file() or not (out / "metrics.jsonl").read_text():  # a step logged
            assert first.poll() is None, first.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the first run did not train"
            time.sleep(0.2)
        first.send_signal(signal.SIGINT)  # Ctrl-C: the first run ends and its lock goes with it
        assert first.wait(timeout=120) == 130
    finally:
        if first.poll() is None:
            first.kill()
    assert not (out / LOCK_NAME).exists()
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps))  # one run's steps, each once


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / LOCK_NAME).write_text(
        json.dumps({"pid": dead.pid, "host": socket.gethostname(), "command": "rlvr eval", "since": time.time() - 60})
    )
    done = rlvr_here(capsys, *EVAL, "--out", out)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"took over the lock left by pid {dead.pid}" in done.stderr
    assert (out / "summary.json").exists() and not (out / LOCK_NAME).exists()
