"""`rlvr sandbox build` builds the sandbox image; `rlvr sandbox check` runs the hostile suite."""

from __future__ import annotations

import argparse
import sys
import time


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("sandbox", help="build and check the Docker sandbox", description=__doc__)
    sub = parser.add_subparsers(dest="sandbox_command", required=True, metavar="ACTION")
    build = sub.add_parser("build", help="build the sandbox image (debootstrap + docker import; root)")
    build.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    build.set_defaults(func=_build)
    check = sub.add_parser("check", help="run the hostile suite and print a table")
    check.add_argument("--image", default=None, help="image to check (default: the built one)")
    check.add_argument("-k", dest="only", default=None, help="only cases whose name contains this")
    check.set_defaults(func=_check)


def _build(args: argparse.Namespace) -> int:
    import docker

    from rlvr.sandbox.image import ImageBuildError, ensure_image, image_present, image_tag

    try:
        client = docker.from_env(timeout=600)
        if not args.force and image_present(client):
            print(f"{image_tag()} (already built; --force rebuilds it)")
            return 0
        tag = ensure_image(client, force=args.force, log=lambda m: print(m, file=sys.stderr))
    except (ImageBuildError, docker.errors.DockerException) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(tag)
    return 0


def _check(args: argparse.Namespace) -> int:
    from rlvr.sandbox.check import format_table, run_suite
    from rlvr.sandbox.hostile import CASES

    cases = [c for c in CASES if args.only is None or args.only in c.name]
    start = time.monotonic()
    outcomes, host = run_suite(
        cases,
        image=args.image,
        on_outcome=lambda o: print(f"{'ok  ' if o.passed else 'FAIL'} {o.case}", file=sys.stderr),
    )
    print(format_table(outcomes))
    for problem in host:
        print(f"host: {problem}")
    passed = sum(o.passed for o in outcomes)
    print(
        f"\n{passed}/{len(outcomes)} cases passed, host {'unharmed' if not host else 'HARMED'}"
        f" ({time.monotonic() - start:.1f}s)"
    )
    return 0 if passed == len(outcomes) and not host else 1
