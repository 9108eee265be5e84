"""`rlvr train`: train a model with RL on an environment's verifiable rewards."""
from __future__ import annotations

import argparse
import json
import sys

# flag -> TrainConfig field, for the flags that map one to one (the value type is argparse's)
FLAGS: list[tuple[str, str, type, str]] = [
    ("--model", "model", str, "model directory, or 'tiny' (the built-in default)"),
    ("--env", "env", str, "environment id (default rlvr/Arithmetic-v0)"),
    ("--algo", "algo", str, "reinforce, rloo, grpo (default), dr_grpo, dapo, gspo, cispo, ppo"),
    ("--steps", "steps", int, "training steps"),
    ("--group-size", "group_size", int, "samples per task (G)"),
    ("--tasks-per-step", "tasks_per_step", int, "tasks per step; the batch is tasks x G episodes"),
    ("--minibatch-size", "minibatch_size", int, "episodes per optimizer step (default: the whole batch)"),
    ("--micro-batch-size", "micro_batch_size", int, "episodes per forward/backward (gradient accumulation)"),
    ("--epochs", "epochs", int, "passes over each batch (default: the algorithm's)"),
    ("--lr", "lr", float, "learning rate"),
    ("--lr-schedule", "lr_schedule", str, "constant, linear or cosine"),
    ("--warmup-steps", "warmup_steps", int, "linear learning-rate warm-up"),
    ("--max-grad-norm", "max_grad_norm", float, "gradient clipping"),
    ("--temperature", "temperature", float, "sampling temperature"),
    ("--top-p", "top_p", float, "nucleus sampling"),
    ("--max-tokens", "max_tokens", int, "tokens per model turn"),
    ("--sampler", "sampler", str, "vllm (default) or hf"),
    ("--old-logprobs", "old_logprobs", str, "recompute, or sampler (with truncated importance sampling)"),
    ("--value-model", "value_model", str, "auto, none, head or critic (PPO's values)"),
    ("--seed", "seed", int, "random seed"),
    ("--out", "out", str, "output directory"),
    ("--save-every", "save_every", int, "checkpoint every N steps"),
    ("--keep-last", "keep_last", int, "checkpoints kept"),
    ("--eval-tasks", "eval_tasks", int, "held-out tasks measured before and after training"),
    ("--eval-every", "eval_every", int, "also measure every N steps"),
    ("--time-limit", "time_limit", float, "stop training after this many seconds (then save and evaluate)"),
    ("--threads", "threads", int, "torch threads"),
]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("train", help=__doc__.splitlines()[0].split(": ", 1)[1], description=__doc__)
    p.add_argument("--config", metavar="FILE", help="YAML file of settings; flags override it")
    for flag, dest, kind, text in FLAGS:
        p.add_argument(flag, dest=dest, type=kind, default=None, help=text)
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE", help="environment keyword argument")
    p.add_argument("--algo-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of the algorithm preset, e.g. kl_coef=0")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any other setting")
    p.add_argument("--resume", action="store_true", default=None, help="continue from the last checkpoint in --out")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None, help="no progress bar")
    p.add_argument("--check", action="store_true", help="validate the settings and exit")
    p.set_defaults(func=run)


def overrides_from_args(args: argparse.Namespace) -> dict:
    from envs import parse_env_args

    values = {dest: getattr(args, dest) for _, dest, _, _ in FLAGS if getattr(args, dest) is not None}
    for name in ("resume", "progress"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if args.env_arg:
        values["env_args"] = parse_env_args(args.env_arg)
    if args.algo_arg:
        values["algo_args"] = parse_env_args(args.algo_arg)
    values.update(parse_env_args(args.set))
    return values


def run(args: argparse.Namespace) -> int:
    from trainers.config import TrainConfig

    # Every check before anything loads; their ConfigError / EnvError is one line from rlvr.cli.
    config = TrainConfig.load(args.config, overrides_from_args(args))
    algo = config.check()
    if args.check:
        print(json.dumps({"config": config.to_dict(), "algorithm": algo.name}, indent=2))
        return 0
    from trainers.loop import Trainer

    print(f"training {config.model} on {config.env} with {algo.name}: {config.steps} steps of "
          f"{config.tasks_per_step} tasks x {config.group_size} samples -> {config.out}", file=sys.stderr)
    summary = Trainer(config, algo).train()
    print(format_summary(config, summary))
    return 0


def format_summary(config, summary: dict) -> str:
    lines = [f"done: {summary['steps']} steps; metrics in {config.out}/metrics.jsonl, curve in {summary.get('reward_png')}"]
    before, after = summary.get("eval_before"), summary.get("eval_after")
    if before and after:
        delta = 100 * (after["accuracy"] - before["accuracy"])
        lines.append(f"held-out accuracy on {after['tasks']} tasks: {before['accuracy']:.3f} -> "
                     f"{after['accuracy']:.3f} ({delta:+.1f} points)")
    elif after:
        lines.append(f"held-out accuracy on {after['tasks']} tasks: {after['accuracy']:.3f}")
    return "\n".join(lines)
