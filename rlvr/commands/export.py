"""`rlvr export --env ID --tasks N --format verl --out FILE.parquet`: an environment's tasks for another trainer.

`--format verl` writes verl's RL data format (data_source, prompt, ability, reward_model.ground_truth,
extra_info), scored in verl by `rlvr.envs.adapters.verl.compute_score` (the line printed at the end
names the settings); `--format trl` writes the columns of `rlvr.envs.adapters.trl.trl_dataset` (prompt,
rlvr_task), scored in TRL by its `EnvReward`. Either way each row names its task, and the reward is the
environment's own verifier on that task. Single-step environments only.

The tasks: reset seeds --start, --start + 1, ... (from 0: training tasks; from 1000000: the held-out
tasks of rlvr train and rlvr eval), or problems --start, ... of an environment that lists them (all of
them without --tasks).
"""

from __future__ import annotations

import argparse

from rlvr.env_loading import add_env_options


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        help="write an environment's tasks for TRL or verl (Parquet)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_env_options(p)
    p.add_argument(
        "--tasks", type=int, default=None, help="how many tasks; none: every problem of an environment that lists them"
    )
    p.add_argument("--start", type=int, default=0, help="the first reset seed, or the first listed problem (0)")
    p.add_argument("--format", required=True, metavar="FORMAT", help="verl or trl")
    p.add_argument("--out", required=True, metavar="FILE", help="the .parquet file to write (replaced whole)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """0 and two lines (what was written, how to use it); a bad input is an `RlvrError`, one line from rlvr.cli."""
    from rlvr.env_loading import exits_refused, resolve_env
    from rlvr.envs import parse_env_args
    from rlvr.envs.adapters.export import FORMATS, ExportError, check_out, export
    from rlvr.usage import UsageError

    if args.format not in FORMATS:  # checked here, not by argparse, so that it is one line like every other error
        raise ExportError(f"--format must be one of {', '.join(FORMATS)}, got {args.format!r}")
    if args.tasks is not None and args.tasks < 1:
        raise UsageError(f"--tasks must be at least 1, got {args.tasks}")
    if args.start < 0:
        raise UsageError(f"--start must be >= 0, got {args.start}")
    check_out(args.out)  # before any task is made
    env_args = parse_env_args(args.env_arg)
    resolve_env(args.env)  # its module and plugins imported with exits refused (rlvr.env_loading)
    with exits_refused(f"environment {args.env!r}"):
        done = export(args.env, args.out, args.format, args.tasks, env_args, args.start)
    print(f"wrote {done.rows} tasks of {done.env_id} to {done.path} ({done.format} format)")
    print(usage_line(done.format, done.path))
    return 0


def usage_line(fmt: str, path) -> str:
    """How the file is used, as one line to copy."""
    if fmt == "verl":
        from rlvr.envs.adapters import verl

        return (
            f"verl: custom_reward_function.path={verl.__file__} custom_reward_function.name=compute_score, and "
            f"data.train_files={path} (or data.val_files={path})"
        )
    return (
        f"trl: train_dataset=datasets.Dataset.from_parquet('{path}'), reward_funcs=rlvr.envs.adapters.trl.EnvReward()"
    )
