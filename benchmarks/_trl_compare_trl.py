"""The TRL side of `trl_compare.py`: `trl.GRPOTrainer` on the settings' device (CUDA when asked or,
with "auto", when torch sees a GPU; `use_cpu` only otherwise), run in its own process so that its
peak memory is its own: `python benchmarks/_trl_compare_trl.py SETTINGS.json OUT_DIR`.

Matched to rlvr's `grpo` preset: group-normalised advantages (sample std), clipped ratio with
eps 0.2 on both sides, per-sequence token-mean loss (`loss_type="grpo"`), k3 KL in the loss with
coefficient beta against the frozen starting model, without TRL's importance-weighted KL
(`use_bias_correction_kl=False`: rlvr does not weight it), one optimizer step per batch of
tasks x G completions, rlvr's learning-rate schedule (linear warm-up, then constant), AdamW
(0.9, 0.999), no weight decay, gradients clipped at 1.0, float32 weights (bfloat16: autocast over
them, `bf16=True`, as rlvr does on CUDA), dropout off. The tasks are
those rlvr trains on, step for step. Generation is TRL's own `model.generate` unless the
settings ask for another backend.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks folder, for the helpers
from _trl_compare_common import EnvReward, Settings, cpu_wait_seconds, lr_factor, side_main, step_seeds  # noqa: E402


def build_dataset(settings: Settings, reward: EnvReward):
    """One row per task, step after step, in the order rlvr's loop draws them (no shuffling)."""
    from datasets import Dataset

    seeds = [s for step in range(settings.steps) for s in step_seeds(settings, step)]
    prompts, task_ids = zip(*(reward.task(s) for s in seeds))
    return Dataset.from_dict({"prompt": list(prompts), "task_id": list(task_ids)})


def grpo_config(settings: Settings, out_dir: Path):
    import torch
    from trl import GRPOConfig

    backend = {
        "hf": {},
        "cb": {"use_transformers_continuous_batching": True},
        # vLLM in this process; its importance-sampling correction needs vLLM's logprobs
        "vllm": {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": 256},
    }[settings.trl_generation]
    return GRPOConfig(
        output_dir=str(out_dir / "trl_run"),
        use_cpu=not settings.on_cuda,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=settings.seed,
        bf16=settings.dtype == "bfloat16",  # mixed precision: float32 master weights, as rlvr's autocast
        fp16=False,
        gradient_checkpointing=settings.trl_gradient_checkpointing,
        # one optimizer step per generation batch of tasks_per_step x group_size completions
        max_steps=settings.steps,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=1,
        num_generations=settings.group_size,
        shuffle_dataset=False,
        dataloader_pin_memory=False,
        max_completion_length=settings.max_tokens,
        temperature=settings.temperature,
        top_p=1.0,
        top_k=0,
        learning_rate=settings.lr,
        weight_decay=0.0,  # the schedule: see `trainer_class`
        adam_beta1=0.9,
        adam_beta2=0.999,
        max_grad_norm=1.0,
        beta=settings.beta,
        epsilon=settings.epsilon,
        loss_type="grpo",
        scale_rewards="group",
        use_bias_correction_kl=False,
        num_iterations=1,
        mask_truncated_completions=False,
        disable_dropout=True,
        model_init_kwargs={"dtype": torch.float32},
        **backend,
    )


def trainer_class(warmup_steps: int):
    """`GRPOTrainer` with rlvr's learning-rate schedule. (TRL's "constant_with_warmup" gives step s
    s / W of the rate, so its first step would not move the weights; rlvr's gives (s + 1) / W.)"""
    import torch
    from trl import GRPOTrainer

    class GRPOTrainerRlvrSchedule(GRPOTrainer):
        def create_scheduler(self, num_training_steps, optimizer=None):
            if self.lr_scheduler is None:
                self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
                    optimizer or self.optimizer, lr_factor(warmup_steps)
                )
            return self.lr_scheduler

    return GRPOTrainerRlvrSchedule


def step_timer():
    """A callback that records each optimizer step's wall time: generation, scoring, reference
    logprobs, forward, backward and the optimizer step (TRL logs after `on_step_end`)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.seconds: list[float] = []
            self.cpu_seconds: list[float] = []
            self.wait_seconds: list[float] = []
            self.rewards: list[float] = []
            self.lrs: list[float] = []
            self._t0 = self._c0 = self._w0 = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self._t0, self._c0, self._w0 = time.perf_counter(), time.process_time(), cpu_wait_seconds()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self._t0)
            self.cpu_seconds.append(time.process_time() - self._c0)
            self.wait_seconds.append(cpu_wait_seconds() - self._w0)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                self.rewards.append(float(logs["reward"]))
                self.lrs.append(float(logs["learning_rate"]))  # the rate this step used

    return StepTimer()


def run(settings: Settings, out_dir: Path) -> dict:
    import torch

    from rlvr.trainers.models import load_tokenizer

    if settings.threads:
        torch.set_num_threads(settings.threads)
    reward = EnvReward(settings.env, settings.env_args)
    timer = step_timer()
    trainer = trainer_class(settings.warmup_steps)(
        model=settings.model,
        reward_funcs=reward,
        args=grpo_config(settings, out_dir),
        train_dataset=build_dataset(settings, reward),
        processing_class=load_tokenizer(settings.model),
        callbacks=[timer],
    )
    started = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - started
    model_dir = out_dir / "trl_model"
    trainer.save_model(str(model_dir))
    return {
        "side": "trl",
        "step_seconds": timer.seconds,
        "step_cpu_seconds": timer.cpu_seconds,
        "step_wait_seconds": timer.wait_seconds,
        "train_seconds": total,
        "train_rewards": timer.rewards,
        "step_lrs": timer.lrs,
        "model_dir": str(model_dir),
        "grader_errors": reward.errors,
        "generation": settings.trl_generation,
    }


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local model directories only
    sys.exit(side_main(sys.argv[1:], "trl", run))
