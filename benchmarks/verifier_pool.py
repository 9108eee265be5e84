"""Verifier pool: how many `rlvr/Code-v0` episodes per second are scored through a local
`DockerSandbox` and through `sandbox.RaySandbox` (sandbox pools in Ray actors), sandbox bound.

The episodes are fixed: every built-in task's reference solution and its wrong one (70), scored
with `CodeEnv.verify` from a pool of `--threads` threads (32: as the trainer's environment threads
do). Configurations: a local DockerSandbox of 4 containers; RaySandbox with 1 worker of 4; with 2
workers of 4; with 2 workers of 2 (the same 4 containers as 1 x 4, to tell "more containers" from
"more workers"). Each is warmed up by one pass, then the configurations alternate for `--repeats`
passes; the table gives the median episodes/s and the min-max range. Every configuration must
give the same verdicts (outcome and score), pass after pass. Ray is started locally, on 2 CPUs (the
workers reserve none).

    python benchmarks/verifier_pool.py [--repeats 5] [--threads 32]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rlvr.envs.tasks.code import CodeEnv
from rlvr.sandbox import DockerSandbox, RaySandbox, Sandbox
from rlvr.verifiers.verdict import Outcome


@dataclass(frozen=True)
class Config:
    name: str
    workers: int  # 0: a local DockerSandbox
    pool_size: int

    def make(self) -> Sandbox:
        if self.workers == 0:
            return DockerSandbox(pool_size=self.pool_size)
        return RaySandbox(self.workers, pool_size=self.pool_size)


CONFIGS = (
    Config("local DockerSandbox", 0, 4),
    Config("RaySandbox", 1, 4),
    Config("RaySandbox", 2, 4),
    Config("RaySandbox", 2, 2),
)


def score_all(env: CodeEnv, jobs: list, threads: int) -> tuple[float, list[tuple]]:
    """One pass over every episode: the seconds it took and each episode's verdict."""

    def one(job) -> tuple:
        task, response = job
        verdict = env.verify(task, response)
        # not the count of tests passed: a wrong solution may pass a different number from run to run
        # (remove_duplicates' `list(set(items))` orders strings by the program's random hash seed)
        return verdict.outcome, verdict.score

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        verdicts = list(pool.map(one, jobs))
    return time.perf_counter() - start, verdicts


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no lscpu)"
    return next(
        (line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "unknown"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed passes per configuration (>= 5)")
    parser.add_argument("--threads", type=int, default=32, help="environment threads scoring at once")
    args = parser.parse_args()
    if args.repeats < 1 or args.threads < 1:
        parser.error("need --repeats >= 1 and --threads >= 1")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tasks = CodeEnv().tasks
    jobs = [(t, response) for t in tasks for response in (t.reference, t.wrong)]
    boxes = [c.make() for c in CONFIGS]
    envs_ = [CodeEnv(sandbox=box) for box in boxes]
    try:
        verdicts = [score_all(env, jobs, args.threads)[1] for env in envs_]  # warm-up: every container started
        seconds: list[list[float]] = [[] for _ in CONFIGS]
        for _ in range(args.repeats):  # alternate, so that drift in the machine's load hits all alike
            for i, env in enumerate(envs_):
                took, got = score_all(env, jobs, args.threads)
                seconds[i].append(took)
                assert got == verdicts[i], f"{CONFIGS[i]}: verdicts changed between passes"
    finally:
        for box in boxes:
            box.close()
        ray.shutdown()
    for config, got in zip(CONFIGS, verdicts, strict=True):
        assert got == verdicts[0], f"{config} gave other verdicts than {CONFIGS[0]}"
    correct = sum(outcome is Outcome.CORRECT for outcome, _ in verdicts[0])

    print(
        f"rlvr/Code-v0: {len(jobs)} episodes ({len(tasks)} tasks x reference and wrong; {correct} correct) "
        f"scored from {args.threads} threads; {args.repeats} passes after a warm-up; Ray on 2 CPUs"
    )
    print(f"CPU: {cpu_model()}")
    head = f"{'sandbox':<20} {'workers x containers':>20} {'episodes/s':>11} {'min-max':>13} {'x local':>8}"
    print(head)
    print("-" * len(head))
    local = statistics.median(len(jobs) / s for s in seconds[0])
    for config, secs in zip(CONFIGS, seconds, strict=True):
        rates = [len(jobs) / s for s in secs]
        median = statistics.median(rates)
        shape = f"{config.workers or '-'} x {config.pool_size}"
        print(
            f"{config.name:<20} {shape:>20} {median:>11.1f} {f'{min(rates):.1f}-{max(rates):.1f}':>13} "
            f"{median / local:>8.2f}"
        )
    print("same verdicts in every configuration: yes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
