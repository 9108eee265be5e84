"""Start-up and exit of a training process, with and without `rlvr.startup`'s collector policy.

Each run is a fresh process that does what `rlvr train --steps 1` does: import the stack, build
the trainer (the models and the vLLM engine), train one step, close the engine, exit. "paused"
wraps the imports and the build in `collector_paused()` and freezes the heap at exit
(`no_collection_at_exit()`), as the `rlvr` command does; "default" leaves Python's collector as
it is. Alternating, `--repeats` runs of each; the table gives medians and ranges (seconds).

    python benchmarks/startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """
import contextlib, json, sys, time
t0 = time.perf_counter()
from rlvr.startup import collector_paused, no_collection_at_exit
policy = sys.argv[1] == "paused"
block = collector_paused if policy else contextlib.nullcontext
if policy:
    no_collection_at_exit()
with block():
    from rlvr.trainers.config import TrainConfig
    config = TrainConfig.load(None, {"steps": 1, "eval_tasks": 0, "progress": False, "out": sys.argv[2]})
    from rlvr.trainers.preflight import check_run
    algo = check_run(config)
    from rlvr.trainers.loop import Trainer
with block():
    trainer = Trainer(config, algo)
built = time.perf_counter() - t0
trainer.train()
trainer.close()
print(json.dumps({"built": built, "closed": time.perf_counter() - t0}), flush=True)
"""


def one_run(policy: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-c", PROGRAM, policy, str(Path(out) / "run")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"the {policy} run failed:\n{p.stderr[-2000:]}")
    times = json.loads(p.stdout.strip().splitlines()[-1])
    # "exit": from the engine closed to the process gone (the interpreter's shutdown).
    return {"start-up": times["built"], "exit": wall - times["closed"], "wall": wall}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    runs: dict[str, list[dict[str, float]]] = {"default": [], "paused": []}
    for _ in range(args.repeats):
        for policy in runs:
            runs[policy].append(one_run(policy))
    print(f"\n{'collector':<10}" + "".join(f"{k + ' s (range)':>22}" for k in ("start-up", "exit", "wall")))
    for policy, rs in runs.items():
        cells = []
        for k in ("start-up", "exit", "wall"):
            xs = [r[k] for r in rs]
            cells.append(f"{statistics.median(xs):>8.2f} ({min(xs):.2f}-{max(xs):.2f})")
        print(f"{policy:<10}" + "".join(f"{c:>22}" for c in cells))
    saved = statistics.median(r["wall"] for r in runs["default"]) - statistics.median(r["wall"] for r in runs["paused"])
    print(f"paused saves {saved:.2f} s a process (median wall), over {args.repeats} runs of each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
