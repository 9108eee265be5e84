"""What a `Trainer` is built from: the models (policy, frozen reference, value head or critic),
the optimizer, and the sampler, each made from a `TrainConfig`."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch
from torch import nn

from rlvr.envs.sampler import RequestSampler, Sample, SamplingSettings
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.producer import ProducerStopped, StagedWeights
from rlvr.trainers.policy import Critic, ValueHead

CRITIC_DIR = "critic"


@dataclass
class Models:
    path: Path  # the base model directory: tokenizer, reference weights
    tokenizer: Any
    policy: nn.Module
    reference: nn.Module | None = None
    value_head: ValueHead | None = None
    critic: Critic | None = None
    # LoRA: the reference is the base model, i.e. the policy with its adapter off (no second copy)
    reference_is_base: bool = False

    @property
    def pad_token_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    @property
    def wants_values(self) -> bool:
        return self.value_head is not None or self.critic is not None

    def policy_parameters(self) -> list[nn.Parameter]:
        """What the policy's optimizer group and gradient clipping cover (a value head shares the trunk)."""
        extra = list(self.value_head.parameters()) if self.value_head is not None else []
        return [p for p in self.policy.parameters() if p.requires_grad] + extra  # LoRA: the adapter's

    @property
    def lora(self) -> bool:
        from rlvr.trainers.lora import is_lora

        return is_lora(self.policy)

    @contextlib.contextmanager
    def reference_model(self) -> Iterator[nn.Module | None]:
        """The model whose logprobs are the reference's, for the block: the reference (or teacher),
        the policy with its LoRA adapter off, or None without one."""
        if self.reference is None and self.reference_is_base:
            from rlvr.trainers.lora import adapter_off

            with adapter_off(self.policy) as base:
                yield base
        else:
            yield self.reference

    def sampler_weights(self) -> Iterable[tuple[str, torch.Tensor]]:
        """(name, tensor) pairs for the sampler's in-place load, under the base model's names: the
        policy's parameters, or with LoRA the adapted blocks' merged weights (`trainers.lora`)."""
        if self.lora:
            from rlvr.trainers.lora import merged_weights

            return merged_weights(self.policy)
        return ((name, p.detach()) for name, p in self.policy.named_parameters())

    def save(self, directory: Path) -> None:
        """A Hugging Face directory that `transformers` and vLLM load as it is; with LoRA the
        adapter alone (adapter_model.safetensors, adapter_config.json naming its base)."""
        if self.lora:
            from rlvr.trainers.lora import save

            save(self.policy, directory)
        else:
            self.policy.save_pretrained(directory, safe_serialization=True)
        self.tokenizer.save_pretrained(directory)
        if self.critic is not None:
            self.critic.model.save_pretrained(directory / CRITIC_DIR, safe_serialization=True)

    def extra_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        if self.value_head is not None:
            state["value_head"] = self.value_head.state_dict()
        if self.critic is not None:
            state["critic_head"] = self.critic.head.state_dict()
        return state

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if self.value_head is not None:
            self.value_head.load_state_dict(state["value_head"])
        if self.critic is not None:
            self.critic.head.load_state_dict(state["critic_head"])


def build_models(config: TrainConfig, needs_reference: bool, needs_values: bool, resume_from: Path | None) -> Models:
    """Policy from the checkpoint (or the base model), reference from the base model when KL is
    on (`needs_reference`) or from `config.teacher` when set (distillation), and a value head or
    critic when the algorithm needs values."""
    from rlvr.trainers import activation_checkpointing, precision
    from rlvr.trainers.device import resolve_device
    from rlvr.trainers.models import load_causal_lm, load_tokenizer, resolve_model

    device = resolve_device(config.device)

    def load(name_or_path: Path | str) -> nn.Module:
        # on the training device, in the training dtype (bf16 weights on CPU with --dtype bfloat16)
        return _eval(load_causal_lm(name_or_path, dtype=precision.weight_dtype(config.dtype, device.type))).to(device)

    path = resolve_model(config.model)
    policy = load(path if config.lora_rank else resume_from or path)  # LoRA: the base
    if config.gradient_checkpointing:
        activation_checkpointing.enable(policy)
    if config.lora_rank:  # only the adapter trains (a resumed run's, from its checkpoint)
        from rlvr.trainers import lora

        policy = lora.wrap(policy, path, config.lora_rank, config.lora_alpha, config.lora_targets, resume_from)
    models = Models(path=path, tokenizer=load_tokenizer(path), policy=policy)
    models.reference_is_base = bool(needs_reference and config.lora_rank and not config.teacher)
    # on-policy distillation: the teacher takes the reference model's slot
    if needs_reference and not models.reference_is_base:
        reference_path = resolve_model(config.teacher) if config.teacher else path
        models.reference = load(reference_path).requires_grad_(False)
    kind = config.value_model if config.value_model != "auto" else ("head" if needs_values else "none")
    if needs_values and kind == "head":
        models.value_head = ValueHead(policy.config.hidden_size).to(device)
    elif needs_values and kind == "critic":
        critic_path = resume_from / CRITIC_DIR if resume_from is not None else path
        models.critic = Critic(load(critic_path)).to(device)
    for model in (models.policy, models.reference, models.critic.model if models.critic else None):
        if model is not None:
            precision.prepare_model(model, config.dtype)  # autocast on CUDA
    return models


def _eval(model: nn.Module) -> nn.Module:
    return model.eval()  # dropout off, see trainers.loop


def build_optimizer(config: TrainConfig, models: Models) -> torch.optim.Optimizer:
    groups = [{"params": [p for p in models.policy.parameters() if p.requires_grad], "lr": config.lr}]
    value_params = list(models.value_head.parameters()) if models.value_head is not None else []
    value_params += list(models.critic.parameters()) if models.critic is not None else []
    if value_params:
        groups.append({"params": value_params, "lr": config.value_lr or config.lr})
    from rlvr.trainers.precision import adamw

    # float32 master weights when the model is bf16 (`trainers.precision`)
    return adamw(groups, lr=config.lr, betas=config.adam_betas, weight_decay=config.weight_decay)


def build_sampler(config: TrainConfig, models: Models, resume_from: Path | None):
    """vLLM in this process, loading the checkpoint we resume from (so it starts in sync), or
    Hugging Face `generate` on the live policy object."""
    if config.sampler == "hf":
        from rlvr.trainers.samplers import HFSampler

        return HFSampler(models.policy, models.tokenizer)
    model_dir = sampler_model_dir(models, resume_from)
    sampler = vllm_spec(config, models, model_dir).build()
    sampler.model_dir = model_dir  # a merged adapter's temporary directory lives as long as the sampler
    if models.lora and resume_from is not None:
        sampler.update_weights(models.sampler_weights())
    return sampler


def sampler_model_dir(models: Models, resume_from: Path | None) -> Any:
    """The directory vLLM starts from (a `servable_dir`): the checkpoint resumed from, or with LoRA
    the base (a checkpoint holds only the adapter; the merged weights are loaded after the start)."""
    from rlvr.trainers.models import servable_dir

    return servable_dir(models.path if models.lora else resume_from or models.path)


@dataclass(frozen=True)
class VLLMSpec:
    """How to start the run's vLLM sampler: plain data, so that a Ray rollout worker can start its own."""

    model_dir: str
    seed: int
    max_model_len: int
    dtype: str
    max_num_seqs: int
    seq_tokens: int
    gpu_memory: float

    def build(self) -> Any:
        try:
            from rlvr.trainers.samplers import VLLMSampler
        except ImportError as exc:
            raise ConfigError(f"the vllm sampler needs vLLM ({exc}); install it or use --sampler hf") from None
        # No chunked prefill: vLLM 0.32 on CPU crashes ("CPU Generator does not use offset") when a
        # seeded request's prefill is split across engine steps, which large evaluation batches do.
        # One step's episodes run at once, and on CPU the KV cache is sized to them (evaluation
        # batches run in waves of that size). Sampling in the training dtype keeps the
        # sampler/trainer logprob gap about rounding, not dtype. On a GPU the engine shares it
        # with the trainer's models: it takes only its share (vLLM's own default, 0.9, would
        # leave the trainer nothing); vLLM-CPU ignores the setting.
        return VLLMSampler(self.model_dir, seed=self.seed, max_model_len=self.max_model_len, dtype=self.dtype,
                           max_num_seqs=self.max_num_seqs, enable_chunked_prefill=False, seq_tokens=self.seq_tokens,
                           gpu_memory_utilization=self.gpu_memory)


@dataclass(frozen=True)
class HFSpec:
    """How a Ray rollout worker starts a Hugging Face sampler (`--ray --sampler hf`): on its own
    copy of the policy, which takes the trainer's weights at each sync."""

    model_dir: str  # the base model: the pool loads the current weights into it before any rollout

    def build(self) -> Any:
        from rlvr.trainers.models import load_causal_lm, load_tokenizer
        from rlvr.trainers.samplers import HFCopySampler

        return HFCopySampler(_eval(load_causal_lm(self.model_dir)), load_tokenizer(self.model_dir))


def vllm_spec(config: TrainConfig, models: Models, model_dir: Any) -> VLLMSpec:
    length = max_model_len(models)
    return VLLMSpec(model_dir=str(model_dir), seed=config.seed, max_model_len=length, dtype=config.dtype,
                    max_num_seqs=config.tasks_per_step * config.group_size,
                    seq_tokens=sequence_tokens(config, models.tokenizer, length), gpu_memory=config.vllm_gpu_memory)


def build_ray_pool(config: TrainConfig, models: Models, resume_from: Path | None, version: int) -> Any:
    """Ray rollout workers (`trainers.ray_rollout`) in place of the local sampler, each with its
    own vLLM engine (or, `sampler` hf, its own copy of the model), holding the policy's current
    weights as `version` (a resumed run's, a LoRA adapter's merged in)."""
    try:
        from rlvr.trainers.ray_rollout import RayRolloutPool, start_ray
        import ray  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"--ray needs Ray ({exc}): pip install 'rlvr[ray]'") from None
    start_ray(config.ray_address)  # before the verifier workers, which join it
    verifier = None
    if config.verifier_workers:
        from rlvr.sandbox import RaySandbox

        verifier = RaySandbox(config.verifier_workers)
    model_dir = sampler_model_dir(models, resume_from)
    spec = vllm_spec(config, models, model_dir) if config.sampler == "vllm" else HFSpec(str(models.path))
    pool = RayRolloutPool(spec, str(models.path), config.rollout_workers,
                          address=config.ray_address, threads=config.threads, verifier=verifier)
    pool.model_dir = model_dir  # as long as the pool: the workers started from it
    pool.update_weights(models.sampler_weights(), version)
    return pool


def build_trainer_ranks(config: TrainConfig, algo: Any, models: Models, optimizer: torch.optim.Optimizer,
                        resume_from: Path | None) -> Any:
    """Data-parallel ranks 1 .. N-1 on Ray (`trainers.ray_trainer`), holding this process's
    weights and optimizer state; None for one rank."""
    if config.trainer_ranks < 2:
        return None
    try:
        from rlvr.trainers.ray_trainer import RayTrainerRanks
        import ray  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"--trainer-ranks needs Ray ({exc}): pip install 'rlvr[ray]'") from None
    return RayTrainerRanks(config.to_dict(), algo, models, optimizer, config.trainer_ranks, resume_from,
                           address=config.ray_address)


PROBE_TASKS = 64  # opening prompts measured to size the sampler's KV cache


def sequence_tokens(config: TrainConfig, tokenizer: Any, max_len: int) -> int:
    """Tokens a sequence needs in the sampler's KV cache: for a single-step environment twice the
    longest opening prompt of `PROBE_TASKS` tasks (room for longer ones not drawn) plus
    `max_tokens`; for a multi-turn one, whose context grows turn by turn, the whole `max_len`.
    A sequence longer than this still runs, with fewer beside it."""
    from rlvr.envs import make
    from rlvr.envs.chat_template import template_ids

    env = make(config.env, disable_env_checker=True, **config.env_args)
    try:
        if getattr(env.unwrapped, "kind", None) != "single-step":
            return max_len
        longest = max(len(template_ids(tokenizer, env.reset(seed=s)[0], add_generation_prompt=True))
                      for s in range(PROBE_TASKS))
    finally:
        env.close()
    return min(max_len, 2 * longest + config.max_tokens)


def max_model_len(models: Models) -> int:
    """Context length for the sampler and for multi-turn rollouts: the model's, capped."""
    return min(int(getattr(models.policy.config, "max_position_embeddings", 4096)), 4096)


def timed(inner: Any) -> "TimedSampler":
    """`inner` wrapped to count its sampling seconds, keeping its request-level methods if it has them."""
    return TimedRequestSampler(inner) if isinstance(inner, RequestSampler) else TimedSampler(inner)


class TimedSampler:
    """Wraps the trainer's sampler: counts the seconds spent in `generate` (the rest of a rollout
    is scoring), and loads staged weights (`staged`, asynchronous RL) in whichever thread drives
    the engine, just before its next call. `stop_requested()` true there ends a rollout early
    (`ProducerStopped`): the run is closing."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.seconds = 0.0
        self.staged = StagedWeights()
        self.stop_requested: Callable[[], bool] = lambda: False

    def reset_clock(self) -> None:
        self.seconds = 0.0

    def start_producing(self, stop_requested: Callable[[], bool]) -> None:
        """A producer thread drives the engine from now on: weights change between engine steps, in
        the middle of samples, so each token's version is streamed; `stop_requested` ends a rollout."""
        self.inner.track_versions = True
        self.stop_requested = stop_requested

    def stage(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> None:
        """Weights for the producer to load before its next engine step (asynchronous RL)."""
        self.staged.stage(named_tensors, version)

    @contextlib.contextmanager
    def _clocked(self) -> Iterator[None]:
        """Counts the block's seconds as sampling."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - t0

    def _before_engine(self) -> None:
        if self.stop_requested():
            raise ProducerStopped()
        staged = self.staged.take()
        if staged is not None:
            self.update_weights(staged.tensors, staged.version)

    def generate(self, prompt_token_ids: Sequence[Sequence[int]], n: int, sampling: SamplingSettings) -> list[list[Sample]]:
        self._before_engine()
        with self._clocked():
            return self.inner.generate(prompt_token_ids, n, sampling)

    @property
    def max_model_len(self) -> int | None:
        """The rollout ends episodes before this (vLLM raises past it); None for no limit."""
        return getattr(self.inner, "max_model_len", None)

    @property
    def version(self) -> int | None:
        """The policy version of the weights the sampler holds (None if it does not track it)."""
        return getattr(self.inner, "version", None)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> None:
        """Load weights now (the HF sampler shares the policy: nothing to load) as policy `version`."""
        update = getattr(self.inner, "update_weights", None)
        if update is not None:
            update(named_tensors)
        if hasattr(self.inner, "version"):
            self.inner.version = version


class TimedRequestSampler(TimedSampler):
    """A `TimedSampler` of a `RequestSampler`: the seconds of `submit` (the engine's processing of
    a request) and of `poll` (its steps) count as sampling; environment steps run in other threads."""

    def submit(self, prompt_token_ids: Sequence[int], n: int, sampling: SamplingSettings) -> str:
        with self._clocked():
            return self.inner.submit(prompt_token_ids, n, sampling)

    def poll(self) -> list[tuple[str, list[Sample]]]:
        self._before_engine()
        with self._clocked():
            return self.inner.poll()

    def unfinished(self) -> int:
        return self.inner.unfinished()

    def cancel(self) -> None:
        self.inner.cancel()
