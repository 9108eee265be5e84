"""Where a multi-turn training step's time goes, phase by phase.

`rlvr train` on `rlvr/GuessNumber-v0` (up to 7 turns) beside single-turn `rlvr/Arithmetic-v0`,
grpo and ppo, the tiny model, the vLLM sampler.

Each run is a real `rlvr train` process under cProfile (its main thread: the trainer's forward and
backward, and the rollout's turns as the main thread drives them). The table gives the phase
seconds per step from metrics.jsonl (median over the steps after the first, whose engine warms up),
the model tokens of an episode, and, from the profile, the seconds per step of the training
phase's two parts: `prepare` (collate, the old and reference logprobs, values, advantages) and
`run_update` (the epochs of forward, backward and optimizer steps). `scoring` is the rollout's
time outside the engine: environment steps, reply templating and tokenizing, scheduling.

    python benchmarks/multiturn_profile.py [--steps 4] [--algos grpo,ppo] [--top 0]
"""

from __future__ import annotations

import argparse
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ENVS = ("rlvr/GuessNumber-v0", "rlvr/Arithmetic-v0")
PHASES = ("time_sampling", "time_scoring", "time_training", "time_syncing", "time_step")
# Functions whose cumulative time the table shows, per step: (column, file suffix, function name)
PROFILED = (
    ("prepare", "trainers/loop.py", "prepare"),  # collate, old/reference logprobs, values, advantages
    ("update", "trainers/update.py", "run_update"),  # the epochs of forward/backward/optimizer steps
)


def run(env: str, algo: str, steps: int, folder: Path) -> tuple[list[dict], pstats.Stats]:
    out, prof = folder / f"{env.replace('/', '_')}-{algo}", folder / f"{env.replace('/', '_')}-{algo}.prof"
    argv = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "rlvr", "train", "--algo", algo, "--env", env]
    argv += ["--steps", str(steps), "--eval-tasks", "0", "--no-progress", "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return rows, pstats.Stats(str(prof))


def cumulative(stats: pstats.Stats, suffix: str, name: str) -> float:
    """Seconds inside `name` of a file ending in `suffix` (its outermost calls: cumulative time)."""
    return sum(
        ct for (file, _, func), (_, _, _, ct, _) in stats.stats.items() if func == name and file.endswith(suffix)
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--algos", default="grpo,ppo")
    p.add_argument("--top", type=int, default=0, help="also print each profile's N functions of most own time")
    p.add_argument("--keep", default=None, help="a folder to keep the runs and profiles in; none: a temporary one")
    args = p.parse_args(argv)

    head = f"{'env':<20} {'algo':<5} {'step s':>7} {'sampling':>8} {'scoring':>7} {'training':>8} {'sync':>5}"
    head += "".join(f" {name:>10}" for name, _, _ in PROFILED) + f" {'tok/ep':>6}"
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for env in ENVS:
            for algo in args.algos.split(","):
                rows, stats = run(env, algo, args.steps, folder)
                later = rows[1:] or rows
                med = {k: statistics.median(r[k] for r in later) for k in PHASES}
                per_step = [cumulative(stats, suffix, name) / len(rows) for _, suffix, name in PROFILED]
                tokens = statistics.median(r["response_length"] for r in later)
                line = f"{env:<20} {algo:<5} {med['time_step']:>7.2f} {med['time_sampling']:>8.2f} "
                line += f"{med['time_scoring']:>7.2f} {med['time_training']:>8.2f} {med['time_syncing']:>5.2f}"
                line += "".join(f" {s:>10.2f}" for s in per_step) + f" {tokens:>6.1f}"
                lines.append(line)
                print(line, flush=True)
                if args.top:
                    stats.sort_stats("tottime").print_stats(args.top)
    print(f"\nseconds per step, median over steps 2-{args.steps} (profiled columns: mean over all steps)")
    print(head)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
