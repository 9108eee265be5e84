"""Asynchronous RL's pipeline alone: `--max-staleness K` with a sampler and a trainer of known durations.

`benchmarks/async.py` measures real runs, where on 2 cores the engine and the trainer share the
cores and slow each other (the machine's contention). Here both sides wait off the CPU for fixed,
known times, so what is left is the pipeline's own overhead: the producer thread, its pacing, the
weight staging, the rollout's environments and the collation of each batch.

What is real and what stands in:
- Real: `trainers.producer.RolloutProducer` (pacing: the rollout of step s starts once step s - K
  is trained), `trainers.samplers.local.LocalRequestSampler` with its `StagedWeights` (the trainer
  stages each new version; the producer's thread loads it before the engine's next step),
  `envs.rollout.rollout` (per-episode schedule) on `rlvr/Arithmetic-v0` with the default model's
  tokenizer, `trainers.batch.collate`, and `trainers.kernels.rollout_correction.staleness_stats`, which
  raises when a token was sampled more than K updates before the weights it trains (the check
  the `Trainer` runs on every step).
- Stand-ins: `TimedEngine`, a `SamplerBackend` and `RequestSampler` whose every `poll` is one
  engine step of `step_s` seconds (a sleep) that gives each running sample one token tagged with
  the engine's policy version; a sample's length is drawn from its request's seed, so every K
  samples the same lengths. Its `update_weights` checks that the tensor it is handed carries the
  version it is told (a sync that loaded other weights raises). The trainer is a loop that drives
  the producer as `Trainer.train` does (get, collate and check staleness, train: a sleep of T,
  version + 1, stage, advance).

Cases (the sampling time S of a step is its longest sample: tokens x `step_s`):
- fixed S and T: S = T, S = 2T, T = 2S. Target: K=1 within 10% of the ideal (S + T) / max(S, T).
- long-tailed: each sample's length log-normal (median 4 tokens, sigma 1.0, at most 64), so a
  step's S is long-tailed too, with a mean near T. Episodes in flight when new weights arrive
  carry each token's version. Target: K=2 faster than K=1 (its slack absorbs the long steps).
K=0 is the synchronous loop (`Trainer` without a producer), the baseline of every ratio; "0 prod"
(S = T only) is the producer at K=0, the same steps through the thread, which shows its own cost.
"sim" is the ratio a zero-overhead pipeline would reach on the same steps (pipeline fill
included): the measured ratio over it is the pipeline's efficiency.

    python benchmarks/overlap.py                 # 5 repeats, S and T about 0.2 s (about 15 minutes)
    python benchmarks/overlap.py --quick         # 1 repeat, 20 ms steps, a few seconds: checks only
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rlvr.envs.rollout import RolloutRequest
from rlvr.envs.sampler import Sample, SamplingSettings
from rlvr.trainers.batch import collate
from rlvr.trainers.kernels.rollout_correction import staleness_stats
from rlvr.trainers.outage import error_message
from rlvr.trainers.producer import RolloutProducer
from rlvr.trainers.samplers.local import LocalSampler, local_sampler

ENV = "rlvr/Arithmetic-v0"
WEIGHT_NAME = "model.stand_in.weight"
IDEAL_SHARE = 0.9  # K=1 must reach 90% of (S + T) / max(S, T)


# ---- the stand-in engine ---------------------------------------------------------------------
def fixed_lengths(tokens: int) -> Callable[[int | None, int], int]:
    """Every sample `tokens` long."""
    return lambda seed, index: tokens


def long_tailed_lengths(median: float, sigma: float, most: int) -> Callable[[int | None, int], int]:
    """Sample `index` of a request seeded `seed`: ceil(median * exp(sigma * z)), z standard normal
    drawn from (seed, index), in [1, most]: a function of the seed alone, the same at every K."""

    def length(seed: int | None, index: int) -> int:
        z = np.random.default_rng([0 if seed is None else seed, index]).standard_normal()
        return int(min(most, max(1, math.ceil(median * math.exp(sigma * z)))))

    return length


@dataclass
class _Running:
    lengths: list[int]
    tokens: list[list[int]] = field(default_factory=list)  # per sample: the version of each token


class TimedEngine:
    """A `SamplerBackend` and `RequestSampler` whose engine steps take `step_s` seconds off the CPU.
    Tokens are tagged as vLLM's are: streamed (`track_versions`), each with the version of the
    step that made it; otherwise, each sample whole with the version it finished under."""

    def __init__(self, tokenizer: Any, step_s: float, lengths: Callable[[int | None, int], int], version: int = 0):
        self.tokenizer = tokenizer
        self.step_s = step_s
        self.lengths = lengths
        self.version = version
        self.max_model_len: int | None = None
        self.track_versions = False
        self.loads = 0  # weight loads, each checked against its version
        self.token_id = tokenizer.encode("1", add_special_tokens=False)[0]
        self._running: dict[str, _Running] = {}
        self._keys = 0
        self._late = 0.0  # seconds the engine's steps have run over `step_s`, to make up

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]], version: int) -> None:
        """Load policy `version`: the stand-in's one tensor must hold the version it is tagged with."""
        tensors = dict(named_tensors)
        held = float(tensors[WEIGHT_NAME][0])
        if held != version:
            raise RuntimeError(f"the engine was handed weights of version {held:g} tagged as version {version}")
        self.version = int(version)
        self.loads += 1

    def submit(self, prompt_token_ids: Sequence[int], n: int, sampling: SamplingSettings) -> str:
        self._keys += 1
        key = f"timed-{self._keys}"
        lengths = [min(sampling.max_tokens, self.lengths(sampling.seed, i)) for i in range(n)]
        self._running[key] = _Running(lengths, [[] for _ in range(n)])
        return key

    def poll(self) -> list[tuple[str, list[Sample]]]:
        """One engine step: a wait of `step_s`, then one token for every unfinished sample. A sleep
        ends late (by a millisecond or more on a loaded machine): each step makes up the lateness
        carried so far, so that n steps take n x `step_s`, as the stand-in's duration says. At most
        one step's worth is carried: a stall of the whole machine is not paid back by the steps
        after it (they would be shorter than said)."""
        wait = max(0.0, self.step_s - self._late)
        t0 = time.perf_counter()
        time.sleep(wait)
        self._late = min(self.step_s, max(0.0, self._late + time.perf_counter() - t0 - self.step_s))
        done = []
        for key, run in list(self._running.items()):
            for length, versions in zip(run.lengths, run.tokens):
                if len(versions) < length:
                    versions.append(self.version)
            if all(len(v) == length for v, length in zip(run.tokens, run.lengths)):
                del self._running[key]
                done.append((key, [self._sample(v) for v in run.tokens]))
        return done

    def _sample(self, versions: list[int]) -> Sample:
        tags = versions if self.track_versions else [self.version] * len(versions)
        return Sample((self.token_id,) * len(versions), (-1.0,) * len(versions), "stop", tuple(tags))

    def generate(
        self, prompt_token_ids: Sequence[Sequence[int]], n: int, sampling: SamplingSettings
    ) -> list[list[Sample]]:
        keys = [self.submit(p, n, sampling) for p in prompt_token_ids]
        finished: dict[str, list[Sample]] = {}
        while len(finished) < len(keys):
            finished.update(self.poll())
        return [finished[k] for k in keys]

    def unfinished(self) -> int:
        return len(self._running)

    def cancel(self) -> None:
        self._running.clear()

    def close(self) -> None:
        self.cancel()


def weights(version: int) -> list[tuple[str, torch.Tensor]]:
    """The stand-in policy's weights at `version`: one small tensor holding the version."""
    return [(WEIGHT_NAME, torch.full((4,), float(version)))]


# ---- one run ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    train_s: float  # T: one training step
    step_s: float  # one engine step
    lengths: Callable[[int | None, int], int]
    steps: int
    modes: tuple[str, ...] = ("0", "1", "2")  # K; "0 prod": K=0 through the producer


@dataclass(frozen=True)
class Run:
    """One run's timing and what its checks saw."""

    seconds: float  # the training loop's wall time
    steps: int
    sample_s: tuple[float, ...]  # S per step: its longest sample's tokens x the engine step
    engine_s: float  # mean seconds a step's rollout spent in the engine (sleeps included)
    waited_s: float  # mean seconds the trainer waited for a rollout
    staleness_max: int
    staleness_mean: float
    spanning: float  # share of samples whose tokens came from more than one version
    loads: int

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds


def request(step: int, tasks: int, group_size: int, max_tokens: int) -> RolloutRequest:
    """Step `step`'s rollout: its own reset seeds and sampling seed (the same at every K)."""
    sampling = SamplingSettings(temperature=1.0, max_tokens=max_tokens, seed=1_000 * step)
    return RolloutRequest(ENV, {}, tuple(range(step * tasks, (step + 1) * tasks)), group_size, sampling)


def run(
    case: Case,
    mode: str,
    tokenizer: Any,
    tasks: int = 4,
    group_size: int = 2,
    max_tokens: int = 64,
    engine_class: type[TimedEngine] = TimedEngine,
) -> Run:
    """`case.steps` steps at staleness K (`mode`), driven as `Trainer.train` drives them. A step
    whose tokens were sampled more than K updates before its weights raises a RuntimeError."""
    k = int(mode.split()[0])
    overlap = mode != "0"
    engine = engine_class(tokenizer, case.step_s, case.lengths)
    sampler: LocalSampler = local_sampler(engine)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    version, sample_s, engine_s, waited, lags, spans = 0, [], [], [], [], []

    def produce(step: int) -> tuple[list, float]:  # as `Trainer.rollout`
        sampler.reset_clock()
        groups = sampler.rollout(request(step, tasks, group_size, max_tokens))
        return groups, sampler.seconds

    try:
        sampler.update_weights(weights(0), 0)
        produce(0)  # warm: the environment's module, the chat template, the pool's threads
        started = time.monotonic()
        producer = RolloutProducer(produce, 0, case.steps, k, version=0) if overlap else None
        if producer is not None:
            sampler.start_producing(producer.in_own_thread_and_stopping)
        try:
            for step in range(case.steps):
                t0 = time.monotonic()
                groups, seconds = producer.get(step) if producer is not None else produce(step)
                waited.append(time.monotonic() - t0)
                episodes = [ep for g in groups for ep in g.episodes]
                failed = [ep for ep in episodes if ep.is_error]
                if failed:
                    raise RuntimeError(f"step {step}: an episode failed: {error_message(failed[0])}")
                batch = collate(episodes, pad)
                if batch.versions is None:
                    raise RuntimeError(f"step {step}: the rollout carries no policy versions")
                stats = staleness_stats(batch.versions, batch.loss_mask, version, k)  # raises past K
                lags.append(stats)
                spans += [len(set(ep.versions)) > 1 for ep in episodes]
                sample_s.append(case.step_s * max(len(ep.completion_ids) for ep in episodes))
                engine_s.append(seconds)
                time.sleep(case.train_s)  # the update
                version += 1
                if producer is not None:
                    sampler.stage(weights(version), version)
                    producer.advance(step + 1)
                else:
                    sampler.update_weights(weights(version), version)
            seconds_total = time.monotonic() - started
        finally:
            if producer is not None:
                producer.close()
                sampler.stop_producing()
    finally:
        sampler.close()
    return Run(
        seconds=seconds_total,
        steps=case.steps,
        sample_s=tuple(sample_s),
        engine_s=statistics.mean(engine_s),
        waited_s=statistics.mean(waited),
        staleness_max=int(max(s["staleness_max"] for s in lags)),
        staleness_mean=statistics.mean(s["staleness_mean"] for s in lags),
        spanning=statistics.mean(spans),
        loads=engine.loads,
    )


# ---- the ideal -------------------------------------------------------------------------------
def simulate(sample_s: Sequence[float], train_s: float, k: int) -> float:
    """Seconds a zero-overhead pipeline takes for these steps: the rollout of step s starts when
    the rollout of s - 1 has ended and step s - K - 1 is trained; step s trains when its rollout
    has ended and step s - 1 is trained (K=0: one after the other)."""
    rolled: list[float] = []
    trained: list[float] = []
    for s, seconds in enumerate(sample_s):
        start = max(rolled[-1] if rolled else 0.0, trained[s - k - 1] if s - k - 1 >= 0 else 0.0)
        rolled.append(start + seconds)
        trained.append(max(rolled[-1], trained[-1] if trained else 0.0) + train_s)
    return trained[-1] if trained else 0.0


def ideal(sample_s: float, train_s: float) -> float:
    """K=1's speed-up over K=0 for many steps of fixed S and T."""
    return (sample_s + train_s) / max(sample_s, train_s)


# ---- the benchmark ---------------------------------------------------------------------------
def cases(quick: bool, steps: int | None = None) -> list[Case]:
    """The four cases, T about 0.2 s (--quick: 20 ms) and 20 engine steps to a mean S."""
    t = 0.02 if quick else 0.2
    dt = t / 20
    n = steps or (5 if quick else 40)
    return [
        Case("S = T", t, dt, fixed_lengths(20), n, ("0", "0 prod", "1", "2")),
        Case("S = 2T", t / 2, dt, fixed_lengths(20), n),
        Case("T = 2S", t, dt, fixed_lengths(10), n),
        # --quick: at most 30 tokens, answers short of the verifier's lazily loaded paths (`warm_up`)
        Case("long-tailed S", t, dt, long_tailed_lengths(4, 1.0, 30 if quick else 64), steps or (6 if quick else 40)),
    ]


def warm_up(tokenizer: Any, max_tokens: int = 64) -> None:
    """Load, outside the timing, what the rollouts load on first use and `run`'s own warm-up
    rollout may not reach: the verifier's heavier paths (rlvr/Arithmetic-v0 imports sympy for the
    first answer of over 30 digits: 8-15 s on a loaded 2-core machine, which would land in the
    first long-tailed run). One rollout with answers of every length from 1 to `max_tokens`."""
    engine = TimedEngine(tokenizer, 0.0, lambda seed, index: 1 + ((seed or 0) + index) % max_tokens)
    sampler = local_sampler(engine)
    try:
        sampling = SamplingSettings(max_tokens=max_tokens, seed=0)
        sampler.rollout(RolloutRequest(ENV, {}, tuple(range(max_tokens // 2)), 2, sampling))
    finally:
        sampler.close()


def measure(todo: list[Case], repeats: int, tokenizer: Any) -> dict[tuple[str, str], list[Run]]:
    """Every case's modes, alternating within each repeat: (case, mode) -> its runs."""
    runs: dict[tuple[str, str], list[Run]] = {(c.name, m): [] for c in todo for m in c.modes}
    for r in range(repeats):
        for c in todo:
            for m in c.modes:
                runs[c.name, m].append(run(c, m, tokenizer))
                print(
                    f"repeat {r + 1}/{repeats} {c.name} K={m}: {runs[c.name, m][-1].steps_per_s:.3f} steps/s",
                    flush=True,
                )
    return runs


def _median_range(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def report(todo: list[Case], runs: dict[tuple[str, str], list[Run]]) -> list[tuple[str, str, bool, str]]:
    """Print the table; returns the verdicts (name, value, met, target)."""
    repeats = len(next(iter(runs.values())))
    print(f"\n{ENV}, 4 tasks x 2 samples a step, {repeats} repeats; medians (ranges) over the repeats")
    head = f"{'case':<14} {'S s':>6} {'S run':>6} {'T s':>5} {'K':>6} {'steps/s':>20} {'vs K=0':>18} {'sim':>5}"
    print(head + f" {'ideal':>5} {'eff':>5} {'wait s':>6} {'lag max':>7} {'lag mean':>8} {'spanning':>8}")
    verdicts = []
    for c in todo:
        base = runs[c.name, "0"]
        sample_s = base[0].sample_s
        s_mean = statistics.mean(sample_s)
        sequential = simulate(sample_s, c.train_s, 0)
        ratios = {}
        for m in c.modes:
            rs = runs[c.name, m]
            ratios[m] = [r.steps_per_s / b.steps_per_s for r, b in zip(rs, base)]
            sim = sequential / simulate(sample_s, c.train_s, int(m.split()[0]))
            ideal_text = f"{ideal(s_mean, c.train_s):.2f}" if m == "1" and c.name != "long-tailed S" else "-"
            print(
                f"{c.name:<14} {s_mean:>6.3f} {statistics.median(r.engine_s for r in rs):>6.3f} {c.train_s:>5.3f} "
                f"{m:>6} {_median_range([r.steps_per_s for r in rs], '{:.3f}'):>20} "
                f"{_median_range(ratios[m]) + 'x':>18} {sim:>5.2f} {ideal_text:>5} "
                f"{statistics.median(ratios[m]) / sim:>5.2f} {statistics.median(r.waited_s for r in rs):>6.3f} "
                f"{max(r.staleness_max for r in rs):>7} {statistics.median(r.staleness_mean for r in rs):>8.2f} "
                f"{statistics.median(r.spanning for r in rs):>8.2f}"
            )
        if c.name == "long-tailed S":
            gain = [a / b for a, b in zip(ratios["2"], ratios["1"])]
            value = _median_range(gain) + "x"
            # the median, as for K=1: one repeat stalled by another job on a shared machine is noise
            verdicts.append((f"{c.name}: K=2 over K=1", value, statistics.median(gain) > 1.0, "median > 1x"))
        else:
            target = IDEAL_SHARE * ideal(s_mean, c.train_s)
            got = statistics.median(ratios["1"])
            value = _median_range(ratios["1"]) + "x"
            verdicts.append((f"{c.name}: K=1 vs K=0", value, got >= target, f"median >= {target:.2f}x"))
    print("every step of every run: staleness <= K, every token's version known, every weight load its own version")
    for name, value, ok, target in verdicts:
        print(f"{name}: {value} (target {target}: {'PASS' if ok else 'FAIL'})")
    return verdicts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=None, help="default 5 (--quick: 1)")
    p.add_argument("--steps", type=int, default=None, help="steps per run (default 40; --quick: 5, long-tailed 6)")
    p.add_argument("--quick", action="store_true", help="20 ms steps, a few of them: the checks, not the timing")
    args = p.parse_args(argv)
    from rlvr.trainers.models import load_tokenizer

    tokenizer = load_tokenizer("tiny")
    warm_up(tokenizer)
    todo = cases(args.quick, args.steps)
    verdicts = report(todo, measure(todo, args.repeats or (1 if args.quick else 5), tokenizer))
    return 0 if all(ok for _, _, ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
