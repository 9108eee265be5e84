"""Model FLOPs of a training step and the device's peak FLOP/s: MFU (model FLOPs utilization).

What is counted (Kaplan et al. 2020, PaLM appendix B), per token of a sequence of length T, for a
decoder with N matmul parameters, L layers and attention width A (query heads x head dim):

- forward: 2N + 4LAT. 2 FLOPs (multiply, add) per parameter a token meets; the attention scores
  QK^T and their product with V are 2AT each per layer. T is the row's full length, as PaLM counts
  it (not halved for the causal mask): the figure the field reports as MFU.
- forward and backward (training): 2N (forward) + 2N (gradients of the activations) + 2N_t
  (gradients of the N_t trainable weights) + 12LAT; full fine-tuning: the familiar 6N + 12LAT.
  With LoRA the frozen weights need no weight gradients: 4N + 2N_t.

N counts the parameters a token is multiplied by: every parameter except the input embedding
table, which is a lookup (a tied table counts once, as the output head). A critic runs its trunk
only (no LM head). Norms and biases are in N, negligible. Not counted, by the definition of
*model* FLOPs: gradient checkpointing's recomputed forward, padding (rows are counted by their
real tokens, so padding shows up as lower MFU), the optimizer step, the loss maths.

A step's training FLOPs (`step_flops`): the policy trained once per epoch over every row; the
no-grad forwards before the update: the policy's old logprobs (skipped when the update's own
forward stands in for them, `trainers.phases.update_is_on_policy`), the reference's (LoRA: the
policy with its adapter off), a critic's values; and a critic trained once per epoch. MFU is
those FLOPs over the training phase's seconds (`time_training`: old and reference logprobs,
values, the update) over the device's peak for the run's precision (`peak_flops`). Sampling is
not in it: generation is bound by memory bandwidth, not FLOPs, and has its own tokens/s.

Only on CUDA: a CPU's peak depends on its vector units, clock and the cores other processes take
(2 shared cores here), so a CPU ratio would measure the neighbours; and this keeps the metrics a
CPU run has always written unchanged. So on the CPU neither `mfu` nor `tflops` is logged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

TERA = 1e12

# Dense peak tensor FLOP/s (no 2:4 sparsity) from NVIDIA's datasheets; "fp32" is the non-tensor-core
# rate (torch's default for float32 matmuls), "tf32" the tensor-core rate when TF32 is allowed.
# Where a datasheet gives only the sparse figure, it is halved. Most specific names first.
PEAK_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    # H200 NVL: H200 datasheet (NVL column): BF16 1,671 sparse, TF32 835 sparse, FP32 60
    (r"H200 NVL", {"bf16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    # H200 SXM: H200 datasheet (SXM column): BF16 1,979 sparse, TF32 989 sparse, FP32 67
    (r"H200", {"bf16": 989.5, "tf32": 494.5, "fp32": 67.0}),
    # GH200 (its Hopper GPU: H100 SXM's rates), GH200 datasheet
    (r"GH200", {"bf16": 989.5, "tf32": 494.5, "fp32": 67.0}),
    # H100 NVL: H100 datasheet (NVL column): BF16 1,671 sparse, TF32 835 sparse, FP32 60
    (r"H100 NVL", {"bf16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    # H100 PCIe: H100 datasheet (PCIe column): BF16 1,513 sparse, TF32 756 sparse, FP32 51
    (r"H100 PCIe", {"bf16": 756.5, "tf32": 378.0, "fp32": 51.0}),
    # H100 SXM5 ("NVIDIA H100 80GB HBM3"): H100 datasheet (SXM column): BF16 1,979 sparse, TF32 989 sparse, FP32 67
    (r"H100", {"bf16": 989.5, "tf32": 494.5, "fp32": 67.0}),
    # A100 (SXM4 and PCIe, 40 and 80 GB): A100 datasheet: BF16 312, TF32 156, FP32 19.5 (dense)
    (r"A100", {"bf16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    # L40S: L40S datasheet: BF16 733 sparse (362 dense), TF32 366 sparse, FP32 91.6
    (r"L40S", {"bf16": 362.05, "tf32": 183.0, "fp32": 91.6}),
    # L4: L4 datasheet: BF16 242 sparse, TF32 120 sparse, FP32 30.3
    (r"L4\b", {"bf16": 121.0, "tf32": 60.0, "fp32": 30.3}),
    # A10 (not the A10G, whose figures NVIDIA does not publish): A10 datasheet: BF16 125, TF32 62.5, FP32 31.2
    (r"A10\b(?!G)", {"bf16": 125.0, "tf32": 62.5, "fp32": 31.2}),
)


def peak_flops(device_name: str, precision: str) -> float | None:
    """The dense peak FLOP/s of the GPU `torch.cuda.get_device_name` calls `device_name` for
    `precision` ("bf16", "tf32" or "fp32"); None for a GPU not in the table."""
    if precision not in ("bf16", "tf32", "fp32"):
        raise ValueError(f"precision must be bf16, tf32 or fp32, got {precision!r}")
    for pattern, rates in PEAK_TFLOPS:
        if re.search(pattern, device_name):
            return rates[precision] * TERA
    return None


def matmul_precision(dtype: str) -> str:
    """The rate a run's matmuls get: bf16 under `--dtype bfloat16` (autocast on CUDA); for float32,
    TF32 tensor cores when torch allows them, else the plain float32 rate (torch's default)."""
    if dtype == "bfloat16":
        return "bf16"
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "fp32"


@dataclass(frozen=True)
class ModelFlops:
    """What a model's FLOPs per token depend on (see the module docstring)."""

    matmul_parameters: int  # N
    trainable_matmul_parameters: int  # N_t <= N: those the optimizer moves (full: N; LoRA: the adapter's)
    layers: int  # L
    attention_width: int  # A: query heads x head dim

    def forward(self, length: int) -> float:
        """FLOPs of one forward pass over a sequence of `length` tokens."""
        return length * (2.0 * self.matmul_parameters + 4.0 * self.layers * self.attention_width * length)

    def train(self, length: int) -> float:
        """FLOPs of a forward and backward pass over a sequence of `length` tokens."""
        n, n_t = self.matmul_parameters, self.trainable_matmul_parameters
        return length * (4.0 * n + 2.0 * n_t + 12.0 * self.layers * self.attention_width * length)


def model_flops(model: nn.Module, with_head: bool = True) -> ModelFlops:
    """`ModelFlops` of a Hugging Face causal LM (peft-wrapped or not) as loaded: N from its real
    parameters less the input embedding (and less the LM head when `with_head` is False: a critic's
    trunk); L and A from its config."""
    config = model.config
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    head_weight = head.weight if head is not None else None
    tied = head_weight is not None and head_weight is embedding
    skip = set() if tied else {id(embedding)}
    if not with_head and head_weight is not None:
        skip.add(id(head_weight))
    params = [p for p in model.parameters() if id(p) not in skip]
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return ModelFlops(
        matmul_parameters=sum(p.numel() for p in params),
        trainable_matmul_parameters=sum(p.numel() for p in params if p.requires_grad),
        layers=config.num_hidden_layers,
        attention_width=heads * head_dim,
    )


def frozen(m: ModelFlops) -> ModelFlops:
    """The same model with nothing trainable (a reference's cost, or a forward-only pass)."""
    return ModelFlops(m.matmul_parameters, 0, m.layers, m.attention_width)


def step_flops(
    lengths: Sequence[int],
    policy: ModelFlops,
    *,
    epochs: int = 1,
    old_logprobs_forward: bool = True,
    reference: ModelFlops | None = None,
    critic: ModelFlops | None = None,
) -> float:
    """A step's model FLOPs over rows of `lengths` real tokens: the policy trained `epochs` times,
    its old-logprob forward (if taken), the reference's forward, a critic's forward and `epochs`
    trainings."""
    total = 0.0
    for t in lengths:
        total += epochs * policy.train(t)
        if old_logprobs_forward:
            total += policy.forward(t)
        if reference is not None:
            total += reference.forward(t)
        if critic is not None:
            total += critic.forward(t) + epochs * critic.train(t)
    return total


@dataclass(frozen=True)
class FlopMeter:
    """A run's fixed FLOPs parameters; `metrics` turns one step's rows and seconds into `tflops`
    and, when the device's peak is known, `mfu`. `ranks` data-parallel ranks share the work."""

    policy: ModelFlops
    epochs: int
    old_logprobs_forward: bool
    reference: ModelFlops | None
    critic: ModelFlops | None
    peak: float | None  # FLOP/s of one device at the run's precision
    ranks: int = 1

    def metrics(self, lengths: Sequence[int], seconds: float) -> dict[str, float]:
        if seconds <= 0:
            return {}
        flops = step_flops(
            lengths,
            self.policy,
            epochs=self.epochs,
            old_logprobs_forward=self.old_logprobs_forward,
            reference=self.reference,
            critic=self.critic,
        )
        per_device = flops / seconds / self.ranks
        out = {"tflops": per_device / TERA}
        if self.peak:
            out["mfu"] = per_device / self.peak
        return out


def flop_meter(models, algo, config, device_name: str | None = None) -> FlopMeter | None:
    """The run's `FlopMeter` on CUDA; None on the CPU (see the module docstring). `device_name`
    overrides the policy's GPU name (tests, or a machine not in the table)."""
    from rlvr.trainers.device import model_device
    from rlvr.trainers.phases import update_is_on_policy

    device = model_device(models.policy)
    if device_name is None:
        if device.type != "cuda":
            return None
        device_name = torch.cuda.get_device_name(device)
    policy = model_flops(models.policy)
    if models.reference is not None:
        reference = frozen(model_flops(models.reference))
    elif models.reference_is_base:  # LoRA: the policy with its adapter off, about the base's cost
        reference = frozen(policy)
    else:
        reference = None
    return FlopMeter(
        policy=policy,
        epochs=config.epochs or algo.ppo_epochs,
        old_logprobs_forward=not update_is_on_policy(models, algo, config),
        reference=reference,
        critic=model_flops(models.critic.model, with_head=False) if models.critic is not None else None,
        peak=peak_flops(device_name, matmul_precision(config.dtype)),
        ranks=config.trainer_ranks,
    )


def row_lengths(attention_mask_BT: torch.Tensor) -> list[int]:
    """Each row's real (non-padding) tokens."""
    return [int(n) for n in attention_mask_BT.sum(1).tolist()]
