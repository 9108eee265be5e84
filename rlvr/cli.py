"""`rlvr` command line. Each subcommand lives in its own module under `rlvr.commands` and exposes
`add_parser(subparsers)`; heavy imports (torch, vllm, docker) happen inside the commands.

Every error rlvr raises on purpose derives from `RlvrError` (a bad setting, a missing model, an
--out that cannot be written, a full disk, a broken environment): it ends as one line on stderr,
`rlvr COMMAND: error: ...`, and exit code 2, like argparse's own errors. Anything else is a bug
and keeps its traceback."""
from __future__ import annotations

import argparse
import importlib
import sys

from sandbox.errors import RlvrError

COMMANDS = ["envs", "check_env", "eval", "train", "sandbox"]


class UsageError(RlvrError, ValueError):
    """Bad command-line arguments, or an --out that holds another run."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"rlvr.commands.{name}").add_parser(sub)
    return parser


def one_line(exc: BaseException) -> str:
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return "; ".join(line.strip() for line in text.splitlines() if line.strip()) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except RlvrError as exc:
        print(f"rlvr {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2
