"""`rlvr` command line. Each subcommand lives in its own module under `rlvr.commands` and exposes
`add_parser(subparsers)`; heavy imports (torch, vllm, docker) happen inside the commands.

Every error rlvr raises on purpose derives from `RlvrError` (a bad setting, a missing model, an
--out that cannot be written, a full disk, a broken environment): it ends as one line on stderr,
`rlvr COMMAND: error: ...`, and exit code 2, like argparse's own errors. Anything else is a bug
and keeps its traceback."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from rlvr.errors import RlvrError
from rlvr.startup import no_collection_at_exit
from rlvr.usage import UsageError, one_line  # noqa: F401 - UsageError: rlvr.cli.UsageError too

COMMANDS = ["envs", "check_env", "eval", "train", "export", "serve", "sandbox"]

DESCRIPTION = "Post-train language models with RL from verifiable rewards: environments, evaluation, training."
EPILOG_TAIL = """An environment id may name a module to import first, e.g. `rlvr check-env my_module:mine/MyEnv-v0`;
it is found in the current folder (as with `python -m rlvr`). `rlvr COMMAND --help` lists a command's options."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlvr", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--version", action="version", version=f"rlvr {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of the commands below")
    for name in COMMANDS:
        importlib.import_module(f"rlvr.commands.{name}").add_parser(sub)
    for command in sub.choices.values():  # `--step 2` is no `--steps 2`: a prefix of a flag is refused, not guessed
        command.allow_abbrev = False
    # One line per command, from each command's own `help=`, in the epilog (and not twice).
    lines = [f"  {a.dest:<11} {(a.help or '').rstrip('.')}" for a in sub._choices_actions]
    sub._choices_actions.clear()
    parser.epilog = "commands:\n" + "\n".join(lines) + "\n\n" + EPILOG_TAIL
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rlvr")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def add_cwd_to_path() -> None:
    """Put the current folder LAST on `sys.path`, so that the `rlvr` console script (whose
    `sys.path[0]` is its own bin folder) imports `module` in `module:namespace/Name-vN` from where it
    is run, and a file there named like a module of the standard library or of an installed package
    (a `json.py`, a `yaml.py`) does not shadow it. `python -m rlvr` puts the folder first: its
    `__main__` moves it last before importing anything else."""
    cwd = os.getcwd()
    here = [p for p in sys.path if os.path.abspath(p or os.curdir) == cwd]
    for p in here:
        sys.path.remove(p)
    sys.path.append(cwd)


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # run as a program (the console script); a caller passing argv keeps its sys.path
        add_cwd_to_path()
        no_collection_at_exit()  # the process is ours: its exit need not walk the heap (rlvr.startup)
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:  # `rlvr train`'s says what it saved and how to continue (trainers.interrupt)
        print(str(exc) or "interrupted", file=sys.stderr)
        return 130
    except RlvrError as exc:
        print(f"rlvr {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2
