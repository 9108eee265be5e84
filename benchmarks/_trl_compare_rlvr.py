"""The rlvr side of `trl_compare.py`: rlvr's `grpo` through its Python API (`TrainConfig`,
`Trainer`), in its own process so that its peak memory is its own.
`python benchmarks/_trl_compare_rlvr.py SETTINGS.json OUT_DIR`

The steps are `Trainer.train_step` (rollout, scoring, old and reference logprobs, advantages,
the update, the weight sync), timed one by one the way the TRL side times its optimizer steps;
what `Trainer.train` adds around them (metric files, checkpoints, the reward plot) is left out
on both sides. The trained policy is saved as a Hugging Face directory for the evaluation.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks folder, for the helpers
from _trl_compare_common import Settings, cpu_wait_seconds, side_main  # noqa: E402

PHASES = ("time_sampling", "time_scoring", "time_training", "time_syncing")


def train_config(settings: Settings, out_dir: Path):
    from rlvr.trainers.config import TrainConfig

    return TrainConfig.from_dict(
        {
            "model": settings.model,
            "env": settings.env,
            "env_args": dict(settings.env_args),
            "algo": "grpo",
            "algo_args": {
                "kl_coef": settings.beta,
                "clip_eps_low": settings.epsilon,
                "clip_eps_high": settings.epsilon,
            },
            "steps": settings.steps,
            "tasks_per_step": settings.tasks_per_step,
            "group_size": settings.group_size,
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "top_p": 1.0,
            "lr": settings.lr,
            "lr_schedule": "constant",
            "warmup_steps": settings.warmup_steps,
            "weight_decay": 0.0,
            "max_grad_norm": 1.0,
            "sampler": settings.rlvr_sampler,
            "device": settings.device,
            "dtype": settings.dtype,
            "seed": settings.seed,
            "out": str(out_dir / "rlvr_run"),
            # only keeps training off the held-out seeds: `train_step` never evaluates
            "eval_tasks": settings.held_out_tasks,
            "threads": settings.threads,
            "progress": False,
            # TRL updates on a batch without signal (a zero advantage, the KL's gradient); rlvr would skip
            # it, and a step that trains nothing is no measure of a step's time
            "skip_zero_signal": False,
        }
    )


def run(settings: Settings, out_dir: Path) -> dict:
    from rlvr.trainers.device import use_threads
    from rlvr.trainers.loop import Trainer

    use_threads(settings.threads)
    trainer = Trainer(train_config(settings, out_dir))
    seconds, cpu_seconds, wait_seconds, rewards, lrs, phases = [], [], [], [], [], []
    started = time.perf_counter()
    while trainer.step < settings.steps:
        lrs.append(trainer.scheduler.get_last_lr()[0])  # the rate this step's update uses
        t0, c0, w0 = time.perf_counter(), time.process_time(), cpu_wait_seconds()
        metrics = trainer.train_step()
        trainer.step += 1
        seconds.append(time.perf_counter() - t0)
        cpu_seconds.append(time.process_time() - c0)
        wait_seconds.append(cpu_wait_seconds() - w0)
        rewards.append(float(metrics["reward_mean"]))
        phases.append({k: float(metrics.get(k, 0.0)) for k in PHASES})
    total = time.perf_counter() - started
    model_dir = out_dir / "rlvr_model"
    trainer.models.save(model_dir)
    return {
        "side": "rlvr",
        "step_seconds": seconds,
        "step_cpu_seconds": cpu_seconds,
        "step_wait_seconds": wait_seconds,
        "train_seconds": total,
        "train_rewards": rewards,
        "step_lrs": lrs,
        "phases": phases,
        "model_dir": str(model_dir),
        "sampler": settings.rlvr_sampler,
    }


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local model directories only
    sys.exit(side_main(sys.argv[1:], "rlvr", run))
