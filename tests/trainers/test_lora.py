"""LoRA (`--lora-rank`): only the adapter trains; the KL reference is the same model with its
adapter off (no second copy); vLLM follows the adapter (merged weights) to within 1e-4; a
checkpoint is the adapter alone, which `rlvr eval` loads and `--resume` continues; a target the
model lacks fails at the check; and the tiny model learns with it."""

from __future__ import annotations

import gc
import importlib.util
import json
import shlex
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import PreTrainedModel

from rlvr.cli import main
from rlvr.trainers import checkpoint as ckpt
from rlvr.trainers.batch import collate
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.device import model_device, use_threads
from rlvr.trainers.loop import Trainer
from rlvr.trainers.models import TINY_DIR, load_causal_lm, resolve_model
from rlvr.trainers.phases import reference_logprobs
from rlvr.trainers.policy import forward
from rlvr.trainers.preflight import check_model_dir, check_run
from tests.conftest import require, train_device
from tests.tolerances import forward_bound

use_threads(1)  # as `rlvr train --threads 1` does: the Trainer leaves torch's threads to its caller

GAP = 1e-4
MARGIN = 0.1  # reward (first 5 steps' mean -> last 5 steps'); measured rises at 25 steps: 0.20 and 0.31
HF = dict(
    device=train_device(),  # the device the suite follows; compared on the CPU
    model="tiny",
    sampler="hf",
    tasks_per_step=4,
    group_size=4,
    max_tokens=10,
    lr=1e-2,
    warmup_steps=0,
    threads=1,
    progress=False,
    save_every=1,
    seed=3,
    lora_rank=4,
    algo_args={"kl_coef": 0.05},
)


def config(out: Path, **extra) -> TrainConfig:
    return TrainConfig.from_dict({**HF, "out": str(out), **extra})


def steps(trainer: Trainer, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        out.append(trainer.train_step())
        trainer.step += 1
    return out


def models_alive() -> int:
    gc.collect()
    return sum(isinstance(o, PreTrainedModel) and type(o).__name__.endswith("ForCausalLM") for o in gc.get_objects())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A LoRA run of three steps with the HF sampler (which shares the policy), and its checkpoint."""
    before = models_alive()
    trainer = Trainer(config(tmp_path_factory.mktemp("run"), steps=3))
    trainer.models_created = models_alive() - before
    trainer.metrics = steps(trainer, 3)
    trainer.checkpoint = trainer.save()
    return trainer


def test_only_the_adapter_trains(trained):
    policy = trained.policy
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    # all-linear: q, k, v, o, gate, up, down of 4 layers, A and B each; lm_head and embeddings stay frozen
    assert len(trainable) == 4 * 7 * 2
    optimized = [p for g in trained.optimizer.param_groups for p in g["params"]]
    assert {id(p) for p in optimized} == {id(p) for p in policy.parameters() if p.requires_grad}
    base = load_causal_lm()  # frozen weights did not move; the adapter did
    frozen = {
        n.replace("base_model.model.", "").replace(".base_layer", ""): p
        for n, p in policy.named_parameters()
        if not p.requires_grad
    }
    assert all(torch.equal(p, frozen[n].cpu()) for n, p in base.named_parameters())
    assert max(float(p.detach().abs().max()) for n, p in policy.named_parameters() if ".lora_B." in n) > 1e-3


def test_reference_is_the_base_with_the_adapter_off(trained):
    models = trained.models
    assert models.reference is None and models.reference_is_base
    assert trained.models_created == 1  # the policy only: no second copy for the reference
    assert trained.metrics[-1]["kl"] > 0  # the adapter moved the policy away from the reference
    batch = collate(trained.rollout(7).episodes, models.pad_token_id)
    with torch.no_grad():
        ref = reference_logprobs(models, trained.config, batch)
        base_model = load_causal_lm().to(model_device(models.policy))  # the same kernels as the policy's
        base = forward(base_model, batch, trained.config.temperature).logprobs
        policy = forward(models.policy, batch, trained.config.temperature).logprobs
    mask = batch.loss_mask > 0
    assert torch.equal(ref[mask], base[mask])  # exactly the base model's
    assert float((policy - ref)[mask].abs().max()) > 1e-3  # and the adapter is back on afterwards


def test_hf_sampler_generates_with_the_adapter(trained):
    """The HF sampler shares the policy object: its logprobs are the adapted policy's (gap ~ 1e-6)."""
    assert all(m["logprob_gap_max"] < GAP for m in trained.metrics)
    assert trained.sampler.inner.model is trained.policy


def test_checkpoint_is_the_adapter_alone_and_loads_for_eval(trained):
    path = trained.checkpoint
    files = {p.name for p in path.iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "tokenizer.json", ckpt.STATE_FILE} <= files
    assert "model.safetensors" not in files and "config.json" not in files
    adapter = (path / "adapter_model.safetensors").stat().st_size
    assert adapter < (TINY_DIR / "model.safetensors").stat().st_size / 10  # 42k of 1.15M parameters
    assert set(load_file(path / "adapter_model.safetensors")) == {
        n.replace(".default", "") for n, p in trained.policy.named_parameters() if p.requires_grad
    }
    assert json.loads((path / "adapter_config.json").read_text())["base_model_name_or_path"] == "tiny"
    check_model_dir(resolve_model(str(path)))  # what `rlvr eval --model` checks
    batch = collate(trained.rollout(8).episodes, trained.models.pad_token_id)
    with torch.no_grad():
        mine = forward(trained.policy, batch, 1.0).logprobs
        merged = load_causal_lm(path).to(model_device(trained.policy))  # the base with the adapter merged
        loaded = forward(merged, batch, 1.0).logprobs
    mask = batch.loss_mask > 0  # W x + B A x against (W + B A) x: other sums (tests.tolerances)
    assert float((mine - loaded)[mask].abs().max()) < forward_bound(merged.config, mine[mask])


@pytest.mark.parametrize("sampler", ["hf", pytest.param("vllm", marks=pytest.mark.vllm)])
def test_rlvr_eval_loads_an_adapter_checkpoint(trained, tmp_path, sampler, capsys):
    """With vLLM, through the base with the adapter merged into a temporary directory. `rlvr eval`
    through its entry point in this process (the command closes its sampler when it ends)."""
    if sampler == "vllm":
        require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    argv = ["eval", "--model", str(trained.checkpoint), "--sampler", sampler, "--tasks", "4"]
    code = main([*argv, "--out", str(tmp_path / "eval"), "--no-progress"])
    assert code == 0, capsys.readouterr().err[-3000:]
    assert len((tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()) == 4


def test_resume_with_lora_is_exact(tmp_path):
    """Two steps straight == one step, resume, one more: the same adapter, bit for bit."""
    Trainer(config(tmp_path / "straight", steps=2)).train()
    Trainer(config(tmp_path / "resumed", steps=1)).train()
    resumed = Trainer(config(tmp_path / "resumed", steps=2, resume=True))
    assert resumed.step == 1 and resumed.models.lora
    resumed.train()
    a = load_file(ckpt.latest_checkpoint(tmp_path / "straight") / "adapter_model.safetensors")
    b = load_file(ckpt.latest_checkpoint(tmp_path / "resumed") / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_target_the_model_lacks_fails_at_the_check(tmp_path, capsys):
    with pytest.raises(ConfigError, match="no module named nope"):
        check_run(config(tmp_path, lora_targets="q_proj,nope"))
    check_run(config(tmp_path, lora_targets="q_proj,v_proj"))
    argv = ["train", "--lora-rank", "4", "--lora-targets", "qproj", "--device", "cpu", "--out", str(tmp_path / "run")]
    code = main(argv)  # the command's entry point, in this process: one line, exit code 2
    err = capsys.readouterr().err
    assert code == 2 and "qproj" in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.vllm
def test_vllm_follows_the_adapter(tmp_path):
    """Merged weights (W + scale * B @ A) pushed after every step: the sampler's logprobs are the
    trainer's (peft, unmerged) within 1e-4; also through `StagedWeights` (asynchronous RL), and
    from the start of a resumed run (vLLM starts from the base, then loads the merged adapter)."""
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    trainer = Trainer(config(tmp_path, sampler="vllm", steps=10, tasks_per_step=8))
    metrics = steps(trainer, 3)
    assert all(m["logprob_gap_max"] < GAP for m in metrics), [m["logprob_gap_max"] for m in metrics]
    assert metrics[-1]["kl"] > 1e-4  # the adapter really moved the sampled policy
    with torch.no_grad():  # move the adapter, stage it as the producer's sync does, sample, measure
        for n, p in trainer.policy.named_parameters():
            if ".lora_B." in n:
                p.add_(0.02 * torch.randn_like(p))
    trainer.sampler.staged.stage(trainer.models.sampler_weights(), trainer.step)
    assert trainer.train_step()["logprob_gap_max"] < GAP
    trainer.step += 1
    trainer.save()
    trainer.sampler.close()
    resumed = Trainer(config(tmp_path, sampler="vllm", steps=10, tasks_per_step=8, resume=True))
    assert resumed.step == 4 and resumed.train_step()["logprob_gap_max"] < GAP
    resumed.sampler.close()


@pytest.mark.vllm
def test_vllm_follows_an_adapter_of_named_targets(tmp_path):
    """q_proj and down_proj only: vLLM fuses q/k/v and gate/up, so the sync gives their whole blocks
    (pushing the two adapted weights alone measured a gap of 15 nats)."""
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    trainer = Trainer(config(tmp_path, sampler="vllm", steps=10, lora_targets="q_proj,down_proj", lr=2e-2))
    assert {n.rpartition(".")[0].rpartition(".")[2] for n, _ in trainer.models.sampler_weights()} == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    metrics = steps(trainer, 3)
    assert all(m["logprob_gap_max"] < GAP for m in metrics) and metrics[-1]["kl"] > 1e-3
    trainer.sampler.close()


@pytest.mark.slow
@pytest.mark.vllm
def test_lora_raises_reward(tmp_path, capsys):
    """Learning with the adapter alone: README.md's `rlvr train --lora-rank 8 ...` (vLLM sampler; 25
    steps, about 20 s; through the command's entry point in this process) raises the reward of the
    tiny model on rlvr/Arithmetic-v0 (measured with seeds 0 and 1: 0.34 -> 0.64 and 0.40 -> 0.60 over
    the first and last 5 steps; at 40 steps 0.34 -> 0.63 and 0.40 -> 0.58); the sampler stays in sync
    at every step."""
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    from tests.test_readme_commands import readme_command
    from tests.trainers.test_learning import rlvr_train

    argv = shlex.split(readme_command("--lora-rank 8"))
    assert argv[:2] == [".venv/bin/rlvr", "train"]
    rlvr_train([*argv[1:], "--out", str(tmp_path), "--no-progress", "--threads", "1"], capsys)
    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert max(m["logprob_gap_max"] for m in metrics) < 2e-4  # as tests/trainers/test_learning.py allows
    first = sum(m["reward_mean"] for m in metrics[:5]) / 5
    last = sum(m["reward_mean"] for m in metrics[-5:]) / 5
    assert last > first + MARGIN, f"reward {first:.3f} -> {last:.3f}"
