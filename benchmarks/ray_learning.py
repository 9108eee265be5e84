"""Does the Ray mode learn like the single-process run? The README's main job (GRPO on
rlvr/Arithmetic-v0 with the tiny model, held-out accuracy on 400 tasks before and after) run
single-process, with `--ray --rollout-workers 2`, and with `--trainer-ranks 2` as well; the table
gives each run's held-out gain and its difference from the single-process gain, in points (the
target: within 3).

    python benchmarks/ray_learning.py                 # 150 steps, as the README's main command
    python benchmarks/ray_learning.py --steps 60 --modes single ray2
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = {
    "single": [],
    "ray2": ["--ray", "--rollout-workers", "2"],
    "ray2-ranks2": ["--ray", "--rollout-workers", "2", "--trainer-ranks", "2"],
}
HELD_OUT = re.compile(r"held-out accuracy on (\d+) tasks: ([0-9.]+) -> ([0-9.]+)")


def run(mode: str, out: Path, steps: int, eval_tasks: int) -> tuple[float, float, float]:
    """One `rlvr train` run; its held-out accuracy before and after, and its wall time."""
    cmd = [
        sys.executable,
        "-m",
        "rlvr",
        "train",
        "--algo",
        "grpo",
        "--steps",
        str(steps),
        "--eval-tasks",
        str(eval_tasks),
        "--out",
        str(out),
        "--no-progress",
        *MODES[mode],
    ]
    started = time.monotonic()
    done = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    )
    seconds = time.monotonic() - started
    (out.parent / f"{out.name}.log").write_text(done.stdout + done.stderr)
    match = HELD_OUT.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise SystemExit(f"{' '.join(cmd)} failed; see {out.parent / out.name}.log")
    return float(match.group(2)), float(match.group(3)), seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--eval-tasks", type=int, default=400)
    p.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    p.add_argument("--out", default=None, help="keep the runs here (default: a temporary directory)")
    args = p.parse_args(argv)
    modes = ["single"] + [m for m in args.modes if m != "single"]
    out = Path(args.out or tempfile.mkdtemp(prefix="ray_learning_"))
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for mode in modes:
        print(f"--- {mode} ...", file=sys.stderr, flush=True)
        results[mode] = run(mode, out / mode, args.steps, args.eval_tasks)
    base_gain = 100 * (results["single"][1] - results["single"][0])
    print(f"rlvr/Arithmetic-v0, grpo, tiny model, {args.steps} steps, held-out accuracy on {args.eval_tasks} tasks")
    print(f"{'mode':<13} {'before':>7} {'after':>7} {'gain pts':>9} {'vs single':>9} {'wall s':>7}")
    for mode, (before, after, seconds) in results.items():
        gain = 100 * (after - before)
        print(f"{mode:<13} {before:>7.3f} {after:>7.3f} {gain:>+9.1f} {gain - base_gain:>+9.1f} {seconds:>7.1f}")
    print(f"(runs in {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
