"""`rlvr envs`: list every registered text environment (built-in and third-party)."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "envs", help="list the registered environments (built-in and plugins)", description=__doc__.splitlines()[0]
    )
    p.set_defaults(func=run)


def format_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in rows)


def run(args: argparse.Namespace) -> int:
    from rlvr.env_loading import list_envs

    infos = list_envs()
    rows = [["ID", "KIND", "DESCRIPTION"]] + [[i.id, i.kind, i.description] for i in infos]
    print(format_table(rows))
    broken = [i for i in infos if i.error]
    if broken:
        print(f"\n{len(broken)} environment(s) unavailable; see their description above.", file=sys.stderr)
    return 0
