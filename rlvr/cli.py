"""`rlvr` command line. Each subcommand lives in its own module under `rlvr.commands` and exposes
`add_parser(subparsers)`; heavy imports (torch, vllm, docker) happen inside the commands."""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ["envs", "check_env", "eval", "train", "sandbox"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"rlvr.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
