"""What both sides of `trl_compare.py` share: the run's settings, the tasks of each step, and
the reward (rlvr's own environment scoring one completion), so TRL and rlvr see the same
prompts, the same chat formatting and the same scores."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Settings:
    """One comparison run, the same on both sides. `beta` is the KL coefficient (rlvr's grpo preset:
    0.04), `epsilon` the clip range; `threads` None keeps torch's default."""

    model: str
    env: str = "rlvr/Arithmetic-v0"
    env_args: dict[str, Any] = field(default_factory=dict)
    steps: int = 20
    tasks_per_step: int = 16
    group_size: int = 8
    max_tokens: int = 32
    temperature: float = 1.0
    lr: float = 1e-4
    warmup_steps: int = 30  # linear warm-up, then constant (rlvr's schedule)
    beta: float = 0.04
    epsilon: float = 0.2
    seed: int = 0
    held_out_tasks: int = 0  # evaluation tasks (reset seeds 1,000,000 on) that training must not draw
    threads: int | None = None  # torch intra-op threads on both sides (None: torch's default)
    rlvr_sampler: str = "vllm"
    trl_generation: str = "hf"  # "hf" (model.generate), "cb" (continuous batching) or "vllm" (colocate)
    trl_gradient_checkpointing: bool = False
    device: str = "auto"  # both sides: "auto" (CUDA when torch sees a GPU), "cpu" or "cuda"
    dtype: str = "float32"  # both sides: float32, or bfloat16 (on CUDA: autocast over float32 weights)

    def __post_init__(self) -> None:
        for name in ("steps", "tasks_per_step", "group_size", "max_tokens"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        if self.group_size < 2:
            raise ValueError(f"GRPO compares samples within a group: group_size must be >= 2, got {self.group_size}")
        for name in ("temperature", "lr"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("warmup_steps", "held_out_tasks"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be an int >= 0, got {getattr(self, name)!r}")
        if not (math.isfinite(self.beta) and self.beta >= 0) or not 0 < self.epsilon < 1:
            raise ValueError(f"need beta >= 0 and 0 < epsilon < 1, got {self.beta!r}, {self.epsilon!r}")
        if self.rlvr_sampler not in ("vllm", "hf"):
            raise ValueError(f"rlvr_sampler must be vllm or hf, got {self.rlvr_sampler!r}")
        if self.trl_generation not in ("hf", "cb", "vllm"):
            raise ValueError(f"trl_generation must be hf, cb or vllm, got {self.trl_generation!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be float32 or bfloat16, got {self.dtype!r}")

    @property
    def on_cuda(self) -> bool:
        """Whether both sides train on the GPU: `device` cuda, or auto where torch sees one."""
        import torch

        return self.device == "cuda" or (self.device == "auto" and torch.cuda.is_available())

    @property
    def batch_size(self) -> int:
        return self.tasks_per_step * self.group_size

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self), indent=2))

    @classmethod
    def load(cls, path: Path) -> Settings:
        return cls(**json.loads(Path(path).read_text()))


def cpu_wait_seconds() -> float:
    """Seconds the calling thread has spent runnable but waiting for a CPU (Linux schedstat; 0
    where unavailable). A step's wall time minus its growth is the step's time on an idle machine,
    near enough: on a busy shared machine the wait, not the work, dominates a step."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def lr_factor(warmup_steps: int):
    """rlvr's learning-rate multiplier for optimizer step s (from 0), as `trainers.loop.Trainer`
    computes it for a constant schedule: (s + 1) / warmup_steps during the warm-up, then 1."""
    return lambda s: (s + 1) / warmup_steps if s < warmup_steps else 1.0


def step_seeds(settings: Settings, step: int) -> list[int]:
    """The environment reset seeds rlvr's loop trains on at `step` (never a held-out one), so
    that TRL, fed the same tasks in order, trains on exactly rlvr's tasks."""
    from rlvr.trainers.config import TrainConfig
    from rlvr.trainers.step_rollout import training_seeds

    return training_seeds(
        TrainConfig(seed=settings.seed, tasks_per_step=settings.tasks_per_step, eval_tasks=settings.held_out_tasks),
        step,
    )


class EnvReward:
    """A TRL reward function that scores each completion with rlvr's environment: reset onto the
    task, step with the completion's text; the step's reward is rlvr's reward for that episode.
    Completions are scored concurrently, each thread with its own environment, as rlvr's rollout
    steps its environments (the verifier may wait on its worker processes). A grader error (not
    a wrong answer) gives None, which TRL leaves out, as rlvr leaves such an episode out."""

    __name__ = "env_reward"  # TRL names its reward metrics after the function

    def __init__(self, env_id: str, env_args: dict[str, Any], max_workers: int = 16):
        self.env_id, self.env_args = env_id, dict(env_args)
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(max_workers=max_workers)
        self._lock = threading.Lock()
        self.errors = 0

    def _env(self):
        if not hasattr(self._local, "env"):
            from rlvr.envs import make

            self._local.env = make(self.env_id, **self.env_args)
        return self._local.env

    def task(self, seed: int) -> tuple[list[dict[str, str]], str]:
        """The opening messages and the task id of the task that reset seed `seed` draws (as
        rlvr's rollout resets its environments)."""
        messages, info = self._env().reset(seed=seed)
        return messages, str(info["task_id"])

    def score(self, text: str, task_id: str) -> float | None:
        env = self._env()
        env.reset(options={"task_id": task_id})
        _, reward, _, _, info = env.step(text)
        verdict = info.get("verdict")
        if verdict is not None and verdict.is_error:
            with self._lock:
                self.errors += 1
            return None
        return float(reward)

    def __call__(self, prompts, completions, task_id, **_: Any) -> list[float | None]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return list(self._pool.map(self.score, texts, task_id))


def side_main(argv: list[str], side: str, run) -> int:
    """Entry point of one side's script: `SETTINGS.json OUT_DIR` in, OUT_DIR/<side>_result.json out."""
    if len(argv) != 2:
        print(f"usage: python benchmarks/_trl_compare_{side}.py SETTINGS.json OUT_DIR", file=sys.stderr)
        return 2
    settings, out_dir = Settings.load(Path(argv[0])), Path(argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    result = run(settings, out_dir)
    if settings.on_cuda:  # what this side's tensors took on the GPU at most (not the allocator's reserve)
        import torch

        result.update(cuda_peak_bytes=torch.cuda.max_memory_allocated(), device_name=torch.cuda.get_device_name())
    (out_dir / f"{side}_result.json").write_text(json.dumps(result, indent=2))
    return 0
