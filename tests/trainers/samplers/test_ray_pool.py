"""Rollout workers on Ray (trainers.samplers.ray_pool): a real local Ray cluster (one per test session),
real vLLM engines in the workers, the real tiny model.

The tests about workers dying, failing to start or verifying remotely run `generate` workers
(`--sampler hf`): a vLLM engine takes ~20-40 s to start here (every replacement starts one more),
and the pool's deaths, replacements and errors are the same code for both backends. vLLM on the
workers stays covered by the pool the sampling tests share (seeds as in one process, weight loads,
an environment's error) and by the training runs (compared with the single-process run, resumed,
asynchronous)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import threading

import pytest

from rlvr.envs.rollout import RolloutRequest
from rlvr.envs.sampler import SamplingSettings
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.device import use_threads
from rlvr.trainers.samplers.factory import build_sampler
from rlvr.trainers.samplers.protocol import SamplerSpec
from rlvr.trainers.samplers.ray_pool import RayRolloutPool, RolloutWorkerError, chunks_of
from tests.conftest import require

MODEL_INFO = {"model": "tiny", "step": 0}


def test_chunks_are_contiguous_near_equal_and_never_empty():
    assert chunks_of(10, 3) == [range(0, 4), range(4, 7), range(7, 10)]
    assert chunks_of(4, 4) == [range(0, 1), range(1, 2), range(2, 3), range(3, 4)]
    assert chunks_of(2, 5) == [range(0, 1), range(1, 2)]  # more workers than tasks: some idle
    assert chunks_of(1, 1) == [range(0, 1)]


@pytest.mark.parametrize(
    "settings, problem",
    [
        ({"rollout_workers": 0}, "rollout_workers must be >= 1"),
    ],
)
def test_bad_ray_settings_are_config_errors(settings, problem):
    with pytest.raises(ConfigError, match=problem):
        TrainConfig(**settings).validate()


@pytest.fixture(scope="module")
def hf_spec(model_dir):
    """Workers that sample with `generate` on their own copy of the model: they start in seconds."""
    return SamplerSpec("hf", str(model_dir), seed=0, max_model_len=1024)


@pytest.fixture(scope="module")
def spec(model_dir):
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    return SamplerSpec(
        "vllm",
        str(model_dir),
        seed=0,
        max_model_len=1024,
        dtype="float32",
        max_num_seqs=64,
        seq_tokens=256,
        gpu_memory=0.3,
        chunked_prefill=False,
    )


@pytest.fixture(scope="module")
def pool(ray_cluster, spec, model_dir):
    pool = RayRolloutPool(spec, 2, threads=1)
    yield pool
    pool.close()


def roll(pool, env: str, env_args: dict, seeds, **kw) -> list:
    return pool.rollout(RolloutRequest(env, env_args, tuple(seeds), **kw))


def sampling(**kw) -> SamplingSettings:
    return SamplingSettings(max_tokens=12, temperature=1.0, seed=123, **kw)


def tokens(groups) -> list:
    return [(g.group_id, g.task_id, [tuple(ep.completion_ids) for ep in g.episodes]) for g in groups]


@pytest.mark.vllm
def test_workers_sample_what_one_process_samples(pool, spec, tokenizer):
    """Each task gets the seeds the single-process rollout gives it, whichever worker runs it."""
    from rlvr.envs.rollout import rollout

    seeds = list(range(40, 50))
    got = roll(
        pool,
        "rlvr/Arithmetic-v0",
        {},
        seeds=seeds,
        group_size=4,
        sampling=sampling(),
        model_info=MODEL_INFO,
        max_length=1024,
        group_id_start=7,
    )
    local = build_sampler(spec)
    try:
        want = rollout(
            RolloutRequest(
                "rlvr/Arithmetic-v0",
                {},
                seeds=seeds,
                group_size=4,
                sampling=sampling(),
                model_info=MODEL_INFO,
                max_length=1024,
                group_id_start=7,
            ),
            local,
            tokenizer,
            progress=False,
        )
    finally:
        local.close()
    assert [g.group_id for g in got] == list(range(7, 17))
    assert tokens(got) == tokens(want)
    assert pool.seconds > 0


@pytest.mark.vllm
def test_new_weights_reach_every_worker_with_their_version(pool, hf_model):
    """Weights pushed after a step change what every worker samples, and tag it with the version."""
    import torch

    seeds = list(range(8))
    before = roll(
        pool,
        "rlvr/Arithmetic-v0",
        {},
        seeds=seeds,
        group_size=2,
        sampling=sampling(),
        model_info=MODEL_INFO,
        max_length=1024,
    )
    moved = [(n, p.detach() + 0.05 * torch.randn_like(p)) for n, p in hf_model.named_parameters()]
    original = [(n, p.detach()) for n, p in hf_model.named_parameters()]
    try:
        pool.update_weights(moved, version=3)
        after = roll(
            pool,
            "rlvr/Arithmetic-v0",
            {},
            seeds=seeds,
            group_size=2,
            sampling=sampling(),
            model_info=MODEL_INFO,
            max_length=1024,
        )
        assert pool.version == 3
        assert {v for g in after for ep in g.episodes for v in ep.versions} == {3}
        changed = [a != b for a, b in zip(tokens(before), tokens(after))]
        assert sum(changed[:4]) and sum(changed[4:]), "one of the two workers kept the old weights"
    finally:
        pool.update_weights(original, version=0)


def test_a_worker_that_dies_mid_rollout_or_between_steps_is_replaced_and_nothing_lost(
    ray_cluster, hf_spec, hf_model, tmp_path
):
    """The env of task 5 ends its worker's process on its first reset: the pool starts a new worker
    (with the current weights), redoes that worker's chunk there, and every group comes back once,
    the same as a rollout in which nobody died. A worker killed between steps is replaced at the
    next sync, and samples what the dead one sampled."""
    marker = tmp_path / "died"
    env_args = {"marker": str(marker), "seed": 5}
    pool = RayRolloutPool(hf_spec, 2, threads=1)
    try:
        dead_pids = {w: ray_cluster.get(w.pid.remote()) for w in pool.workers}
        kwargs = dict(seeds=list(range(8)), group_size=2, sampling=sampling(), model_info=MODEL_INFO, max_length=1024)
        got = roll(pool, "ray_test_envs:test/DiesOnce-v0", env_args, **kwargs)
        assert marker.exists() and int(marker.read_text()) in dead_pids.values()
        assert pool.replaced == 1
        assert [g.group_id for g in got] == list(range(8)) and all(len(g.episodes) == 2 for g in got)
        again = roll(pool, "ray_test_envs:test/DiesOnce-v0", env_args, **kwargs)  # nobody dies now
        assert tokens(got) == tokens(again) and pool.replaced == 1

        victim = pool.workers[0]
        ray_cluster.kill(victim)  # between steps: found dead at the next sync
        pool.update_weights([(n, p.detach()) for n, p in hf_model.named_parameters()], version=0)
        assert pool.replaced == 2 and pool.workers[0] is not victim
        assert tokens(roll(pool, "ray_test_envs:test/DiesOnce-v0", env_args, **kwargs)) == tokens(got)
    finally:
        pool.close()


def test_workers_that_keep_dying_stop_the_rollout_with_a_typed_error(ray_cluster, hf_spec, tmp_path):
    """A task that kills every worker it lands on: after `max_replacements` new workers, a
    `RolloutWorkerError` (an RlvrError: one line from the CLI), not an endless loop."""
    pool = RayRolloutPool(hf_spec, 1, threads=1, max_replacements=1)
    try:
        with pytest.raises(RolloutWorkerError, match="died 2 times on the tasks of groups from 0"):
            roll(
                pool,
                "ray_test_envs:test/DiesOnce-v0",
                {"marker": str(tmp_path), "seed": 1},
                seeds=[1],
                group_size=2,
                sampling=sampling(),
                model_info=MODEL_INFO,
                max_length=1024,
            )
        assert pool.replaced == 1
    finally:
        pool.close()


@pytest.mark.vllm
def test_an_environment_error_propagates_and_replaces_nobody(pool, tmp_path):
    """An exception in an environment is the environment's failure, not a worker's death."""
    replaced = pool.replaced
    with pytest.raises(Exception, match="FileNotFoundError"):
        # the marker's directory does not exist: writing it raises before the process could end
        roll(
            pool,
            "ray_test_envs:test/DiesOnce-v0",
            {"marker": str(tmp_path / "no" / "x"), "seed": 1},
            seeds=[1],
            group_size=2,
            sampling=sampling(),
            model_info=MODEL_INFO,
            max_length=1024,
        )
    assert pool.replaced == replaced


@pytest.mark.vllm
def test_agents_play_on_the_workers_each_behind_a_gateway_of_its_own(pool):
    """rlvr/Agent-v0 on the workers: each rollout worker serves its own agent gateway beside its sampler;
    the groups come back in order, each episode holding its agent's two calls, token-exact and versioned."""
    got = roll(
        pool,
        "rlvr/Agent-v0",
        {"agent": "ray_test_envs:plan_then_answer", "timeout_s": 120},
        seeds=range(60, 64),
        group_size=2,
        sampling=sampling(),
        model_info=MODEL_INFO,
        max_length=1024,
        group_id_start=3,
    )
    assert [g.group_id for g in got] == [3, 4, 5, 6] and [g.task_id for g in got] == ["60", "61", "62", "63"]
    for g in got:
        assert len(g.episodes) == 2 and g.num_errors == 0
        for ep in g.episodes:
            assert ep.metadata["turns"] == 2 and ep.segment == 0
            assert 0 in ep.loss_mask and len(ep.versions) == len(ep.completion_ids)  # the follow-up's tokens masked


def test_a_worker_that_cannot_start_is_one_typed_error(ray_cluster, hf_spec, tmp_path):
    broken = dataclasses.replace(hf_spec, model=str(tmp_path / "no-model"))
    with pytest.raises(RolloutWorkerError, match="a rollout worker could not start"):
        RayRolloutPool(broken, 1, threads=1)


def train(tmp_path, **settings):
    from rlvr.trainers.loop import Trainer

    base = dict(
        device="cpu",  # Ray's workers sample on the CPU; the run without Ray must sample on it too, to compare
        tasks_per_step=4,
        group_size=4,
        max_tokens=12,
        lr=1e-3,
        warmup_steps=0,
        steps=3,
        eval_tasks=8,
        threads=1,
        progress=False,
        out=str(tmp_path),
    )
    cfg = TrainConfig.from_dict({**base, **settings})
    use_threads(cfg.threads)  # as `rlvr train` does: the Trainer leaves torch's threads to its caller
    trainer = Trainer(cfg)
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return trainer, summary, metrics


@pytest.mark.vllm
def test_training_on_ray_workers_is_the_single_process_run_and_resumes_exactly(ray_cluster, tmp_path):
    """`rlvr train --ray`: the workers sample what the single-process run samples, step after step
    (each step's weights reach them: the sampler/trainer gap stays at float32 noise). The driver
    gone after step 2 (its checkpoint written), `--resume` starts new workers and gives them the
    checkpoint's weights. So the run's rewards, held-out accuracy and final weights are those of the
    uninterrupted single-process run (float32, 1e-6): the one resumed Ray run shows both that the
    workers are the single process and that the resume is exact."""
    import torch

    train(tmp_path / "ray", ray=True, rollout_workers=2, steps=2, save_every=2)
    ray_trainer, ray_summary, ray_metrics = train(tmp_path / "ray", ray=True, rollout_workers=2, resume=True)
    one_trainer, one_summary, one_metrics = train(tmp_path / "one")
    assert ray_summary["start_step"] == 2 and ray_summary["steps"] == 3
    assert [m["step"] for m in ray_metrics] == [1, 2, 3]
    # every step's, the resumed step's too: the new workers hold the checkpoint's weights
    assert all(m["logprob_gap_max"] < 1e-4 for m in ray_metrics), [m["logprob_gap_max"] for m in ray_metrics]
    assert ray_trainer.sampler.version == sum(not m.get("skipped") for m in ray_metrics)  # one per update
    for key in ("reward_mean", "tokens_generated"):
        assert [m[key] for m in ray_metrics] == [m[key] for m in one_metrics], key
    assert ray_summary["eval_after"] == one_summary["eval_after"]
    for (name, a), (_, b) in zip(ray_trainer.policy.named_parameters(), one_trainer.policy.named_parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0, msg=name)


@pytest.mark.vllm
def test_ray_workers_are_the_asynchronous_producers(ray_cluster, tmp_path):
    """`--ray --max-staleness 1`: the rollout workers sample step s + 1 while the trainer updates on
    step s; the new weights reach each worker after its chunk in progress, so every token trained
    on is at most one update old, and some are (the workers did run ahead)."""
    trainer, summary, metrics = train(tmp_path, ray=True, rollout_workers=2, max_staleness=1, steps=5, eval_tasks=0)
    assert summary["steps"] == 5 and [m["step"] for m in metrics] == [1, 2, 3, 4, 5]
    assert all(m["staleness_max"] <= 1 for m in metrics), [m["staleness_max"] for m in metrics]
    assert any(m["staleness_1_frac"] > 0 for m in metrics)
    assert all(m["staleness_0_frac"] + m["staleness_1_frac"] == pytest.approx(1.0) for m in metrics)
    # one version per update: a step without reward variance takes none (trainers.zero_signal)
    assert trainer.sampler.version == sum(not m.get("skipped") for m in metrics) and trainer.sampler.replaced == 0
    assert not [t for t in threading.enumerate() if t.name == "rlvr-rollout-producer" and t.is_alive()]


@pytest.mark.docker
def test_rollout_workers_verify_on_the_verifier_workers_and_survive_losing_one(ray_cluster, hf_spec):
    """`--verifier-workers 2`: the rollout worker's environments run their programs on the verifier
    pool (their process's shared sandbox is the `RaySandbox`). A verifier worker killed while
    programs run on it is replaced and its programs run again: every episode is scored, once."""
    import time

    from rlvr.sandbox import RaySandbox, unavailable_reason

    reason = unavailable_reason()
    require(reason is None, reason or "")
    verifier = RaySandbox(2, pool_size=2)
    pool = RayRolloutPool(hf_spec, 1, threads=1, verifier=verifier)
    try:
        kwargs = dict(seeds=list(range(4)), group_size=2, sampling=sampling(), model_info=MODEL_INFO, max_length=1024)
        killer = threading.Timer(1.0, lambda: ray_cluster.kill(verifier.workers[0]))
        started = time.monotonic()
        killer.start()
        groups = roll(pool, "ray_test_envs:test/VerifiesInSandbox-v0", {"sleep_s": 2.0}, **kwargs)
        killer.join()
        assert time.monotonic() - started > 1.0  # the kill came while programs ran
        episodes = [ep for g in groups for ep in g.episodes]
        assert [g.group_id for g in groups] == [0, 1, 2, 3] and len(episodes) == 8
        assert all(ep.metadata["verifier"] == "RaySandbox" for ep in episodes)
        assert all(ep.outcome.value == "correct" for ep in episodes), [ep.outcome for ep in episodes]
        assert pool.replaced == 0  # the rollout worker lived on
    finally:
        pool.close()
    assert verifier.closed
