"""A tracker that is installed but does not work ends `rlvr train` in one typed line, never a
traceback: one broken at import (a broken install: a `wandb` package whose import raises, first on
the path), and the real wandb that cannot start its run (online, with no login). And wandb's own
lines (its banner, its sync advert) stay out of a quiet run's output: the real wandb, offline.
Each through `rlvr train` as a process (tiny model, HF sampler, one step)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require, train_device
from tests.trainers.test_quiet import stray_lines

ROOT = Path(__file__).resolve().parents[2]
SHORT = ["--steps", "1", "--tasks-per-step", "2", "--group-size", "2", "--max-tokens", "4", "--sampler", "hf"]
SHORT += ["--warmup-steps", "0", "--threads", "1", "--device", train_device(), "--sample-every", "1"]


def train(tmp_path: Path, *argv: str, path: str = "", **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    clean.update(env, HOME=str(tmp_path / "home"), PYTHONPATH=os.pathsep.join(filter(None, [path, str(ROOT)])))
    command = [sys.executable, "-m", "rlvr", "train", *SHORT, *argv, "--out", str(tmp_path / "run")]
    return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=clean, timeout=300)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stderr.strip().splitlines()[-1]


def test_a_tracker_broken_at_import_is_one_line(tmp_path):
    broken = tmp_path / "site" / "wandb"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('libwandb_core.so: cannot open shared object file')\n")
    line = one_error_line(train(tmp_path, "--report-to", "tensorboard,wandb", path=str(tmp_path / "site")))
    assert line == (
        "rlvr train: error: --report-to wandb: wandb is installed but `import wandb` failed (ImportError: "
        "libwandb_core.so: cannot open shared object file); reinstall it (`pip install --force-reinstall wandb`), "
        "or pass another --report-to"
    )


def test_wandb_that_cannot_start_its_run_is_one_line(tmp_path):
    require(importlib.util.find_spec("wandb") is not None, "wandb is not installed (the dev extra pins it)")
    line = one_error_line(train(tmp_path, "--report-to", "wandb", WANDB_MODE="online"))  # no login in this HOME
    assert line.startswith("rlvr train: error: --report-to wandb: wandb could not start its run (")
    hint = "`wandb login` for the cloud, or WANDB_MODE=offline to keep the run on this machine"
    assert line.endswith(f"{hint}, or pass another --report-to"), line


@pytest.mark.parametrize("progress", ["--progress", "--no-progress"])
def test_wandb_offline_says_nothing_of_its_own(tmp_path, progress):
    require(importlib.util.find_spec("wandb") is not None, "wandb is not installed (the dev extra pins it)")
    done = train(tmp_path, "--report-to", "wandb", progress, "--eval-tasks", "2", WANDB_MODE="offline")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not [line for line in done.stdout.splitlines() if line.lower().startswith("wandb")], done.stdout
    stray = [line for line in stray_lines(done.stderr) if not line.startswith(("samples at step", "best ", "worst "))]
    assert stray == [], done.stderr[-3000:]
    assert any((tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb"))  # it did log
