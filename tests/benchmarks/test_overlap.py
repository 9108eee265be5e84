"""benchmarks/overlap.py: the real producer, pacing and weight staging driven by a sampler and a
trainer of known durations. Its quick mode runs with every check holding; the pacing lets a fast
sampler run exactly K updates ahead, never more; a sync that never reaches the engine is caught by
the staleness check; the zero-overhead schedule matches worked numbers. Timing targets are the
benchmark's to judge, not these tests' (only a loose sanity check here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlvr.envs.sampler import RequestSampler
from rlvr.trainers.samplers.local import local_sampler
from rlvr.trainers.samplers.protocol import SamplerBackend, TrainerSampler

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import overlap  # noqa: E402


def test_quick_mode_runs_with_its_checks_holding(tokenizer, capsys):
    """Every case at every K: staleness <= K on every step (the run raises otherwise), every
    model token's version known; each K samples the same lengths (the same S for every step), so
    the ratios compare like with like; overlapping beats the synchronous loop (loose: any gain)."""
    todo = overlap.cases(quick=True)
    runs = overlap.measure(todo, 1, tokenizer)
    for (name, mode), (r,) in runs.items():
        k = int(mode.split()[0])
        assert 0 <= r.staleness_max <= k, (name, mode)
        assert r.loads >= 1
        assert r.sample_s == runs[name, "0"][0].sample_s, (name, mode)
    tail = runs["long-tailed S", "0"][0].sample_s
    assert len(set(tail)) > 1 and max(tail) >= 2 * min(tail)  # the long-tailed case's S does vary
    assert runs["S = T", "1"][0].steps_per_s > runs["S = T", "0"][0].steps_per_s

    verdicts = overlap.report(todo, runs)
    out = capsys.readouterr().out
    assert [v[0] for v in verdicts] == [
        "S = T: K=1 vs K=0",
        "S = 2T: K=1 vs K=0",
        "T = 2S: K=1 vs K=0",
        "long-tailed S: K=2 over K=1",
    ]
    assert out.count("PASS") + out.count("FAIL") == 4 and "staleness <= K" in out


def test_a_fast_sampler_runs_exactly_k_updates_ahead(tokenizer):
    """T = 50 ms, S about 4 ms: the producer is held by the pacing alone, so the oldest token
    a step trains on is exactly K updates old (K=0: none), and samples that started before a new
    version arrived carry both (the staged weights reached the engine mid-rollout)."""
    case = overlap.Case("fast sampler", 0.05, 0.002, overlap.fixed_lengths(2), 5)
    for mode in ("0", "0 prod", "1", "2"):
        r = overlap.run(case, mode, tokenizer)
        assert r.staleness_max == int(mode.split()[0]), mode
        # synchronous: the first weights and one load a step; staged: at least one new version
        # taken mid-run (a version staged after the last rollout is never loaded)
        assert r.loads == r.steps + 1 if mode == "0" else r.loads >= 2, mode


class DroppingEngine(overlap.TimedEngine):
    """An engine whose weight loads never take: it keeps sampling with version 0."""

    def update_weights(self, named_tensors, version):
        self.loads += 1


@pytest.mark.parametrize("mode", ["0", "1"])
def test_a_sync_that_never_reaches_the_engine_stops_the_run(tokenizer, mode):
    """Synchronous (update_weights) or staged for the producer: tokens of version 0 trained at
    version K + 1 are past the bound, and the step raises rather than trains."""
    case = overlap.Case("dropped", 0.01, 0.002, overlap.fixed_lengths(2), 4)
    with pytest.raises(RuntimeError, match=f"max_staleness is {mode}"):
        overlap.run(case, mode, tokenizer, engine_class=DroppingEngine)


def test_the_stand_in_meets_the_sampler_protocols_and_checks_the_weights_it_loads(tokenizer):
    engine = overlap.TimedEngine(tokenizer, 0.001, overlap.fixed_lengths(1))
    assert isinstance(engine, SamplerBackend) and isinstance(engine, RequestSampler)
    sampler = local_sampler(engine)
    assert isinstance(sampler, TrainerSampler) and isinstance(sampler, RequestSampler)
    engine.update_weights(overlap.weights(3), 3)
    assert engine.version == 3
    with pytest.raises(RuntimeError, match="version 3 tagged as version 4"):
        engine.update_weights(overlap.weights(3), 4)


def test_the_zero_overhead_schedule_on_worked_numbers():
    """S = T = 0.2 s, 4 steps: K=0 4 x 0.4 = 1.6 s; K >= 1 fills the pipeline once: 0.2 x 5 = 1.0 s,
    so the ideal 2x is reached only over many steps. A long third step (S = 0.1, 0.1, 0.5, 0.1, 0.1;
    T = 0.2), worked by hand: K=0 1.9 s, K=1 1.4 s (the trainer waits for it), K=2 1.3 s (the
    sampler had started it one step earlier)."""
    assert overlap.simulate([0.2] * 4, 0.2, 0) == pytest.approx(1.6)
    assert overlap.simulate([0.2] * 4, 0.2, 1) == pytest.approx(1.0)
    assert overlap.simulate([0.2] * 4, 0.2, 2) == pytest.approx(1.0)
    long_third = [0.1, 0.1, 0.5, 0.1, 0.1]
    assert [overlap.simulate(long_third, 0.2, k) for k in (0, 1, 2)] == pytest.approx([1.9, 1.4, 1.3])
    assert [overlap.ideal(0.2, 0.2), overlap.ideal(0.2, 0.1), overlap.ideal(0.1, 0.2)] == pytest.approx([2, 1.5, 1.5])


def test_long_tailed_lengths_are_a_function_of_the_seed():
    length = overlap.long_tailed_lengths(4, 1.0, 64)
    draws = [length(seed, i) for seed in range(200) for i in range(2)]
    assert draws == [length(seed, i) for seed in range(200) for i in range(2)]
    assert min(draws) >= 1 and max(draws) <= 64 and max(draws) >= 8 * 4  # a tail well past the median
