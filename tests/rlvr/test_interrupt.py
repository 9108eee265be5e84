"""Ctrl-C keeps the work (`trainers.interrupt`), through the real `rlvr train` (`python -m rlvr`; tiny
model, HF sampler, 2 tasks x 2 samples): SIGINT sent to the run's whole process group, as a terminal
sends it, once two steps are logged. The run saves its last finished step, prints no traceback,
ends with one line naming the checkpoint and `--resume`, exit 130; `--resume` then continues from
that checkpoint to the end, no step missing or twice (that run through `rlvr.cli.main` in this
process: no signal is its subject, and a subprocess would import torch again)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from rlvr.trainers import checkpoint as ckpt
from tests.conftest import rlvr_here

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^interrupted at step (\d+): saved (\S+); continue with the same command plus --resume$")


def command(out: Path, steps: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "rlvr", "train", "--steps", str(steps), "--tasks-per-step", "2", "--group-size", "2",
        "--max-tokens", "4", "--sampler", "hf", "--warmup-steps", "0", "--save-every", "1000", "--log-every", "0",
        "--no-progress", "--threads", "1", "--out", str(out), *extra,
    ]  # fmt: skip


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_ctrl_c_saves_the_last_finished_step_and_resume_continues(tmp_path, capsys):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        command(out, 1000), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 240
        while len(lines(out / "metrics.jsonl")) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    match = LINE.match(stderr.strip().splitlines()[-1])
    assert match, stderr[-3000:]
    step = int(match.group(1))
    assert step >= 2 and Path(match.group(2)) == ckpt.latest_checkpoint(out) == ckpt.checkpoint_dir(out) / (
        f"step-{step:08d}"
    )
    assert ckpt.load_state(ckpt.latest_checkpoint(out))["step"] == step
    assert len(lines(out / "metrics.jsonl")) == step  # the steps logged are the steps saved: none half-done

    resumed = rlvr_here(capsys, *command(out, step + 2, "--resume")[3:])  # the arguments after `python -m rlvr`
    stderr = resumed.stderr
    assert resumed.returncode == 0, stderr[-3000:]
    assert f"resuming from {match.group(2)} (step {step})" in stderr
    records = [json.loads(x) for x in lines(out / "metrics.jsonl")]
    assert [r["step"] for r in records] == list(range(1, step + 3))
