"""The Python API's own parts, for a notebook or a script: `Trainer` (the training loop's, quiet by
default as `rlvr train` is) and `evaluate` (what `rlvr eval` measures, returned as a typed
`EvalResult`; nothing is written to disk).

Quiet by default: `Trainer(config)` calls `trainers.quiet.configure(config.verbose)` and
`evaluate(..., verbose=False)` calls `configure(verbose)`, exactly what the commands call, so a
notebook shows rlvr's own lines, not the libraries' warnings and loading bars. What that changes,
process-wide and as the commands do: the environment variables of `trainers.quiet.QUIET_ENV` (only
those the user has not set), the levels of the `QUIET_LOGGERS` loggers (vllm, transformers, two of
torch's) raised to ERROR, warnings filters for two known library messages, and transformers'
verbosity and progress bars. `verbose=True` puts the variables and logger levels back.

`evaluate` samples as `rlvr eval` does, episode for episode: the same tasks (every problem of an
environment with a fixed list once, in order; otherwise reset seeds, by default the held-out seeds
training evaluates on: `envs.eval_tasks`), chunks of `envs.eval_tasks.default_chunk` tasks, each
seeded as the command seeds it, and the same summary (`envs.evaluate.summarize`), so the same
settings give the command's numbers."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.envs.episode import Episode
from rlvr.envs.eval_sampling import temperature_for
from rlvr.envs.eval_tasks import default_chunk, plan
from rlvr.envs.evaluate import format_table, summarize
from rlvr.envs.registry import make
from rlvr.envs.sampler import SamplingSettings
from rlvr.trainers import checkpoint, loop, quiet
from rlvr.trainers.config import CommonSettings
from rlvr.trainers.evaluation import rollout_chunk
from rlvr.trainers.models import resolve_model
from rlvr.trainers.samplers.factory import build_sampler
from rlvr.trainers.samplers.protocol import SamplerSpec

_COMMON = {f.name: f.default for f in dataclasses.fields(CommonSettings)}  # rlvr eval's defaults, shared


class Trainer(loop.Trainer):
    """`trainers.loop.Trainer`, quiet unless `config.verbose` (the module's docstring says what that
    changes). `Trainer(config).train()` runs `config.steps` steps and returns the summary
    `rlvr train` prints (held-out accuracy before and after when `config.eval_tasks`; `optimizer_steps`
    taken and `skipped_steps` without one; the peak `memory`); checkpoints
    go to `config.out`/checkpoints/step-NNNNNNNN, the metrics to `config.out`/metrics.jsonl."""

    def __init__(self, config, algo=None, overlap: bool | None = None):
        quiet.configure(config.verbose)
        super().__init__(config, algo, overlap)


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """An evaluation: `summary` holds the fields of `rlvr eval`'s summary.json (pass@k with bootstrap
    intervals, mean reward, outcomes, truncations, tokens per second), `episodes` every episode
    sampled, in task order. `str(result)` is the command's table."""

    summary: dict[str, Any]
    episodes: list[Episode]

    @property
    def pass_at_k(self) -> dict[int, float | None]:
        """k -> the task-averaged pass@k estimate (None when no task has k valid samples)."""
        return {int(k): stat["estimate"] for k, stat in self.summary["pass_at_k"].items()}

    @property
    def mean_reward(self) -> float | None:
        """The task-averaged reward (None when every episode was an error)."""
        reward = self.summary["mean_reward"]
        return None if reward is None else reward["estimate"]

    def __str__(self) -> str:
        return format_table(self.summary)


def model_dir(model: str | Path) -> Path:
    """The model directory that `model` names: "tiny", "small", a model directory, or a training
    run's `out` folder (its latest checkpoint)."""
    if isinstance(model, (str, Path)) and checkpoint.checkpoint_dir(model).is_dir():
        latest = checkpoint.latest_checkpoint(model)
        if latest is not None:
            return latest
    return resolve_model(model)


def evaluate(
    model: str | Path,
    env: str,
    *,
    env_args: Mapping[str, Any] | None = None,
    tasks: int | None = None,
    k: Sequence[int] = (1,),
    samples: int | None = None,
    sampler: str = "hf",
    temperature: float | None = None,
    top_p: float = _COMMON["top_p"],
    max_tokens: int = _COMMON["max_tokens"],
    seed: int = _COMMON["seed"],
    task_start: int | None = None,
    verbose: bool = False,
) -> EvalResult:
    """pass@k of `model` (see `model_dir`) on `tasks` tasks of environment `env`: `samples` per task
    (default the largest k), sampled by backend `sampler` ("hf", the default: no engine to start; or
    "vllm", faster on many tasks). For an environment with a fixed list of problems the tasks are
    problems task_start (0), task_start + 1, ... of it, each once (`tasks` None: all of them);
    otherwise the reset seeds task_start, task_start + 1, ... (None: the held-out seeds; `tasks`
    None: 100). `temperature` None: as `rlvr eval`, 0 (greedy) for one sample per task, else 1.0
    (`envs.eval_sampling`). A bad setting raises ValueError; a bad environment id or model a
    `RlvrError` subclass."""
    ks = sorted(set(k))
    group_size = samples or ks[-1]
    temperature = temperature_for(temperature, group_size)
    if (tasks is not None and tasks < 1) or ks[0] < 1 or group_size < ks[-1]:
        raise ValueError(f"need tasks >= 1, every k >= 1 and samples >= max(k); got {tasks}, {ks}, {samples}")
    probe = make(env, **dict(env_args or {}))
    try:
        todo = plan(probe, tasks, task_start)  # every listed problem once, or reset seeds
    finally:
        probe.close()
    quiet.configure(verbose)
    sampling = SamplingSettings(temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed)
    path = str(model_dir(model))
    engine = build_sampler(SamplerSpec(sampler, path, seed=seed))
    episodes: list[Episode] = []
    started = time.perf_counter()
    try:
        chunk = default_chunk(todo.count)  # as rlvr eval's default: a task's samples depend on its chunk
        for start in range(0, todo.count, chunk):
            stop = min(start + chunk, todo.count)
            groups = rollout_chunk(
                env, env_args, engine, engine.tokenizer, todo, (start, stop), group_size, sampling, path
            )
            episodes += [ep for g in groups for ep in g.episodes]
    finally:
        engine.close()
    seconds = time.perf_counter() - started
    summary = summarize(
        episodes,
        ks,
        env_id=env,
        env_args=dict(env_args or {}),
        model=path,
        seconds=seconds,
        tokens=sum(sum(ep.loss_mask) for ep in episodes),
        seed=seed,
        sampler=sampler,
        samples_per_task=group_size,
        sampling={**dataclasses.asdict(sampling), "task_start": todo.start},
        **({"problems": len(todo.problems)} if todo.listed else {}),
    )
    return EvalResult(summary, episodes)
