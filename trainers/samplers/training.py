"""The `Trainer`'s sampler, started from its `TrainConfig`: the spec of the run's backend
(`training_spec`), and a `TrainerSampler` holding the policy's current weights (`start_sampler`):
the backend in this process, or (`ray`) the Ray rollout workers, each building the same spec."""

from __future__ import annotations

from pathlib import Path

from rlvr.trainers.config import TrainConfig
from rlvr.trainers.model_set import Models
from rlvr.trainers.samplers.factory import build_sampler
from rlvr.trainers.samplers.local import local_sampler
from rlvr.trainers.samplers.protocol import SamplerSpec, TrainerSampler
from rlvr.trainers.samplers.sizing import max_model_len, sequence_tokens


def training_spec(config: TrainConfig, models: Models, resume_from: Path | None) -> SamplerSpec:
    """The run's backend, started from the checkpoint resumed from (so that it starts in sync), or
    with LoRA from the base (a checkpoint holds only the adapter: `start_sampler` loads the merged
    weights). One step's episodes run at once (on CPU the KV cache is sized to them; evaluation
    batches run in waves of that size), in the training dtype (the sampler/trainer logprob gap is
    then about rounding, not dtype). No chunked prefill: vLLM 0.32 on CPU crashes ("CPU Generator
    does not use offset") when a seeded request's prefill is split across engine steps, which large
    evaluation batches do."""
    length = max_model_len(models.policy)
    start = models.path if models.lora else resume_from or models.path
    return SamplerSpec(
        backend=config.sampler,
        model=str(start),
        tokenizer=str(models.path),
        seed=config.seed,
        max_model_len=length,
        dtype=config.dtype,
        max_num_seqs=config.tasks_per_step * config.group_size,
        seq_tokens=sequence_tokens(config, models.tokenizer, length),
        gpu_memory=config.vllm_gpu_memory,
        chunked_prefill=False,
    )


def start_sampler(config: TrainConfig, models: Models, resume_from: Path | None, version: int) -> TrainerSampler:
    """The trainer's sampler holding the policy's weights as `version` (the updates done): a backend
    in this process (hf on the live policy itself), or the Ray rollout pool (`config.ray`)."""
    spec = training_spec(config, models, resume_from)
    if config.ray:
        from rlvr.trainers.samplers.ray_pool import start_rollout_pool

        return start_rollout_pool(
            spec,
            models.sampler_weights(),
            version,
            workers=config.rollout_workers,
            address=config.ray_address,
            threads=config.threads,
            verifier_workers=config.verifier_workers,
        )
    backend = build_sampler(spec, version, policy=models.policy)
    if models.lora and resume_from is not None:  # started from the base: the checkpoint's adapter merged in
        backend.update_weights(models.sampler_weights(), version)
    return local_sampler(backend)
