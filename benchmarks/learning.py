"""Learning benchmark: does RL raise held-out accuracy?

Each algorithm trains the default tiny model on rlvr/Arithmetic-v0 for up to `--minutes` (10)
through `rlvr train` (vLLM sampler, one process per algorithm); held-out accuracy is measured on a
fixed seed set at temperature 1.0 before and after (and every `--eval-every` steps for the
curves). Prints one table, and writes DIR/results.json, DIR/curves.png (held-out accuracy against
training time) and each run's own metrics, TensorBoard logs and reward.png under DIR/<algo>/.

    python benchmarks/learning.py                       # reinforce, rloo, grpo, ppo; 10 min each
    python benchmarks/learning.py --algos grpo --minutes 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TARGET_POINTS = 15.0
GAP_BOUND = 1e-4  # the sampler/trainer logprob gap the issue allows after a sync (float32)

# Settings shared by every algorithm; each algorithm's own below them. Tuned on this 2-core
# machine for the tiny model (see the README's learning section for what they reached).
COMMON = {
    "model": "tiny",
    "env": "rlvr/Arithmetic-v0",
    "sampler": "vllm",
    "tasks_per_step": 16,
    "group_size": 8,
    "max_tokens": 12,
    "temperature": 1.0,
    "threads": 1,
    "seed": 0,
    "save_every": 1000,
    "keep_last": 1,
    "lr": 1e-4,
    "warmup_steps": 30,  # as `rlvr train`'s defaults
}
PER_ALGO: dict[str, dict] = {
    "reinforce": {},
    "rloo": {},
    "grpo": {},
    "ppo": {"lr": 3e-5},  # 4 epochs per batch: a quarter of the step size moves the policy as far
}


def run_one(
    algo: str, out: Path, minutes: float, eval_tasks: int, eval_every: int, extra: dict, common: dict = COMMON
) -> dict:
    """Train one algorithm in its own `rlvr train` process (`common`, then the algorithm's own settings,
    then `extra`); return its numbers."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    settings = {
        **common,
        **PER_ALGO.get(algo, {}),
        **extra,
        "algo": algo,
        "out": str(out),
        "steps": 1_000_000,
        "time_limit": minutes * 60,
        "eval_tasks": eval_tasks,
        "eval_every": eval_every,
        "progress": False,
    }
    config = out / "config.yaml"
    config.write_text(yaml.safe_dump(settings, sort_keys=False))
    started = time.monotonic()
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    with (out / "train.log").open("w") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "rlvr", "train", "--config", str(config)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    wall = time.monotonic() - started
    if proc.returncode != 0:
        tail = (out / "train.log").read_text()[-2000:]
        return {"algo": algo, "error": f"rlvr train exited with {proc.returncode}:\n{tail}"}
    evals = [json.loads(x) for x in (out / "eval.jsonl").read_text().splitlines()]
    steps = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    elapsed = {r["step"]: r["time_elapsed"] for r in steps}
    return {
        "algo": algo,
        "steps": steps[-1]["step"],
        "train_minutes": steps[-1]["time_elapsed"] / 60,
        "wall_minutes": wall / 60,
        "before": evals[0]["accuracy"],
        "after": evals[-1]["accuracy"],
        "curve": [(elapsed.get(e["step"], 0.0) / 60, e["accuracy"]) for e in evals],
        "gap_mean": sum(r.get("logprob_gap_mean", 0.0) for r in steps) / len(steps),
        "gap_max": max(r.get("logprob_gap_max", 0.0) for r in steps),
        "gap_over": sum(r.get("logprob_gap_max", 0.0) >= GAP_BOUND for r in steps),
        "settings": {**PER_ALGO.get(algo, {}), **extra},
    }


def points(result: dict) -> float:
    """The held-out gain of a run, in points."""
    return 100 * (result["after"] - result["before"])


def passed(result: dict, target_points: float) -> bool:
    """The run finished and gained at least `target_points` (rounded off float noise)."""
    return "error" not in result and round(points(result), 6) >= target_points


def table(results: list[dict], eval_tasks: int) -> str:
    head = (
        f"{'algorithm':<10} {'steps':>6} {'train min':>9} {'before':>7} {'after':>7} {'points':>7}  {'+15?':<5} "
        f"{'gap mean':>8} {'gap max':>8} {'>=1e-4':>6}"
    )
    lines = [
        f"held-out accuracy on {eval_tasks} fixed tasks of rlvr/Arithmetic-v0, temperature 1.0; "
        "gap: |sampler - trainer| logprob after each sync "
        "(mean over tokens; worst token; steps whose worst token reached 1e-4)",
        head,
        "-" * len(head),
    ]
    for r in results:
        if "error" in r:
            lines.append(f"{r['algo']:<10} failed: {r['error'].splitlines()[0]}")
            continue
        lines.append(
            f"{r['algo']:<10} {r['steps']:>6} {r['train_minutes']:>9.1f} {r['before']:>7.3f} "
            f"{r['after']:>7.3f} {points(r):>+7.1f}  {'yes' if passed(r, TARGET_POINTS) else 'NO':<5} "
            f"{r['gap_mean']:>8.1e} {r['gap_max']:>8.1e} {r['gap_over']:>6}"
        )
    return "\n".join(lines)


def plot(results: list[dict], path: Path, title: str = "tiny model on rlvr/Arithmetic-v0") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    for r in results:
        if "curve" in r:
            xs, ys = zip(*r["curve"])
            ax.plot(xs, ys, "o-", ms=3, label=r["algo"])
    ax.set_xlabel("training time (minutes)")
    ax.set_ylabel("held-out accuracy")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algos", default="reinforce,rloo,grpo,ppo")
    p.add_argument("--minutes", type=float, default=10.0, help="training time per algorithm")
    p.add_argument("--eval-tasks", type=int, default=500)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--out", default=str(ROOT / "runs" / "learning"))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting for all")
    args = p.parse_args(argv)
    extra = {k: yaml.safe_load(v) for k, _, v in (s.partition("=") for s in args.set)}
    out = Path(args.out)
    results = []
    for algo in [a.strip() for a in args.algos.split(",") if a.strip()]:
        print(f"training {algo} for up to {args.minutes:g} min ...", file=sys.stderr, flush=True)
        results.append(run_one(algo, out / algo, args.minutes, args.eval_tasks, args.eval_every, extra))
        print(table(results[-1:], args.eval_tasks).splitlines()[-1], file=sys.stderr, flush=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    plot(results, out / "curves.png")
    print(table(results, args.eval_tasks))
    print(f"curves: {out / 'curves.png'}; per run: {out}/<algo>/metrics.jsonl, reward.png, tensorboard/")
    ok = all(passed(r, TARGET_POINTS) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
