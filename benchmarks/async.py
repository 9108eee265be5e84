"""Asynchronous RL: `rlvr train --max-staleness K` for K = 0 (sample, then train), 1 and 2.

Each run trains the default model with GRPO on rlvr/Arithmetic-v0 (16 tasks x 8 samples a step,
the same steps, so the same number of samples) in its own `rlvr train` process, as a user runs it;
its peak memory (the process tree's) is measured. Steps per second are the steps over the training
loop's wall time (`time_elapsed` of the last step: no start-up, no evaluation). Then `rlvr eval`
measures the final checkpoint on the same held-out tasks with the same sampling seed, so the
accuracies of K > 0 and K = 0 are compared task by task (a paired 95% interval of the difference,
over the tasks, of the per-task correctness averaged over the repeats). The runs alternate K within
each repeat; the table gives medians and ranges over the repeats.

With `--ray`, the sampler is a Ray rollout worker (`--ray --rollout-workers 1`): the engine and the
environments in their own process, so sampling and training overlap without sharing a GIL. The
runs are then the single-process K = 0 (the baseline) and the Ray mode at K = 0, 1, 2.

    python benchmarks/async.py                     # 60 steps, 5 repeats, 4,000 held-out tasks
    python benchmarks/async.py --steps 30 --repeats 1 --eval-tasks 100   # a quick look
    python benchmarks/async.py --ray --threads 1   # the producer in its own process, one core each
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peak_memory import run_measured  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPEED_TARGET, ACCURACY_POINTS = 1.4, 2.0
KS = (0, 1, 2)


@dataclass(frozen=True)
class Mode:
    k: int
    ray: bool = False

    @property
    def name(self) -> str:
        return f"{self.k} ray" if self.ray else str(self.k)


def train(out: Path, mode: Mode, steps: int, threads: int | None) -> tuple[float, int]:
    """One run; returns (steps per second of the training loop, peak memory in bytes)."""
    cmd = [
        sys.executable,
        "-m",
        "rlvr",
        "train",
        "--algo",
        "grpo",
        "--steps",
        str(steps),
        "--save-every",
        str(steps),
        "--max-staleness",
        str(mode.k),
        "--out",
        str(out),
        "--no-progress",
    ]
    cmd += ["--ray", "--rollout-workers", "1"] if mode.ray else []
    cmd += ["--threads", str(threads)] if threads else []
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    with (out.parent / f"{out.name}.log").open("w") as log:
        m = run_measured(cmd, cwd=str(ROOT), env=env, output=log)
    if m.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed; see {out.parent / out.name}.log")
    last = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()][-1]
    return steps / last["time_elapsed"], m.peak_rss_bytes


def held_out(out: Path, steps: int, tasks: int) -> dict[str, bool]:
    """Per held-out task, whether the final checkpoint's one sample (seed 0) is correct."""
    model = out / "checkpoints" / f"step-{steps:08d}"
    cmd = [
        sys.executable,
        "-m",
        "rlvr",
        "eval",
        "--model",
        str(model),
        "--tasks",
        str(tasks),
        "--seed",
        "0",
        "--max-tokens",
        "32",
        "--out",
        str(out / "eval"),
        "--no-progress",
    ]
    with (out.parent / f"{out.name}.eval.log").open("w") as log:
        m = run_measured(cmd, cwd=str(ROOT), output=log)
    if m.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed; see {out.parent / out.name}.eval.log")
    rows = [json.loads(x) for x in (out / "eval" / "episodes.jsonl").read_text().splitlines()]
    return {r["task_id"]: r["outcome"] == "correct" for r in rows}


def paired_interval(a: list[dict[str, bool]], b: list[dict[str, bool]]) -> tuple[float, float]:
    """Mean and 95% half-width (points) of b - a over tasks, each task's correctness averaged over repeats."""
    tasks = sorted(a[0])
    diffs = [100 * (statistics.mean(r[t] for r in b) - statistics.mean(r[t] for r in a)) for t in tasks]
    return statistics.mean(diffs), 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--eval-tasks",
        type=int,
        default=4000,
        help="held-out tasks (4,000: a paired interval of about +-1 point, narrow enough to judge 2)",
    )
    p.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary directory)")
    p.add_argument("--ray", action="store_true", help="sample on a Ray rollout worker (its own process)")
    p.add_argument("--threads", type=int, default=None, help="torch threads of each process (default: torch's)")
    args = p.parse_args(argv)
    modes = [Mode(0), *(Mode(k, True) for k in KS)] if args.ray else [Mode(k) for k in KS]
    base_mode, k1 = modes[0], next(m for m in modes if m.k == 1)

    root = args.out or Path(tempfile.mkdtemp(prefix="rlvr-async-"))
    speed: dict[Mode, list[float]] = {m: [] for m in modes}
    memory: dict[Mode, list[int]] = {m: [] for m in modes}
    correct: dict[Mode, list[dict[str, bool]]] = {m: [] for m in modes}
    for r in range(args.repeats):
        for m in modes:
            out = root / f"repeat{r}" / f"k{m.k}{'-ray' if m.ray else ''}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            rate, peak = train(out, m, args.steps, args.threads)
            speed[m].append(rate)
            memory[m].append(peak)
            correct[m].append(held_out(out, args.steps, args.eval_tasks))
            print(
                f"repeat {r + 1}/{args.repeats} K={m.name}: {rate:.3f} steps/s, "
                f"accuracy {statistics.mean(correct[m][-1].values()):.3f}",
                flush=True,
            )

    base = statistics.median(speed[base_mode])
    print(
        f"\nrlvr/Arithmetic-v0, grpo, 16 tasks x 8, {args.steps} steps, {args.repeats} repeats, "
        f"{args.eval_tasks} held-out tasks, threads {args.threads or 'default'}; runs in {root}"
    )
    print(f"{'K':>5} {'steps/s':>8} {'range':>13} {'vs K=0':>7} {'accuracy':>9} {'vs K=0 (95%)':>15} {'peak MiB':>9}")
    verdicts = []
    for m in modes:
        acc = statistics.mean(statistics.mean(c.values()) for c in correct[m])
        ratio = statistics.median(speed[m]) / base
        if m == base_mode:
            diff_text = "-"
        else:
            mean, half = paired_interval(correct[base_mode], correct[m])
            diff_text = f"{mean:+.1f} +-{half:.1f}"
            if m == k1:
                verdicts.append(("steps/s at K=1", f"{ratio:.2f}x", ratio >= SPEED_TARGET, f">= {SPEED_TARGET}x"))
                inside = abs(mean) + half <= ACCURACY_POINTS
                verdicts.append(("accuracy K=1 - K=0", diff_text, inside, f"within +-{ACCURACY_POINTS:g} points"))
        print(
            f"{m.name:>5} {statistics.median(speed[m]):>8.3f} {min(speed[m]):>6.3f}-{max(speed[m]):<6.3f} "
            f"{ratio:>6.2f}x {acc:>9.3f} {diff_text:>15} {statistics.median(memory[m]) / 2**20:>9.0f}"
        )
    for name, value, ok, target in verdicts:
        print(f"{name}: {value} (target {target}: {'PASS' if ok else 'FAIL'})")
    return 0 if all(ok for *_, ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
