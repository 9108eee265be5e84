"""Exact resume from any stop (issue #28, section 2): real `rlvr eval` and `rlvr train` processes are
stopped at chosen points, resumed with the same arguments, and end as an uninterrupted run ends: the
same episodes.jsonl byte for byte and the same summary.json less its timings; the same
metrics.jsonl lines less their timings (every step once, in order) and the same final weights.

Each stop is reached by watching the run's own files, with no hook in the product:
- eval, between chunks: SIGKILL once the log holds the first chunk whole (the process is then
  sampling the second one);
- eval, inside a chunk's write: a real full disk (a tmpfs too small for the second chunk; root only)
  stops the run part-way through appending it; without a tmpfs the test writes what such a disk
  leaves (part of the chunk, a torn last line);
- train, between steps: SIGKILL once checkpoint 2 is complete;
- train, inside a step: SIGKILL once metrics.jsonl holds step 3 (no checkpoint: --save-every 2),
  so that the run is past its last checkpoint;
- train, during a checkpoint write: SIGSTOP once a `.tmp-step-*` directory appears, then SIGKILL if
  it is still there (the write is cut; else SIGCONT, and the next write is caught).
vLLM (an engine start per run, the slow part): one eval and one train case, the stop written by
the test into a copy of the uninterrupted run's files (part of a chunk and a torn line; a torn
metrics line, a half-written checkpoint directory, the checkpoints after the last complete one gone).
No process is stopped there, so both runs of each are `rlvr.cli.main` in this process (a subprocess
would import torch and vLLM again): the same entry point and arguments, one process for both runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr.trainers import checkpoint as ckpt
from tests.conftest import require, rlvr_here, tmpfs

ENV = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
TIMEOUT_S = 300
EVAL_HF = (
    "eval",
    "--sampler",
    "hf",
    "--tasks",
    "8",
    "--chunk",
    "3",
    "--samples",
    "2",
    "--max-tokens",
    "12",
    "--no-progress",
)  # chunks [0, 3) [3, 6) [6, 8): the last one cut at --tasks
CHUNK = 3 * 2  # lines of a whole chunk: 3 tasks x 2 samples


def train_args(sampler: str, steps: int, keep_last: int) -> tuple[str, ...]:
    """A short `rlvr train` on the tiny model: a checkpoint every 2 steps."""
    return (
        *("train", "--model", "tiny", "--sampler", sampler, "--steps", str(steps), "--tasks-per-step", "4"),
        *("--group-size", "4", "--max-tokens", "10", "--save-every", "2", "--keep-last", str(keep_last)),
        *("--threads", "1", "--seed", "5", "--no-progress"),
    )


TRAIN_HF = train_args("hf", steps=8, keep_last=2)
SUMMARY_TIMINGS = {"seconds", "tokens", "tokens_per_second"}  # this process's sampling alone: not the run's


def command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "rlvr", *map(str, args)]


def rlvr(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command(*args), capture_output=True, text=True, env=ENV, cwd=cwd, timeout=TIMEOUT_S)


def finished(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    done = rlvr(*args, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def finished_here(capsys, *args: str | Path) -> str:
    """`rlvr *args` run to its end in this process (`tests.conftest.rlvr_here`); returns its stderr."""
    done = rlvr_here(capsys, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def kill_when(ready: Callable[[], bool], *args: str | Path, cwd: Path, poll_s: float = 0.01) -> None:
    """Start `rlvr *args` and SIGKILL it as soon as `ready()` holds."""
    proc = subprocess.Popen(
        command(*args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV, cwd=cwd
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not ready():
            if proc.poll() is not None:
                raise AssertionError(
                    f"rlvr exited with {proc.returncode} before the stop: {proc.stderr.read()[-3000:]}"
                )
            assert time.monotonic() < deadline, "the stop never came"
            time.sleep(poll_s)
        proc.kill()
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True) if path.exists() else []


# ---- rlvr eval -----------------------------------------------------------------------------------
def assert_same_eval(straight: Path, resumed: Path) -> None:
    assert (resumed / "episodes.jsonl").read_text() == (straight / "episodes.jsonl").read_text()
    a, b = (json.loads((d / "summary.json").read_text()) for d in (straight, resumed))
    assert {k: v for k, v in a.items() if k not in SUMMARY_TIMINGS} == {
        k: v for k, v in b.items() if k not in SUMMARY_TIMINGS
    }


@pytest.fixture(scope="module")
def straight_eval(tmp_path_factory) -> Path:
    """The uninterrupted run (Hugging Face sampler)."""
    home = tmp_path_factory.mktemp("eval")
    finished(*EVAL_HF, "--out", home / "straight", cwd=home)
    return home / "straight"


def test_eval_resumes_exactly_after_a_kill_and_a_full_disk(straight_eval, tmp_path, capsys):
    """SIGKILL between chunks, then a full disk inside the next chunk's write, then a resume with
    room: the log and the summary of the uninterrupted run."""
    want = lines(straight_eval / "episodes.jsonl")
    first = len("".join(want[:CHUNK]).encode())
    # run.json, the lock file and the first chunk's lines: no room for the second chunk's
    with tmpfs(tmp_path / "disk", f"{(2 + math.ceil(first / 4096)) * 4}k", skip=False) as disk:
        out = (disk or tmp_path) / "run"
        log = out / "episodes.jsonl"
        kill_when(lambda: log.exists() and log.read_text().count("\n") >= CHUNK, *EVAL_HF, "--out", out, cwd=tmp_path)
        assert lines(log) == want[:CHUNK]  # stopped between chunks: the first one whole

        if disk is not None:  # the second chunk meets a full disk part-way through its write (in this
            # process: what it wrote of that chunk is sampled again, so its numbers need not be a process's)
            done = rlvr_here(capsys, *EVAL_HF, "--out", out)
            assert done.returncode == 2 and "No space left on device" in done.stderr, done.stderr[-3000:]
            subprocess.run(["mount", "-o", "remount,size=1m", str(disk)], check=True)
        else:  # what that disk leaves: part of the chunk, its last line torn
            log.write_text("".join(want[: CHUNK + 1]) + want[CHUNK + 1][:100])
        assert lines(log)[:CHUNK] == want[:CHUNK] and len(log.read_bytes()) < len("".join(want[: 2 * CHUNK]).encode())
        finished(*EVAL_HF, "--out", out, cwd=tmp_path)
        assert_same_eval(straight_eval, out)


@pytest.mark.vllm
def test_eval_with_vllm_resumes_exactly_inside_a_chunk(tmp_path, capsys):
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    args = (
        "eval",
        "--sampler",
        "vllm",
        "--tasks",
        "4",
        "--chunk",
        "2",
        "--samples",
        "2",
        "--max-tokens",
        "12",
        "--no-progress",
    )
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    finished_here(capsys, *args, "--out", straight)
    want = lines(straight / "episodes.jsonl")
    resumed.mkdir()
    shutil.copy(straight / "run.json", resumed / "run.json")
    # Stopped writing the second chunk: its first line whole, its second torn.
    (resumed / "episodes.jsonl").write_text("".join(want[:5]) + want[5][:100])
    finished_here(capsys, *args, "--out", resumed)
    assert_same_eval(straight, resumed)


# ---- rlvr train ----------------------------------------------------------------------------------
def metrics(out: Path) -> list[dict]:
    """metrics.jsonl less what measures this process (its speed, its peak memory), not the run."""
    records = []
    for line in lines(out / "metrics.jsonl"):
        with contextlib.suppress(json.JSONDecodeError):  # a torn last line
            records.append(
                {
                    k: v
                    for k, v in json.loads(line).items()
                    if not k.startswith(("time_", "memory_", "cuda_")) and k != "tokens_per_second"
                }
            )
    return records


def assert_same_train(straight: Path, resumed: Path) -> None:
    a, b = metrics(straight), metrics(resumed)
    assert [m["step"] for m in b] == [m["step"] for m in a]  # every step once, in order
    assert a == b
    last_a, last_b = ckpt.latest_checkpoint(straight), ckpt.latest_checkpoint(resumed)
    assert last_a.name == last_b.name
    wa, wb = load_file(last_a / "model.safetensors"), load_file(last_b / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not [p for p in ckpt.checkpoint_dir(resumed).iterdir() if p.name.startswith(".tmp-")]


def steps_logged(out: Path) -> list[int]:
    return [m["step"] for m in metrics(out)]


def latest_step(out: Path) -> int:
    last = ckpt.latest_checkpoint(out)
    return 0 if last is None else int(last.name.removeprefix("step-"))


def stop(proc: subprocess.Popen) -> None:
    """SIGSTOP `proc` and wait until it is stopped (a signal is delivered asynchronously)."""
    proc.send_signal(signal.SIGSTOP)
    stat = Path(f"/proc/{proc.pid}/stat")
    while stat.read_text().rpartition(")")[2].split()[0] not in ("T", "t"):
        time.sleep(0.001)


def kill_during_checkpoint_write(*args: str | Path, out: Path, cwd: Path) -> int:
    """Start `rlvr *args` and SIGKILL it while it writes a checkpoint; returns that checkpoint's step.
    A write seen in progress is frozen (SIGSTOP) before the check that it still is: then the kill
    certainly cuts it; a write that ended meanwhile is let go and the next one is caught."""
    proc = subprocess.Popen(
        command(*args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV, cwd=cwd
    )
    root = ckpt.checkpoint_dir(out)

    def writing() -> list[Path]:
        return [p for p in root.iterdir() if p.name.startswith(".tmp-step-")] if root.is_dir() else []

    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise AssertionError(
                    f"rlvr exited with {proc.returncode} before a write was caught: {proc.stderr.read()[-3000:]}"
                )
            assert time.monotonic() < deadline, "no checkpoint write was caught"
            if writing():
                stop(proc)
                if caught := writing():
                    proc.kill()
                    assert proc.wait(timeout=30) == -signal.SIGKILL
                    return int(caught[0].name.split("-")[2])
                proc.send_signal(signal.SIGCONT)
            time.sleep(0.002)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


@pytest.fixture(scope="module")
def straight_train(tmp_path_factory) -> Path:
    """The uninterrupted run: a process like the stopped ones (in the pytest process, after vLLM was
    imported there, its numbers differed from theirs at step 1)."""
    home = tmp_path_factory.mktemp("train")
    finished(*TRAIN_HF, "--out", home / "straight", cwd=home)
    return home / "straight"


def test_train_resumes_exactly_after_stops_between_steps_inside_a_step_and_in_a_checkpoint_write(
    straight_train, tmp_path
):
    out = tmp_path / "run"
    kill_when(lambda: latest_step(out) >= 2, *TRAIN_HF, "--out", out, cwd=tmp_path)
    assert latest_step(out) == 2  # between steps: checkpoint 2 complete

    kill_when(lambda: 3 in steps_logged(out), *TRAIN_HF, "--out", out, "--resume", cwd=tmp_path)
    assert latest_step(out) == 2 and steps_logged(out)[-1] == 3  # inside step 4: step 3 has no checkpoint

    step = kill_during_checkpoint_write(*TRAIN_HF, "--out", out, "--resume", out=out, cwd=tmp_path)
    assert latest_step(out) == step - 2 and steps_logged(out)[-1] == step  # the write of `step` cut short
    assert [p.name for p in ckpt.checkpoint_dir(out).iterdir() if p.name.startswith(".tmp-step-")]

    done = finished(*TRAIN_HF, "--out", out, "--resume", cwd=tmp_path)
    assert f"resuming from {ckpt.checkpoint_dir(out) / f'step-{step - 2:08d}'}" in done.stderr
    assert_same_train(straight_train, out)


@pytest.mark.vllm
def test_train_with_vllm_resumes_exactly_after_a_stop_in_a_checkpoint_write(tmp_path, capsys):
    """The vLLM engine of a resumed run starts from the checkpoint's weights and samples what the
    uninterrupted run's engine, updated in place, sampled."""
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    args = train_args("vllm", steps=4, keep_last=3)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    finished_here(capsys, *args, "--out", straight)
    shutil.copytree(straight, resumed)
    # Stopped while writing checkpoint 4: its directory half written, step 4's metrics line torn.
    final = ckpt.checkpoint_dir(resumed) / "step-00000004"
    partial = final.with_name(".tmp-step-00000004-1")
    partial.mkdir()
    (partial / "model.safetensors").write_bytes((final / "model.safetensors").read_bytes()[:4096])
    shutil.rmtree(final)
    log = lines(resumed / "metrics.jsonl")
    (resumed / "metrics.jsonl").write_text("".join(log[:3]) + log[3][:50])
    stderr = finished_here(capsys, *args, "--out", resumed, "--resume")
    assert f"resuming from {ckpt.checkpoint_dir(resumed) / 'step-00000002'}" in stderr
    assert_same_train(straight, resumed)
