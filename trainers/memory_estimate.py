"""Peak memory of a training run, estimated from the model's config.json before anything loads
(`rlvr train ... --check`), and the CUDA default micro-batch token bound chosen from it
(`trainers.memory_plan` feeds it the run's files and device and applies that default).

Pure arithmetic: a `ModelShape` (read from config.json: nothing is loaded, torch is not imported)
and the run's settings (`MemoryInputs`) give a `MemoryEstimate`, in bytes per term. Notation: N
parameters of the policy, N_t of them trained (all, or LoRA's adapter), w the bytes of a weight
(4; 2 for `--dtype bfloat16` on the CPU, whose weights are bf16, `trainers.precision`), L layers,
h hidden size, kv = kv heads x head dim, i intermediate size, V vocabulary.

- weights: N x w (+ LoRA's adapter, float32: peft keeps adapters in float32), and on CUDA with
  bf16 the bf16 copy autocast caches of each trained weight during a forward: + 2 N_t.
- gradients: N_t x w (LoRA: the adapter's, 4 bytes).
- optimizer: AdamW's two float32 moments, 8 N_t; + 4 N_t for the float32 master weights of bf16
  weights on the CPU (`MasterWeightAdamW`).
- reference: a frozen copy, N x w, when the algorithm needs one (KL on, or a teacher: the
  teacher's own N); 0 with LoRA, whose reference is the base with the adapter off.
- critic: `--value-model critic` is a second causal LM that trains: N x (2w + 8 [+ 4]) like the
  policy's weights, gradients and optimizer (+ 2N of autocast's copies); a value head is (h + 1) x 16 bytes.
- activations: what autograd keeps for the backward of the largest micro-batch, per token per
  decoder layer `A = 8h + 2kv + 4i` elements (counted with saved-tensor hooks on a Qwen2 layer:
  the RMSNorms' inputs and normalised values, the attention's q, k, v and output, the MLP's gate,
  SiLU, up and product), at 4 bytes; on the CPU with bf16 weights 2 bytes plus 4h (the RMSNorms
  keep a float32 copy of their input). On CUDA the count is at 4 bytes also with `--dtype
  bfloat16`: measured on an H100, the ~285M model's bf16 peak (autocast) was the float32 one
  (23.8 and 23.0 GiB, `FACTS-gpu.md`). Plus 3h x 4 bytes a token for the final norm. The tokens: a
  packed micro-batch's `micro_batch_tokens`; a padded one of m episodes runs each group's prompt
  once (`trainers.policy`, prompt sharing: m/G prompts of P tokens and m completions of C) and
  gives each row its prompt's keys and values (m P 2kv per layer); with gradient checkpointing
  (no prompt sharing: m (P + C) tokens) only each layer's input is kept, h x 4 bytes per token
  per layer, plus one layer's A while it is recomputed. A critic's trunk runs the micro-batch
  again (padded, no sharing) and keeps its own activations.
- logits: per completion token of the micro-batch, V x (c + 4 + 12) bytes: the model's logits (c:
  2 under autocast or with bf16 weights, else 4), their float32 temperature-scaled copy that
  logsumexp keeps, and, when the backward starts (every activation still alive), three float32
  buffers of their size at once (the softmax of logsumexp's gradient, the gradients of the scaled
  copy and of the logits); + 8 V with the entropy in the graph (the log-softmax and its exp, kept
  for the backward), which a one-pass on-policy update computes. Measured on SmolLM2's 49,152-token
  vocabulary (float32, 2,048 tokens): a peak of 20.2 bytes a logit without the entropy and 28.2 with
  (the lm_head's gradient, counted under gradients, included); counting one gradient buffer, as
  before, put the 135M model's estimate at 0.80 of its measured peak (issue 43).
- heap (CPU, LoRA): glibc's malloc keeps the adapter's dead temporaries resident. peft's forward of
  an adapted linear makes three tensors of its output's size (the base layer's output, lora_B's,
  and its scaled copy) and keeps one (their sum); the two that die leave holes in the heap that the
  small tensors the adapter saves (lora_A's outputs, rank r) pin apart, so later, larger outputs do
  not fit them and the heap grows instead. Counted as both dead temporaries of every adapted linear,
  2 x (sum of their out features) x c per token per layer (one layer with gradient checkpointing,
  whose forward saves nothing between them); measured after a grad-enabled forward, glibc's default
  against the mmap threshold pinned (`MALLOC_MMAP_THRESHOLD_`, where freed blocks go back to the
  kernel): 0.89 of it on SmolLM2-135M (32 x 110 tokens, r16 all-linear: 3.64 GiB kept), 0.68 on the
  ~30M `small` model (128 x 110 tokens: 3.47 GiB); without LoRA glibc kept 0.08 GiB. Without it the
  135M model's LoRA run peaked at 1.42x the estimate (issue 43). On CUDA the caching allocator's
  fragmentation is `CUDA_MARGIN`'s.
- sampler: what its backend declares in the sampler registry (`trainers.samplers.registry`,
  `SamplerMemory`). vLLM on CUDA takes its share of the device (`vllm_gpu_memory` x total); vLLM on
  the CPU its copy of the weights and its KV cache (`kv_cache_bytes`); the HF sampler shares the
  policy and needs its KV cache, episodes x (P + C) x L x 2kv x c, and is not alive together
  with the training activations: the total counts the larger of the two.

The total is the sum (an upper bound: gradients grow while the activations are freed in the
backward). Not known before a run: the length of an environment's replies between turns
(`trainers.memory_plan.episode_tokens` counts each as long as the opening prompt) and the allocator's fragmentation.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from rlvr.errors import RlvrError
from rlvr.trainers.samplers.registry import backend

GIB = 2**30
LORA_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")  # all-linear: not lm_head
CUDA_MARGIN = 0.15  # of the free memory left unplanned: the caching allocator's fragmentation, CUDA's workspaces
TOKEN_QUANTUM = 64  # the CUDA default bound is a multiple of this many tokens


class MemoryEstimateError(RlvrError, ValueError):
    """A config.json whose shape cannot be read (a missing or non-positive size)."""


def _adapted(targets: str) -> tuple[str, ...]:
    """The linears a `lora_targets` setting adapts."""
    return LORA_LINEARS if targets == "all-linear" else tuple(t.strip() for t in targets.split(","))


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a decoder-only transformer (Qwen2/Llama layout: q/k/v/o projections, a SwiGLU
    MLP, two RMSNorms a layer) that decide its memory."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool = False
    head_dim: int | None = None  # None: hidden // heads
    qkv_bias: bool = True  # Qwen2's q, k and v projections have biases

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ModelShape:
        text = config.get("text_config") or config
        try:
            heads = int(text["num_attention_heads"])
            shape = cls(
                hidden=int(text["hidden_size"]),
                layers=int(text["num_hidden_layers"]),
                heads=heads,
                kv_heads=int(text.get("num_key_value_heads") or heads),
                intermediate=int(text["intermediate_size"]),
                vocab=int(text["vocab_size"]),
                tied=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
                head_dim=text.get("head_dim"),
                qkv_bias=text.get("model_type", config.get("model_type")) == "qwen2"
                or bool(text.get("attention_bias", False)),
            )
        except KeyError as exc:
            raise MemoryEstimateError(
                f"config.json has no {exc.args[0]} (the estimate reads a Qwen2/Llama-style decoder's sizes)"
            ) from None
        except (TypeError, ValueError) as exc:
            raise MemoryEstimateError(f"config.json has a size that is not a number: {exc}") from None
        if min(shape.hidden, shape.layers, shape.heads, shape.kv_heads, shape.intermediate, shape.vocab) < 1:
            raise MemoryEstimateError(f"config.json has a size < 1: {shape}")
        return shape

    @classmethod
    def read(cls, model_dir: str | Path) -> ModelShape:
        path = Path(model_dir) / "config.json"
        try:
            return cls.from_config(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MemoryEstimateError(f"{path} is not readable JSON ({exc})") from None

    @property
    def q_dim(self) -> int:
        return self.heads * (self.head_dim or self.hidden // self.heads)

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * (self.head_dim or self.hidden // self.heads)

    def linears(self) -> dict[str, tuple[int, int]]:
        """Each decoder layer's linear layers: name -> (in features, out features)."""
        h, q, kv, i = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        return {
            "q_proj": (h, q),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (q, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    @property
    def parameters(self) -> int:
        """Embedding V h, per layer its linears (+ q/k/v biases) and two norms, the final norm, and
        the output layer V h unless tied to the embedding."""
        layer = sum(a * b for a, b in self.linears().values()) + 2 * self.hidden
        if self.qkv_bias:
            layer += self.q_dim + 2 * self.kv_dim
        head = 0 if self.tied else self.vocab * self.hidden
        return self.vocab * self.hidden + self.layers * layer + self.hidden + head

    def lora_parameters(self, rank: int, targets: str = "all-linear") -> int:
        """A rank-r adapter on each targeted linear: r (in + out) parameters (A and B)."""
        if rank <= 0:
            return 0
        names = _adapted(targets)
        return self.layers * sum(rank * (a + b) for n, (a, b) in self.linears().items() if n in names)

    def lora_outputs(self, targets: str = "all-linear") -> int:
        """The out features of a decoder layer's adapted linears, summed."""
        names = _adapted(targets)
        return sum(out for n, (_, out) in self.linears().items() if n in names)

    def activation_elements(self) -> int:
        """Elements autograd keeps per token per decoder layer, A = 8h + 2kv + 4i (module docstring)."""
        return 8 * self.hidden + 2 * self.kv_dim + 4 * self.intermediate


@dataclass(frozen=True)
class MemoryInputs:
    """A run's settings that decide its memory. Token counts are per episode: `prompt_tokens` the
    longest opening prompt, `completion_tokens` the generation budget (max_tokens)."""

    shape: ModelShape
    device: str = "cpu"  # "cpu" or "cuda"
    dtype: str = "float32"
    lora_rank: int = 0
    lora_targets: str = "all-linear"
    gradient_checkpointing: bool = False
    value_model: str = "none"  # none, head, critic
    reference: bool = False  # a frozen reference copy (KL on); with LoRA the base, no copy
    teacher: ModelShape | None = None
    episodes: int = 128  # the batch: tasks_per_step x group_size
    group_size: int = 8
    micro_batch: int | None = None  # episodes per micro-batch; None: the whole batch (or minibatch)
    micro_batch_tokens: int | None = None  # packed micro-batches of at most this many tokens
    prompt_tokens: int = 64
    completion_tokens: int = 32
    entropy: bool = True  # the entropy in the update's graph (a one-pass on-policy update computes it)
    sampler: str = "hf"  # a backend of the sampler registry, whose `SamplerMemory` is counted
    vllm_gpu_memory: float = 0.3
    device_bytes: int | None = None  # the device's total memory (CUDA: vLLM's share is of this)
    sampler_kv_bytes: int | None = None  # the cache a sampler sizes itself off a GPU (`kv_cache`); None: formula


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per term (module docstring) and where; `total` the peak the run is expected to reach."""

    device: str
    weights: int
    gradients: int
    optimizer: int
    reference: int
    critic: int
    activations: int
    logits: int
    sampler: int
    sampler_overlaps: bool  # False: the sampler is not alive with the activations (HF); the total counts the larger
    heap: int = 0  # glibc's retained temporaries of LoRA's forward (CPU)

    TERMS = ("weights", "gradients", "optimizer", "reference", "critic", "activations", "heap", "logits", "sampler")

    @property
    def fixed(self) -> int:
        """What does not depend on the micro-batch."""
        return self.weights + self.gradients + self.optimizer + self.reference + self.critic

    @property
    def total(self) -> int:
        step = self.activations + self.heap + self.logits
        if self.sampler_overlaps:
            return self.fixed + step + self.sampler
        return self.fixed + max(step, self.sampler)

    def as_dict(self) -> dict[str, Any]:
        """GiB per term and the total (rounded to 0.01), for `--check`'s JSON."""
        gib = {name: round(getattr(self, name) / GIB, 2) for name in self.TERMS}
        return {"device": self.device, "gib": gib, "total_gib": round(self.total / GIB, 2)}

    def table(self, device: str | None = None) -> str:
        """A small table: per term and the total, in GiB (MiB below 1 GiB), and the device."""
        scale, unit = (GIB, "GiB") if self.total >= GIB else (2**20, "MiB")
        rows = [f"{name:<12}{getattr(self, name) / scale:>9.2f}" for name in self.TERMS]
        note = "" if self.sampler_overlaps else "  (the sampler and the activations: the larger counts)"
        return "\n".join(
            [
                f"estimated peak memory on {device or self.device} ({unit})",
                *rows,
                f"{'total':<12}{self.total / scale:>9.2f}{note}",
            ]
        )


def _bytes(inputs: MemoryInputs) -> tuple[int, int, int]:
    """(w, c, autocast): bytes of a stored weight, of a computed activation/logit, and whether the
    forwards run under CUDA's bf16 autocast (float32 weights, `trainers.precision`)."""
    bf16 = inputs.dtype == "bfloat16"
    cpu_bf16 = bf16 and inputs.device == "cpu"
    return (2 if cpu_bf16 else 4), (2 if bf16 else 4), bf16 and inputs.device != "cpu"


def activation_bytes_per_token(inputs: MemoryInputs) -> int:
    """Bytes autograd keeps per token per decoder layer (module docstring)."""
    shape = inputs.shape
    if inputs.device == "cpu" and inputs.dtype == "bfloat16":
        return 2 * shape.activation_elements() + 4 * shape.hidden
    return 4 * shape.activation_elements()


def _micro_tokens(inputs: MemoryInputs) -> tuple[int, int, int]:
    """(tokens the policy's forward runs, completion tokens, extra bytes per layer) of the
    largest micro-batch."""
    p, c = inputs.prompt_tokens, inputs.completion_tokens
    if inputs.micro_batch_tokens is not None:
        tokens = max(inputs.micro_batch_tokens, p + c)  # a longer episode gets a forward of its own
        tokens = min(tokens, inputs.episodes * (p + c))
        return tokens, tokens * c // (p + c), 0
    m = min(inputs.micro_batch or inputs.episodes, inputs.episodes)
    if inputs.gradient_checkpointing or inputs.group_size < 2:
        return m * (p + c), m * c, 0
    prompts = math.ceil(m / inputs.group_size)
    kept = 2 if inputs.device == "cpu" and inputs.dtype == "bfloat16" else 4  # as the activations' bytes
    return prompts * p + m * c, m * c, m * p * 2 * inputs.shape.kv_dim * kept  # each row's copy of its prompt's k, v


def _trunk_activations(inputs: MemoryInputs, tokens: int, extra_per_layer: int) -> int:
    shape = inputs.shape
    per_layer = activation_bytes_per_token(inputs)
    final = 3 * shape.hidden * 4 * tokens
    if inputs.gradient_checkpointing:
        return tokens * shape.layers * shape.hidden * 4 + tokens * per_layer + final
    return tokens * shape.layers * per_layer + shape.layers * extra_per_layer + final


def logit_bytes_per_token(inputs: MemoryInputs) -> int:
    _, cb, _ = _bytes(inputs)
    return inputs.shape.vocab * (cb + 4 + 12 + (8 if inputs.entropy else 0))


def estimate(inputs: MemoryInputs) -> MemoryEstimate:
    """The estimate of a run with `inputs` (formulas in the module docstring)."""
    shape = inputs.shape
    w, cb, autocast = _bytes(inputs)
    n = shape.parameters
    lora = shape.lora_parameters(inputs.lora_rank, inputs.lora_targets)
    trained = lora or n
    master = 4 if (inputs.device == "cpu" and inputs.dtype == "bfloat16" and not lora) else 0
    grad_bytes = 4 if lora else w
    weights = n * w + lora * 4 + (2 * trained if autocast else 0)
    gradients = trained * grad_bytes
    optimizer = trained * (8 + master)
    reference = 0
    if inputs.teacher is not None:
        reference = inputs.teacher.parameters * w
    elif inputs.reference and not lora:
        reference = n * w
    critic = 0
    tokens, completion, extra = _micro_tokens(inputs)
    activations = _trunk_activations(inputs, tokens, extra)
    if inputs.value_model == "critic":
        critic = n * (2 * w + 8 + (4 if w == 2 else 0) + (2 if autocast else 0)) + (shape.hidden + 1) * 16
        p, c = inputs.prompt_tokens, inputs.completion_tokens
        m = min(inputs.micro_batch or inputs.episodes, inputs.episodes)
        critic_tokens = tokens if inputs.micro_batch_tokens is not None else m * (p + c)
        activations += _trunk_activations(replace(inputs, gradient_checkpointing=False), critic_tokens, 0)
    elif inputs.value_model == "head":
        critic = (shape.hidden + 1) * 16
    logits = completion * logit_bytes_per_token(inputs)
    sampler, overlaps = _sampler(inputs, n, cb)
    heap = 0
    if lora and inputs.device == "cpu":
        layers = 1 if inputs.gradient_checkpointing else shape.layers
        heap = 2 * shape.lora_outputs(inputs.lora_targets) * cb * tokens * layers  # cb: an activation's bytes
    return MemoryEstimate(
        device=inputs.device,
        weights=weights,
        gradients=gradients,
        optimizer=optimizer,
        reference=reference,
        critic=critic,
        activations=activations,
        logits=logits,
        sampler=sampler,
        sampler_overlaps=overlaps,
        heap=heap,
    )


def _sampler(inputs: MemoryInputs, n: int, cb: int) -> tuple[int, bool]:
    """The sampler's bytes as its backend declares them (`SamplerMemory`), and whether they are held
    during the update."""
    memory = backend(inputs.sampler).memory
    shape, seq = inputs.shape, inputs.prompt_tokens + inputs.completion_tokens
    kv = inputs.episodes * seq * shape.layers * 2 * shape.kv_dim * cb
    if memory.gpu_share and inputs.device != "cpu":
        if inputs.device_bytes is None:
            raise MemoryEstimateError(
                f"the {inputs.sampler} sampler on CUDA takes a share of the device's memory: device_bytes is needed"
            )
        return int(inputs.vllm_gpu_memory * inputs.device_bytes), memory.held_in_update
    if memory.kv_cache:  # an engine that sizes its own cache (`trainers.memory_plan` asks it)
        cache = inputs.sampler_kv_bytes if inputs.sampler_kv_bytes is not None else kv
    else:
        cache = kv + inputs.episodes * shape.vocab * 4 * 3  # + a step's logits, probabilities, sampling
    return (n * cb if memory.own_weights else 0) + cache, memory.held_in_update


def cuda_micro_batch_tokens(inputs: MemoryInputs, free_bytes: int, margin: float = CUDA_MARGIN) -> int:
    """The CUDA default bound on a packed micro-batch's tokens: the most tokens whose activations
    and logits fit in `free_bytes` x (1 - margin) beside everything else the run holds (the
    estimate's fixed terms, and a vLLM sampler's share), a multiple of `TOKEN_QUANTUM`, at least one
    episode (prompt + completion: a longer one runs alone anyway) and at most the whole batch."""
    p, c = inputs.prompt_tokens, inputs.completion_tokens
    base = estimate(replace(inputs, micro_batch_tokens=p + c))
    one = estimate(replace(inputs, micro_batch_tokens=2 * (p + c)))
    per_token = (one.activations + one.logits - base.activations - base.logits) / (p + c)
    floor = base.activations + base.logits - per_token * (p + c)  # the part of a step that is not per token
    other = base.fixed + (base.sampler if base.sampler_overlaps else 0)
    budget = free_bytes * (1 - margin) - other - floor
    tokens = int(budget // per_token) // TOKEN_QUANTUM * TOKEN_QUANTUM if budget > 0 else 0
    return min(max(tokens, p + c), inputs.episodes * (p + c))


def fits(inputs: MemoryInputs, free_bytes: int, margin: float = CUDA_MARGIN) -> bool:
    """Whether the estimate's total fits in `free_bytes` x (1 - margin)."""
    return estimate(inputs).total <= free_bytes * (1 - margin)


def inputs_for(config: Any, algo: Any, shape: ModelShape, prompt_tokens: int, **extra: Any) -> MemoryInputs:
    """`MemoryInputs` of a `TrainConfig` and its resolved algorithm (`needs_reference`,
    `needs_value_head`, the one-pass update that computes the entropy in its graph)."""
    kind = config.value_model if config.value_model != "auto" else ("head" if algo.needs_value_head else "none")
    if not algo.needs_value_head:
        kind = "none"
    one_pass = (  # trainers.phases.update_is_on_policy, without the models
        (config.epochs or algo.ppo_epochs) == 1
        and config.num_minibatches == 1
        and not config.decoupled
        and not algo.kl_in_reward
        and not algo.needs_teacher
        and kind == "none"
    )
    known = {f.name for f in fields(MemoryInputs)}
    return MemoryInputs(
        shape=shape,
        dtype=config.dtype,
        lora_rank=config.lora_rank,
        lora_targets=config.lora_targets,
        gradient_checkpointing=config.gradient_checkpointing,
        value_model=kind,
        reference=bool(algo.needs_reference),
        episodes=config.batch_size,
        group_size=config.group_size,
        micro_batch=config.micro_batch,
        micro_batch_tokens=config.micro_batch_tokens,
        prompt_tokens=prompt_tokens,
        completion_tokens=config.max_tokens,
        entropy=one_pass or algo.entropy_coef > 0,
        sampler=config.sampler,
        vllm_gpu_memory=config.vllm_gpu_memory,
        **{k: v for k, v in extra.items() if k in known},
    )
