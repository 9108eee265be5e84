"""Ctrl-C in `rlvr eval` (issue 43, item 3), through the real command (`python -m rlvr`, tiny model, HF
sampler, rlvr/Arithmetic-v0, whose grader runs in the math verifier's worker processes): SIGINT sent
to the process group, as a terminal sends it. No traceback (the workers ignore SIGINT; the parent
stops them); the last line says what was kept and how to continue, also when nothing could be kept;
a rerun says what it keeps. 100 tasks without --chunk: chunks of 25 (a quarter), not one of 32+."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import rlvr_here

ROOT = Path(__file__).resolve().parents[2]
TASKS = 100


def args(out: Path) -> list[str]:
    return [
        "eval", "--sampler", "hf", "--tasks", str(TASKS), "--samples", "1", "--max-tokens", "8",
        "--no-progress", "--out", str(out),
    ]  # fmt: skip


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def interrupt_when(out: Path, ready) -> tuple[int, str, str]:
    """Run `rlvr eval` until `ready()`, then Ctrl-C its process group: (exit code, stdout, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvr", *args(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, stdout, stderr


def test_ctrl_c_in_eval_says_what_is_kept_and_how_to_continue(tmp_path, capsys):
    out = tmp_path / "eval"
    log = out / "episodes.jsonl"
    # Stopped before a chunk is whole (the run is recorded, the model loading or sampling): nothing kept, said so.
    code, _, stderr = interrupt_when(out, lambda: (out / "run.json").exists())
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == (
        "interrupted: no task could be kept (a stop keeps whole chunks of 25 tasks, --chunk, and none was "
        "finished); the same command starts again"
    )

    # Again, stopped once a chunk (25 tasks, one sample each) is written: the rerun first says it kept nothing.
    code, stdout, stderr = interrupt_when(out, lambda: lines(log) >= 25)
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    assert "resuming: none of the 100 tasks could be kept (no chunk of 25 tasks was written whole); sampling " in (
        stdout
    )
    last = re.fullmatch(
        rf"interrupted: (\d+) of {TASKS} tasks kept in {out}; continue with the same command",
        stderr.strip().splitlines()[-1],
    )
    assert last, stderr[-3000:]
    kept = int(last.group(1))
    assert kept in (25, 50, 75)

    done = rlvr_here(capsys, *args(out))  # the same command: continues, and says what it kept
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming: {kept} of {TASKS} tasks kept from {log}; sampling the other {TASKS - kept}" in done.stdout
    assert lines(log) == TASKS
