"""trainers/flops.py: model FLOPs against worked numbers, N against the tiny model's real parameter
count, the device-name table, and MFU only where the device is CUDA."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2ForCausalLM

from rlvr.trainers.flops import (
    TERA,
    ModelFlops,
    flop_meter,
    frozen,
    matmul_precision,
    model_flops,
    peak_flops,
    row_lengths,
    step_flops,
)
from rlvr.trainers.loop import Trainer
from rlvr.trainers.models import load_causal_lm, load_tokenizer
from rlvr.trainers.tiny.model import TinySpec, model_config
from tests.trainers.test_precision import config

CUDA = torch.cuda.is_available()

# N = 1000, L = 2, A = 8: per token of a 10-token row, forward 2N + 4LAT = 2000 + 640,
# training 6N + 12LAT = 6000 + 1920.
SMALL = ModelFlops(matmul_parameters=1000, trainable_matmul_parameters=1000, layers=2, attention_width=8)


def test_forward_and_training_flops_of_one_row_by_hand():
    assert SMALL.forward(10) == 10 * (2000 + 640) == 26_400
    assert SMALL.train(10) == 10 * (6000 + 1920) == 79_200
    # LoRA-like: 100 trainable -> 4N + 2N_t = 4200 per token, attention unchanged
    lora = ModelFlops(1000, 100, 2, 8)
    assert lora.train(10) == 10 * (4000 + 200 + 1920) == 61_200
    assert frozen(SMALL).train(10) == 10 * (4000 + 1920)


def test_a_steps_flops_by_hand():
    # rows of 10 and 5 tokens; train(5) = 5 * (6000 + 960) = 34,800, forward(5) = 5 * (2000 + 320) = 11,600
    assert step_flops([10, 5], SMALL, epochs=1, old_logprobs_forward=False) == 79_200 + 34_800
    # two epochs, the old-logprob forward, a reference of the same size: 2 * 114,000 + 38,000 + 38,000
    got = step_flops([10, 5], SMALL, epochs=2, old_logprobs_forward=True, reference=frozen(SMALL))
    assert got == 304_000
    # a critic of the same size: its forward once and its training once per epoch
    assert step_flops([10], SMALL, old_logprobs_forward=False, critic=SMALL) == 79_200 + 26_400 + 79_200


def test_n_is_the_tiny_models_parameters_less_its_input_embedding():
    """Qwen2 (vocabulary 1024, hidden 128, MLP 448, 4 layers, 4 heads, 2 KV heads of 32): a layer has
    q 128x128+128, k and v 128x64+64 each, o 128x128, MLP 3x128x448, two norms of 128: 221,696;
    4 layers + the final norm + embedding and untied head of 1024x128 each: 1,149,056. N leaves out
    the embedding lookup: 1,017,984."""
    spec = TinySpec()
    built = Qwen2ForCausalLM(model_config(spec, load_tokenizer("tiny")))
    assert sum(p.numel() for p in built.parameters()) == 1_149_056
    shipped = load_causal_lm("tiny")
    assert sum(p.numel() for p in shipped.parameters()) == 1_149_056
    for model in (built, shipped):
        m = model_flops(model)
        assert m == ModelFlops(1_017_984, 1_017_984, 4, 128)
    trunk = model_flops(shipped, with_head=False)  # a critic: no LM head either
    assert trunk.matmul_parameters == 1_017_984 - 1024 * 128
    shipped.requires_grad_(False)
    assert model_flops(shipped).trainable_matmul_parameters == 0


@pytest.mark.parametrize(
    "name, precision, tflops",
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989.5),
        ("NVIDIA H100 80GB HBM3", "fp32", 67.0),
        ("NVIDIA H100 80GB HBM3", "tf32", 494.5),
        ("NVIDIA H100 PCIe", "bf16", 756.5),
        ("NVIDIA H100 NVL", "bf16", 835.5),
        ("NVIDIA H200", "bf16", 989.5),
        ("NVIDIA H200 NVL", "bf16", 835.5),
        ("NVIDIA GH200 480GB", "bf16", 989.5),
        ("NVIDIA A100-SXM4-80GB", "bf16", 312.0),
        ("NVIDIA A100 80GB PCIe", "tf32", 156.0),
        ("NVIDIA L4", "bf16", 121.0),
        ("NVIDIA L40S", "bf16", 362.05),
        ("NVIDIA A10", "bf16", 125.0),
    ],
)
def test_device_names_match_their_datasheet_peaks(name, precision, tflops):
    assert peak_flops(name, precision) == pytest.approx(tflops * TERA)


def test_unknown_devices_and_precisions():
    for name in ("NVIDIA A10G", "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 4090", "cpu"):
        assert peak_flops(name, "bf16") is None, name
    with pytest.raises(ValueError, match="precision"):
        peak_flops("NVIDIA H100 80GB HBM3", "fp16")


def test_matmul_precision_follows_dtype_and_tf32(monkeypatch):
    assert matmul_precision("bfloat16") == "bf16"
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    assert matmul_precision("float32") == "fp32"
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    assert matmul_precision("float32") == "tf32"


def test_row_lengths_count_real_tokens():
    assert row_lengths(torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1], [0, 0, 1, 0]])) == [3, 4, 1]


def test_a_cpu_run_has_no_mfu_and_the_meter_counts_its_step(tmp_path, monkeypatch):
    """On the CPU no meter and no `mfu`/`tflops`; the meter the same models would get on an H100
    (fp32) counts grpo's step as the policy's training plus the reference's forward (the update's
    own forward gives the old logprobs): per row of T tokens, T (8N + 16LAT)."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    trainer = Trainer(config(tmp_path, device="cpu"))
    metrics = trainer.train_step()
    assert trainer.flops is None and "mfu" not in metrics and "tflops" not in metrics
    meter = flop_meter(trainer.models, trainer.algo, trainer.config, device_name="NVIDIA H100 80GB HBM3")
    assert meter.peak == 67.0 * TERA and not meter.old_logprobs_forward and meter.reference is not None
    lengths = [7, 12]
    n, la = 1_017_984, 4 * 128
    want = sum(t * (8 * n + 16 * la * t) for t in lengths)
    got = meter.metrics(lengths, seconds=2.0)
    assert got["tflops"] == pytest.approx(want / 2.0 / TERA, rel=1e-12)
    assert got["mfu"] == pytest.approx(want / 2.0 / (67.0 * TERA), rel=1e-12)
    assert meter.metrics(lengths, seconds=0.0) == {}


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU on this machine (torch.cuda.is_available() is False)")
def test_a_cuda_run_logs_mfu(tmp_path):
    trainer = Trainer(config(tmp_path, device="cuda", dtype="bfloat16"))
    metrics = trainer.train_step()
    assert metrics["tflops"] > 0
    if peak_flops(torch.cuda.get_device_name(), "bf16") is not None:
        assert 0 < metrics["mfu"] < 1


def test_the_meter_of_lora_and_of_ppo_with_a_critic():
    """LoRA (rank 4, every linear of the 4 layers): only the adapter's 41,984 weights need weight
    gradients, the reference is the policy with its adapter off. PPO with a critic: 4 epochs, the
    old-logprob forward, a reference, and a critic whose trunk (no LM head) is N - 1024 x 128."""
    import tempfile

    lora = Trainer(config(tempfile.mkdtemp(), device="cpu", lora_rank=4))
    m = flop_meter(lora.models, lora.algo, lora.config, device_name="NVIDIA H100 80GB HBM3")
    assert (
        m.policy.trainable_matmul_parameters
        == 41_984
        == sum(p.numel() for p in lora.policy.parameters() if p.requires_grad)
    )
    assert m.policy.matmul_parameters == 1_017_984 + 41_984 and m.reference.trainable_matmul_parameters == 0
    ppo = Trainer(config(tempfile.mkdtemp(), device="cpu", algo="ppo", value_model="critic"))
    m = flop_meter(ppo.models, ppo.algo, ppo.config, device_name="NVIDIA H100 80GB HBM3")
    assert (m.epochs, m.old_logprobs_forward) == (4, True)
    assert m.critic == ModelFlops(1_017_984 - 131_072, 1_017_984 - 131_072, 4, 128)
    assert m.reference == ModelFlops(1_017_984, 0, 4, 128)
