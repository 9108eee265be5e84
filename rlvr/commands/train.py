"""`rlvr train`: train a model with RL on an environment's verifiable rewards."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from rlvr.config_flags import add_flags, given_values
from rlvr.extras import require_train
from rlvr.startup import collector_paused
from rlvr.trainers.config import TrainConfig  # light (no torch): the flags are generated from its fields
from rlvr.trainers.peak_memory import memory_line  # light: os and /proc only

# Option strings older than the generated `--field-name` ones, kept working (README, scripts).
ALIASES = {"env_args": ["--env-arg"], "eval_env_args": ["--eval-env-arg"], "algo_args": ["--algo-arg"]}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("train", help=__doc__.splitlines()[0].split(": ", 1)[1], description=__doc__)
    p.add_argument("--config", metavar="FILE", help="YAML file of settings; flags override it")
    add_flags(p, TrainConfig, ALIASES)  # one flag per TrainConfig field, with its description and default
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any setting by its TrainConfig name, the value read as YAML; repeatable",
    )
    p.add_argument("--check", action="store_true", help="validate the settings and exit")
    p.set_defaults(func=run)


def overrides_from_args(args: argparse.Namespace) -> dict:
    """The settings given on the command line, and only those: a flag not given keeps the YAML
    file's value (or the default). --set comes last and wins."""
    from rlvr.envs import parse_env_args

    values = given_values(args, TrainConfig, ALIASES)
    values.update(parse_env_args(args.set))
    return values


def native_precision(config: TrainConfig) -> TrainConfig:
    """float32 instead of bfloat16 on a CPU that has no bfloat16 instructions (trainers.precision),
    with a line saying so: there a bf16 step takes about 40x as long."""
    if config.dtype != "bfloat16":
        return config
    from rlvr.trainers.device import resolve_device
    from rlvr.trainers.precision import cpu_has_bf16

    if resolve_device(config.device).type != "cpu" or cpu_has_bf16():
        return config
    print(
        "warning: this CPU has no bfloat16 instructions (a bf16 matmul runs about 40x slower than float32 "
        "here): training in float32 instead of --dtype bfloat16",
        file=sys.stderr,
    )
    return dataclasses.replace(config, dtype="float32")


def check_memory(config: TrainConfig, algo) -> dict | None:
    """`--check`'s memory estimate (`trainers.memory_plan`, from config.json: nothing loads):
    a table on stderr, and the numbers for the JSON on stdout (None when the model's config.json
    has no shape the estimate reads: a warning then, not an error; the run itself may well work)."""
    from rlvr.trainers.memory_estimate import MemoryEstimateError, estimate
    from rlvr.trainers.memory_plan import device_label, run_inputs

    try:
        inputs, free = run_inputs(config, algo)
    except MemoryEstimateError as exc:
        print(f"warning: no memory estimate: {exc}", file=sys.stderr)
        return None
    result = estimate(inputs)
    print(result.table(device_label(inputs, free)), file=sys.stderr)
    return {**result.as_dict(), "prompt_tokens": inputs.prompt_tokens, "completion_tokens": inputs.completion_tokens}


def warmup_warning(config: TrainConfig) -> str | None:
    """A warm-up longer than the run keeps the learning rate below --lr to its end: say so."""
    if config.warmup_steps <= config.steps:
        return None
    return (
        f"warning: --warmup-steps {config.warmup_steps} is longer than the run (--steps {config.steps}): the learning "
        f"rate ends at {config.steps}/{config.warmup_steps} of --lr; pass --warmup-steps {max(1, config.steps // 5)} "
        "(or 0) for a short run"
    )


def run(args: argparse.Namespace) -> int:
    require_train("rlvr train")  # no torch (`pip install rlvr`, the light core): one line naming the extra
    # Every check before anything loads; their ConfigError / EnvError is one line from rlvr.cli.
    config = TrainConfig.load(args.config, overrides_from_args(args))
    from rlvr.trainers import quiet

    quiet.configure(config.verbose)  # before anything imports torch (a run folder's checkpoint look-up does)
    from rlvr.trainers.run_folder import resolved

    model, model_line = resolved(config.model, "--model")  # a run folder: its last checkpoint (trainers.run_folder)
    teacher, teacher_line = resolved(config.teacher, "--teacher")
    config = dataclasses.replace(config, model=model, teacher=teacher)
    for line in (model_line, teacher_line):
        if line is not None:
            print(line, file=sys.stderr)

    with collector_paused():  # the imports (rlvr.startup)
        from rlvr.env_loading import resolve_env

        resolve_env(config.env)  # its module or plugin imported with exits refused (rlvr.env_loading)
        from rlvr.trainers.preflight import check_run, task_split

        algo = check_run(config)
        tasks = task_split(config)  # which tasks train and which evaluate (envs.held_out), for the start line
        config = native_precision(config)
        if args.check:
            if warmup_warning(config) is not None:
                print(warmup_warning(config), file=sys.stderr)
            memory = check_memory(config, algo)
            checked = {"config": config.to_dict(), "algorithm": algo.name, "held_out": tasks.describe()}
            print(json.dumps({**checked, "memory": memory}, indent=2))
            return 0
        from rlvr.trainers.loop import Trainer

    from rlvr.run_lock import run_lock

    with run_lock(config.out, "rlvr train"):  # one run per --out; a second ends here naming this one
        print(
            f"training {config.model} on {config.env} with {algo.name}: {config.steps} steps of "
            f"{config.tasks_per_step} tasks x {config.group_size} samples -> {config.out}",
            file=sys.stderr,
        )
        if tasks.describe() is not None:
            print(tasks.describe(), file=sys.stderr)
            if tasks.note is not None:
                print(tasks.note, file=sys.stderr)
        if warmup_warning(config) is not None:  # once this run holds its --out: a refused run warns of nothing
            print(warmup_warning(config), file=sys.stderr)
        from rlvr.trainers.device import use_threads

        use_threads(config.threads)  # process-wide: the command's to set, not the library's (trainers.loop)
        with collector_paused():  # the models and the engine, apart: the engine's own collections skip the imports
            trainer = Trainer(config, algo, tasks=tasks)
        try:
            summary = trainer.train()
        finally:  # its engine, Ray workers and ranks end with the run: `rlvr.cli.main(argv)` in a process that goes on
            trainer.close()
    print(format_summary(config, summary))
    return 0


def format_summary(config, summary: dict) -> str:
    """What `rlvr train` ends with: what ran, the steps that took no optimizer step, the peak memory, the
    held-out accuracy, and the model, last (the line to copy)."""
    lines = [
        f"done: {summary['steps']} steps; metrics in {config.out}/metrics.jsonl, curve in {summary.get('reward_png')}"
    ]
    if summary.get("skipped_steps"):  # said only when it happened: the usual run updates on every step
        skipped, steps, taken = summary["skipped_steps"], summary["steps"], summary["optimizer_steps"]
        lines.append(
            f"{skipped} of {steps} steps took no optimizer step ({taken} optimizer steps in all): no reward "
            "variance in any group, or only errors (zero_signal in metrics.jsonl)"
        )
    memory = memory_line(summary.get("memory") or {})
    if memory is not None:
        lines.append(memory)
    before, after = summary.get("eval_before"), summary.get("eval_after")
    if before and after:
        delta = 100 * (after["accuracy"] - before["accuracy"])
        lines.append(
            f"held-out accuracy on {after['tasks']} tasks: {before['accuracy']:.3f} -> "
            f"{after['accuracy']:.3f} ({delta:+.1f} points)"
        )
    elif after:
        lines.append(f"held-out accuracy on {after['tasks']} tasks: {after['accuracy']:.3f}")
    if summary.get("checkpoint"):
        lines.append(f"model: {summary['checkpoint']} (`rlvr eval --model {config.out}` takes it)")
    return "\n".join(lines)
