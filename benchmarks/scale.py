"""Ray mode (`rlvr train --ray`) against the single-process run: what rollout workers, verifier
workers and data-parallel trainer ranks cost or gain per step, phase by phase.

Each configuration trains the default model with GRPO on an environment (Arithmetic by default;
`--env rlvr/Code-v0` is sandbox bound) for `--steps` steps in its own `rlvr train` process, as a
user runs it (a Ray run starts its own local cluster). The table gives medians over the steps
after the first, and over `--repeats` runs, of: the step; its rollout (wall time: the engines, the
environment steps and, with Ray, the trip of the tasks and episodes); its sync (with Ray: the
weights put into the object store and loaded by every worker); its training phase (with ranks:
their collectives included); episodes per second of rollout. Peak memory is the process tree's
(the trainer, Ray's daemons and its workers). A Ray run samples the same episodes as the
single-process run (`tests/trainers/samplers/test_ray_pool.py`), so the differences are the cost, or the gain,
of the mode.

    python benchmarks/scale.py                            # 1 process vs 1 and 2 workers, 20 steps, 3 repeats
    python benchmarks/scale.py --workers 1 --ranks 2 --repeats 5 [--model small]
    python benchmarks/scale.py --env rlvr/Code-v0 --workers 2 --verifiers 1 2 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peak_memory import run_measured  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("time_step", "time_sampling", "time_scoring", "time_syncing", "time_training")


@dataclass(frozen=True)
class Mode:
    """One configuration: 0 rollout workers is the single-process run."""

    workers: int = 0
    verifiers: int = 0
    ranks: int = 1

    @property
    def name(self) -> str:
        if not self.workers:
            return "single process"
        extra = (f", {self.verifiers} verifier(s)" if self.verifiers else "") + (
            f", {self.ranks} ranks" if self.ranks > 1 else ""
        )
        return f"ray, {self.workers} worker(s){extra}"

    def flags(self) -> list[str]:
        if not self.workers:
            return []
        return [
            "--ray",
            "--rollout-workers",
            str(self.workers),
            "--verifier-workers",
            str(self.verifiers),
            "--trainer-ranks",
            str(self.ranks),
        ]


def run(out: Path, mode: Mode, args: argparse.Namespace) -> dict:
    """One `rlvr train` run; per-step phase seconds and the peak."""
    cmd = [
        sys.executable,
        "-m",
        "rlvr",
        "train",
        "--algo",
        "grpo",
        "--env",
        args.env,
        "--model",
        args.model,
        "--steps",
        str(args.steps),
        "--save-every",
        str(args.steps),
        "--threads",
        "1",
        "--out",
        str(out),
        "--no-progress",
        *mode.flags(),
    ]
    with (out.parent / f"{out.name}.log").open("w") as log:
        m = run_measured(cmd, cwd=str(ROOT), env={**os.environ, "TOKENIZERS_PARALLELISM": "false"}, output=log)
    if m.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed; see {out.parent / out.name}.log")
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()][1:]  # after the first step
    result: dict = {k: [r[k] for r in rows] for k in PHASES}
    # the rollout's wall time: the engine's seconds plus the rest (environment steps; with Ray, the
    # slowest worker's engine time plus everything else, the episodes' transfer included)
    result["rollout"] = [r["time_sampling"] + r["time_scoring"] for r in rows]
    result["peak"] = m.peak_rss_bytes
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="rlvr/Arithmetic-v0")
    p.add_argument("--model", default="tiny", help="tiny, small (~30M parameters) or a model directory")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="rollout worker counts to compare")
    p.add_argument(
        "--verifiers",
        type=int,
        nargs="*",
        default=[],
        help="verifier worker counts to compare, with the most rollout workers of --workers",
    )
    p.add_argument(
        "--ranks",
        type=int,
        nargs="*",
        default=[],
        help="trainer rank counts to compare, with the most rollout workers of --workers",
    )
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None, help="keep the runs here (default: a temporary directory)")
    args = p.parse_args(argv)
    if args.steps < 2 or args.repeats < 1 or any(w < 1 for w in args.workers + args.verifiers + args.ranks):
        p.error("need --steps >= 2, --repeats >= 1, and counts >= 1")
    out = Path(args.out or tempfile.mkdtemp(prefix="scale_"))
    out.mkdir(parents=True, exist_ok=True)
    most = max(args.workers)
    modes = [
        Mode(),
        *(Mode(w) for w in args.workers),
        *(Mode(most, verifiers=v) for v in args.verifiers),
        *(Mode(most, ranks=r) for r in args.ranks),
    ]
    runs: dict[Mode, list[dict]] = {m: [] for m in modes}
    for r in range(args.repeats):  # alternate the configurations within each repeat
        for i, m in enumerate(runs):
            print(f"--- repeat {r + 1}: {m.name} ...", file=sys.stderr, flush=True)
            runs[m].append(run(out / f"m{i}-r{r}", m, args))
    med = lambda m, k: statistics.median(x for run_ in runs[m] for x in run_[k])  # noqa: E731
    batch = 16 * 8
    print(
        f"{args.env}, {args.model} model, grpo, 16 tasks x 8 samples, {args.steps} steps x {args.repeats} repeats, "
        "1 torch thread; "
        f"medians over the steps after the first"
    )
    print(
        f"{'mode':<34} {'step s':>7} {'rollout s':>9} {'sync s':>7} {'training s':>10} {'episodes/s':>10} "
        f"{'x single':>8} {'peak MiB':>9}"
    )
    single = med(Mode(), "time_step")
    for m in runs:
        step = med(m, "time_step")
        print(
            f"{m.name:<34} {step:>7.3f} {med(m, 'rollout'):>9.3f} {med(m, 'time_syncing'):>7.3f} "
            f"{med(m, 'time_training'):>10.3f} {batch / med(m, 'rollout'):>10.1f} {step / single:>8.2f} "
            f"{statistics.median(x['peak'] for x in runs[m]) / 2**20:>9.0f}"
        )
    print(f"(runs in {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
