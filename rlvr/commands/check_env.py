"""`rlvr check-env ID [--env-arg KEY=VALUE ...]`: run Gymnasium's and rlvr's environment checks."""

from __future__ import annotations

import argparse
import sys

from rlvr.env_loading import add_env_arg


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "check-env", help="check that an environment meets the rlvr contract", description=__doc__.splitlines()[0]
    )
    p.add_argument("env_id", metavar="ID", help="a registered id, e.g. rlvr/Arithmetic-v0")
    add_env_arg(p)
    p.add_argument("--seeds", type=int, default=3, help="how many seeds to play per check (default 3)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """0: every check passed; 1: the environment failed a check (the report on stdout, one line on
    stderr naming the first failure); 2: it could not be checked (a bad id, argument or module: one
    line, from rlvr.cli)."""
    from rlvr import envs
    from rlvr.env_loading import make_env
    from rlvr.errors import RlvrError
    from rlvr.usage import one_line

    try:
        if args.seeds < 1:
            raise envs.EnvArgumentError(f"--seeds must be at least 1, got {args.seeds}")
        env = make_env(args.env_id, envs.parse_env_args(args.env_arg))
    except RlvrError as exc:  # as rlvr.cli would print it, also for a caller of run() (the tests)
        print(f"rlvr check-env: error: {one_line(exc)}", file=sys.stderr)
        return 2
    results = envs.check_env(env, seeds=range(args.seeds), raise_on_failure=False)
    for result in results:
        print(result)
    failed = [r for r in results if not r.ok]
    print(f"\n{args.env_id}: {len(results) - len(failed)}/{len(results)} checks passed")
    env.close()
    if failed:
        first = failed[0]
        detail = f": {' '.join(first.problems[0].split())}" if first.problems else ""  # one line
        print(
            f"rlvr check-env: error: {args.env_id} failed {len(failed)} of {len(results)} checks; the first, "
            f"{first.name}{detail}",
            file=sys.stderr,
        )
        return 1
    return 0
