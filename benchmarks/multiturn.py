"""Multi-turn rollout throughput: per-episode scheduling beside lockstep, on an environment whose
steps take a variable time (as a sandbox or a remote tool does).

The environment is `rlvr/GuessNumber-v0` whose every step also waits 0-200 ms (uniform, drawn from
the task and the turn, so both schedules meet the same delays). Both schedules play the same
tasks with the same sampler (vLLM, the default model) and settings, alternating, after a warm-up
of each; the table gives episodes per second (median of --repeats) and the ratio (target >= 1.5x).

    python benchmarks/multiturn.py [--model tiny] [--tasks 32] [--group-size 4] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import zlib

import gymnasium as gym

from rlvr.envs.tasks.guess_number import GuessNumberEnv

TARGET = 1.5
ENV_ID = "rlvr-bench/SlowGuessNumber-v0"


class SlowGuessNumberEnv(GuessNumberEnv):
    """GuessNumber whose every step first waits 0-`max_delay` seconds."""

    def __init__(self, max_delay: float = 0.2, **kwargs):
        super().__init__(**kwargs)
        self.max_delay = max_delay

    def respond(self, action: str):
        u = zlib.crc32(f"{self.task.task_id}/{self.turns}".encode()) / 2**32
        time.sleep(u * self.max_delay)
        return super().respond(action)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny")
    p.add_argument("--tasks", type=int, default=32)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--max-delay", type=float, default=0.2, help="seconds: each step waits uniform(0, this)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs of each (the median is reported)")
    args = p.parse_args(argv)

    from rlvr.envs.rollout import RolloutRequest, rollout
    from rlvr.envs.sampler import SamplingSettings
    from rlvr.trainers.models import load_tokenizer, resolve_model
    from rlvr.trainers.samplers import VLLMSampler

    gym.register(ENV_ID, entry_point=SlowGuessNumberEnv)
    model = resolve_model(args.model)
    tokenizer = load_tokenizer(model)
    seeds = list(range(1_000_000, 1_000_000 + args.tasks))
    sampling = SamplingSettings(max_tokens=args.max_tokens, seed=0)

    def play(per_episode: bool) -> tuple[int, int, float]:
        t0 = time.perf_counter()
        groups = rollout(
            RolloutRequest(
                ENV_ID, {"max_delay": args.max_delay}, seeds=seeds, group_size=args.group_size, sampling=sampling
            ),
            sampler,
            tokenizer,
            progress=False,
            per_episode=per_episode,
        )
        seconds = time.perf_counter() - t0
        episodes = [ep for g in groups for ep in g.episodes]
        return len(episodes), sum(ep.metadata["turns"] for ep in episodes), seconds

    schedules = {"lockstep": False, "per episode": True}
    with VLLMSampler(str(model)) as sampler:
        for per_episode in schedules.values():
            play(per_episode)  # warm-up
        runs: dict[str, list[tuple[int, int, float]]] = {name: [] for name in schedules}
        for _ in range(args.repeats):
            for name, per_episode in schedules.items():
                runs[name].append(play(per_episode))

    rates = {name: [e / s for e, _, s in r] for name, r in runs.items()}
    print(
        f"\n{ENV_ID} (GuessNumber, each step waits 0-{args.max_delay:g} s): {args.tasks} tasks x "
        f"G={args.group_size}, max_tokens {args.max_tokens}, model {model}, {args.repeats} runs each"
    )
    print(f"{'schedule':<12} {'episodes':>8} {'turns':>6} {'seconds':>8} {'episodes/s':>10} {'range':>13}")
    for name, r in runs.items():
        episodes, turns = r[0][0], statistics.median(t for _, t, _ in r)
        seconds = statistics.median(s for _, _, s in r)
        lo, hi = min(rates[name]), max(rates[name])
        print(
            f"{name:<12} {episodes:>8} {turns:>6.0f} {seconds:>8.2f} {statistics.median(rates[name]):>10.2f} "
            f"{lo:>6.2f}-{hi:<6.2f}"
        )
    ratio = statistics.median(rates["per episode"]) / statistics.median(rates["lockstep"])
    verdict = "PASS" if ratio >= TARGET else "FAIL"
    print(f"per episode / lockstep: {ratio:.2f}x  (target >= {TARGET}x: {verdict})")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
