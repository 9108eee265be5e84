"""`--resume` continues exactly, and a run killed with SIGKILL resumes from its last good
checkpoint. Real training runs of the tiny model with the Hugging Face sampler (deterministic)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from rlvr.trainers import checkpoint as ckpt
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.device import use_threads
from rlvr.trainers.loop import Trainer
from rlvr.trainers.preflight import check_run
from tests.conftest import train_device

use_threads(1)  # as `rlvr train --threads 1` does: the Trainer leaves torch's threads to its caller

SMALL = dict(
    device=train_device(),  # the device the suite follows; checkpoints compared on the CPU
    model="tiny",
    sampler="hf",
    tasks_per_step=4,
    group_size=4,
    max_tokens=10,
    lr=1e-3,
    threads=1,
    progress=False,
    save_every=1,
    seed=3,
    algo_args={"kl_coef": 0.01},
)


def run(out: Path, steps: int, resume: bool = False, **extra) -> dict:
    config = TrainConfig.from_dict({**SMALL, **extra, "out": str(out), "steps": steps, "resume": resume})
    return Trainer(config).train()


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(path / "model.safetensors")


def test_resume_is_exact(tmp_path):
    """Two steps in one run == one step, resume, one more step: same weights, optimizer state
    and metrics, bit for bit."""
    run(tmp_path / "straight", steps=2)
    run(tmp_path / "resumed", steps=1)
    summary = run(tmp_path / "resumed", steps=2, resume=True)
    assert summary["start_step"] == 1 and summary["steps"] == 2
    a = ckpt.latest_checkpoint(tmp_path / "straight")
    b = ckpt.latest_checkpoint(tmp_path / "resumed")
    assert a.name == b.name == "step-00000002"
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    first = weights(ckpt.checkpoint_dir(tmp_path / "straight") / "step-00000001")
    assert not all(torch.equal(wa[k], first[k]) for k in wa)  # the second step did change something
    sa, sb = ckpt.load_state(a), ckpt.load_state(b)
    for key, value in sa["optimizer"]["state"].items():
        assert torch.equal(value["exp_avg"], sb["optimizer"]["state"][key]["exp_avg"])
    assert sa["scheduler"] == sb["scheduler"]
    ma = [json.loads(x) for x in (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()]
    mb = [json.loads(x) for x in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in mb] == [1, 2]
    for key in ("reward_mean", "policy_loss", "grad_norm", "kl", "entropy"):
        assert [m[key] for m in ma] == [m[key] for m in mb], key


def test_existing_run_needs_resume(tmp_path):
    run(tmp_path, steps=1)
    with pytest.raises(ConfigError, match="--resume"):
        check_run(TrainConfig.from_dict({**SMALL, "out": str(tmp_path), "steps": 2}))


def wait_for(predicate, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"training exited early with {proc.returncode}: {proc.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("training made no checkpoint in time")
        time.sleep(0.2)


def sigkill_after_checkpoint(proc: subprocess.Popen, out: Path, step: int, settle_s: float = 0.0) -> None:
    """Kill -9 the training process `proc` once its run in `out` has a checkpoint of `step` or later
    (and `settle_s` more seconds)."""
    try:
        wait_for(lambda: (ckpt.latest_checkpoint(out) or Path("step-0")).name >= f"step-{step:08d}", 300, proc)
        time.sleep(settle_s)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def train_command(out: Path, steps: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rlvr",
        "train",
        "--model",
        "tiny",
        "--sampler",
        "hf",
        "--steps",
        str(steps),
        "--tasks-per-step",
        "4",
        "--group-size",
        "4",
        "--max-tokens",
        "10",
        "--save-every",
        "1",
        "--keep-last",
        "2",
        "--threads",
        "1",
        "--out",
        str(out),
        "--no-progress",
        "--seed",
        "5",
        "--device",
        train_device(),
        *extra,
    ]


def test_sigkill_then_resume(tmp_path, capsys):
    """Kill -9 a training process while it checkpoints every step; the last complete checkpoint
    loads in `transformers`, and `--resume` continues from it to the end (that run through the
    command's entry point in this process: it is the killed one that needs a process of its own)."""
    from tests.trainers.test_learning import rlvr_train

    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen(
        train_command(tmp_path, 1000), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    sigkill_after_checkpoint(proc, tmp_path, 3, settle_s=0.3)  # land somewhere in the next step, possibly mid-save
    assert proc.returncode == -signal.SIGKILL
    last = ckpt.latest_checkpoint(tmp_path)
    step = ckpt.load_state(last)["step"]
    assert step >= 3 and last.name == f"step-{step:08d}"
    AutoModelForCausalLM.from_pretrained(last)  # a complete, loadable Hugging Face directory

    _, err = rlvr_train(train_command(tmp_path, step + 2, "--resume")[3:], capsys)  # after `python -m rlvr`
    assert f"resuming from {last}" in err
    assert not any(p.name.startswith(".tmp-") for p in ckpt.checkpoint_dir(tmp_path).iterdir())
    assert ckpt.latest_checkpoint(tmp_path).name == f"step-{step + 2:08d}"
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, step + 3))  # no gap, no step twice


def test_ppo_with_a_critic_resumes(tmp_path):
    """The critic's weights and value head travel with the checkpoint and come back on resume."""
    extra = dict(algo="ppo", value_model="critic", tasks_per_step=2, group_size=2, algo_args={})
    run(tmp_path, steps=1, **extra)
    saved = ckpt.latest_checkpoint(tmp_path)
    assert (saved / "critic" / "model.safetensors").is_file()
    config = TrainConfig.from_dict({**SMALL, **extra, "out": str(tmp_path), "steps": 2, "resume": True})
    trainer = Trainer(config)
    critic = trainer.models.critic
    want = weights(saved / "critic")
    assert all(torch.equal(p.cpu(), want[n]) for n, p in critic.model.state_dict().items() if n in want)
    assert torch.equal(critic.head.linear.weight.cpu(), ckpt.load_state(saved)["critic_head"]["linear.weight"])
    assert trainer.train()["steps"] == 2
