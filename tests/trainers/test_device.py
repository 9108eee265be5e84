"""`--device` (trainers.device): where the trainer's models run. On the CPU (every machine here) the
setting is checked and the models land where it says; the CUDA tests run wherever torch sees a GPU
and are skipped, with the reason, where it does not (CI and the developers' machines have none)."""

from __future__ import annotations

import pytest
import torch

from rlvr.cli import main
from rlvr.errors import RlvrError
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.device import DeviceError, model_device, resolve_device
from rlvr.trainers.loop import Trainer
from rlvr.trainers.models import load_causal_lm
from rlvr.trainers.policy import Critic, forward
from tests.conftest import random_qwen2
from tests.trainers.test_precision import config, shared_prompt_batch

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA GPU on this machine (torch.cuda.is_available() is False)")


def test_cpu_and_auto_resolve_here():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if CUDA else "cpu")


def test_auto_picks_a_gpu_when_torch_sees_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")


@pytest.mark.parametrize("spec", ["gpu", "cuda:", "cuda:x", "CPU", "", "cuda 0", "mps"])
def test_a_malformed_device_is_a_typed_error(spec):
    with pytest.raises(DeviceError, match="auto, cpu, cuda or cuda:N"):
        resolve_device(spec)
    with pytest.raises(ConfigError, match="device must be auto, cpu, cuda or cuda:N"):
        TrainConfig(device=spec).validate()


@pytest.mark.skipif(CUDA, reason="this machine has a CUDA GPU")
def test_a_gpu_this_machine_lacks_is_one_line_before_anything_loads(tmp_path, capsys):
    err = pytest.raises(DeviceError, resolve_device, "cuda:1").value
    assert isinstance(err, RlvrError) and "no CUDA GPU" in str(err)
    assert main(["train", "--device", "cuda", "--out", str(tmp_path / "run")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlvr train: error: device cuda: torch sees no CUDA GPU"), lines
    assert not (tmp_path / "run").exists()


def test_vllm_gpu_memory_must_be_a_share():
    for bad in (0, 1, 1.5, -0.1):
        with pytest.raises(ConfigError, match="vllm_gpu_memory must be in"):
            TrainConfig(vllm_gpu_memory=bad).validate()


def test_the_trainer_puts_every_model_on_its_device(tmp_path):
    trainer = Trainer(config(tmp_path, device="cpu", algo="ppo", value_model="critic"))
    m = trainer.models
    for model in (m.policy, m.reference, m.critic):
        assert all(p.device == torch.device("cpu") for p in model.parameters())
    assert model_device(m.policy) == torch.device("cpu")
    assert model_device(torch.nn.Identity()) == torch.device("cpu")  # no parameters: the CPU


def test_a_critic_builds_its_head_where_its_trunk_is():
    """A critic made from a model on another device (here `meta`, standing in for CUDA) has its value
    head there too, not on the CPU where `nn.Linear` starts."""
    critic = Critic(random_qwen2().to("meta"))
    assert {p.device for p in critic.parameters()} == {torch.device("meta")}


# ---- CUDA ------------------------------------------------------------------------------------------
@needs_cuda
def test_forward_on_the_gpu_returns_the_cpu_numbers_on_the_batchs_device():
    """Model on CUDA, batch on the CPU (as the trainer keeps it): outputs come back on the CPU, equal
    to the CPU model's, and the backward pass reaches the GPU weights."""
    torch.backends.cuda.matmul.allow_tf32 = False
    cpu_model = load_causal_lm("tiny")
    gpu_model = load_causal_lm("tiny").to("cuda")
    batch = shared_prompt_batch()
    want = forward(cpu_model, batch, 1.0, with_entropy=True)
    got = forward(gpu_model, batch, 1.0, with_entropy=True)
    assert got.logprobs.device == torch.device("cpu") and got.entropy.device == torch.device("cpu")
    mask = batch.loss_mask > 0
    torch.testing.assert_close(got.logprobs[mask], want.logprobs[mask], atol=1e-4, rtol=0)
    (got.logprobs * batch.loss_mask).sum().backward()
    grads = [p.grad for p in gpu_model.parameters() if p.grad is not None]
    assert grads and all(g.device.type == "cuda" for g in grads)


@needs_cuda
@pytest.mark.parametrize(
    "settings",
    [{}, {"dtype": "bfloat16"}, {"lora_rank": 4}, {"micro_batch_tokens": 64}, {"algo": "ppo", "value_model": "critic"}],
)
def test_training_steps_on_the_gpu(tmp_path, settings):
    trainer = Trainer(config(tmp_path, device="cuda", **settings))
    summary = trainer.train()
    assert summary["steps"] == 2
    assert all(p.device.type == "cuda" for p in trainer.models.policy.parameters())
    if settings.get("dtype") == "bfloat16":  # CUDA: float32 weights under autocast
        assert next(trainer.models.policy.parameters()).dtype == torch.float32
