"""`rlvr check-env ID [--env-arg KEY=VALUE ...]`: run Gymnasium's and rlvr's environment checks."""
from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("check-env", help="check that an environment meets the rlvr contract",
                              description=__doc__.splitlines()[0])
    p.add_argument("env_id", metavar="ID", help="a registered id, e.g. rlvr/Arithmetic-v0")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="a keyword argument for the environment (value read as YAML: 2 is an int); repeatable")
    p.add_argument("--seeds", type=int, default=3, help="how many seeds to play per check (default 3)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import envs

    if args.seeds < 1:
        print("error: --seeds must be at least 1", file=sys.stderr)
        return 2
    try:
        env = envs.make(args.env_id, **envs.parse_env_args(args.env_arg))
    except envs.EnvError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    results = envs.check_env(env, seeds=range(args.seeds), raise_on_failure=False)
    for result in results:
        print(result)
    failed = sum(not r.ok for r in results)
    print(f"\n{args.env_id}: {len(results) - failed}/{len(results)} checks passed")
    env.close()
    return 1 if failed else 0
