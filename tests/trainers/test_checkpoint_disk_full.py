"""A checkpoint that cannot be written for want of disk: its temporary directory goes, the previous
checkpoint stays as it was, and the error is a `CheckpointError` that says why. Real failures only:
a small tmpfs (ENOSPC; mounting needs root or CAP_SYS_ADMIN, skipped otherwise) and a file-size
rlimit (EFBIG; any user, in a subprocess so that the limit does not outlive the test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlvr.trainers import checkpoint as ckpt
from tests.conftest import tmpfs

MiB = 1 << 20


def small_model(directory: Path) -> None:
    torch.save({"w": torch.zeros(10)}, directory / "model.bin")


def assert_previous_kept(out: Path) -> None:
    assert [step for step, _ in ckpt.list_checkpoints(out)] == [1]
    assert ckpt.load_state(ckpt.latest_checkpoint(out))["step"] == 1  # intact
    assert not [p.name for p in ckpt.checkpoint_dir(out).iterdir() if p.name.startswith(".tmp-")]


def test_full_disk_in_torch_save_keeps_the_previous_checkpoint(tmp_path):
    with tmpfs(tmp_path / "disk", "1m") as out:
        ckpt.save_checkpoint(out, 1, small_model, {"x": torch.zeros(10)}, keep_last=1)
        # torch.save reports this as "unexpected pos ..." (RuntimeError); the OSError is its context
        with pytest.raises(
            ckpt.CheckpointError,
            match=r"step 2 .*No space left on device; the previous "
            r"checkpoint .*step-00000001 is kept",
        ):
            ckpt.save_checkpoint(out, 2, small_model, {"x": torch.zeros(MiB // 2)}, keep_last=1)  # 2 MiB
        assert_previous_kept(out)


def test_full_disk_in_safetensors_keeps_the_previous_checkpoint(tmp_path):
    from safetensors.torch import save_file

    def big_model(directory: Path) -> None:  # safetensors' own error type, "(os error 28)" in its text
        save_file({"w": torch.zeros(MiB // 2)}, directory / "model.safetensors")

    with tmpfs(tmp_path / "disk", "1m") as out:
        ckpt.save_checkpoint(out, 1, small_model, {}, keep_last=2)
        with pytest.raises(ckpt.CheckpointError, match="No space left on device"):
            ckpt.save_checkpoint(out, 2, big_model, {}, keep_last=2)
        assert_previous_kept(out)


SCRIPT = """
import json, resource, sys, torch
from rlvr.trainers import checkpoint as ckpt
out = sys.argv[1]
model = lambda d: torch.save({"w": torch.zeros(10)}, d / "model.bin")
ckpt.save_checkpoint(out, 1, model, {"x": torch.zeros(10)}, keep_last=1)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    ckpt.save_checkpoint(out, 2, model, {"x": torch.zeros(1 << 19)}, keep_last=1)  # a 2 MiB file
except ckpt.CheckpointError as e:
    print(json.dumps(str(e)))
"""


def test_file_size_limit_keeps_the_previous_checkpoint(tmp_path):
    # Python ignores SIGXFSZ, so the write fails with EFBIG instead of killing the process.
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    message = json.loads(done.stdout.strip().splitlines()[-1])
    assert "File too large" in message and "step-00000001 is kept" in message
    assert_previous_kept(tmp_path)


def test_a_bug_in_save_model_is_not_turned_into_a_disk_error(tmp_path):
    def broken(directory: Path) -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        ckpt.save_checkpoint(tmp_path, 1, broken, {}, keep_last=1)
    assert not list(ckpt.checkpoint_dir(tmp_path).iterdir())  # its temporary directory is gone too
