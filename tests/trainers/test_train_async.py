"""Asynchronous RL with the real in-process vLLM sampler: the producer at staleness 0 is exactly the
synchronous loop; at staleness 1 every token trained on is at most one update old (recorded per
token, across a weight load in the middle of a sample); a producer that fails stops the run with a
checkpoint to resume from; Ctrl-C leaves no thread and no request behind."""

from __future__ import annotations

import importlib.util
import json
import threading

import pytest
import torch

from rlvr.envs.sampler import SamplingSettings
from rlvr.trainers.config import TrainConfig
from rlvr.trainers.loop import Trainer
from rlvr.trainers.metrics import MetricsLogger
from rlvr.trainers.producer import ProducerError
from tests.conftest import require, train_device

pytestmark = pytest.mark.vllm


def config(out, **overrides) -> TrainConfig:
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    values = dict(
        device=train_device(),
        model="tiny",
        sampler="vllm",
        algo="grpo",
        tasks_per_step=4,
        group_size=4,
        max_tokens=12,
        lr=2e-3,
        warmup_steps=0,
        threads=1,
        progress=False,
        out=str(out),
        steps=4,
        save_every=100,
    )
    return TrainConfig.from_dict({**values, **overrides})


def rows(out) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def run(cfg: TrainConfig, overlap: bool | None = None) -> Trainer:
    trainer = Trainer(cfg, overlap=overlap)
    try:
        trainer.train()
    finally:
        trainer.sampler.close()
    return trainer


def producer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rlvr-rollout-producer" and t.is_alive()]


def test_staleness_0_through_the_producer_is_the_synchronous_loop(tmp_path):
    sync = run(config(tmp_path / "sync"))
    produced = run(config(tmp_path / "producer"), overlap=True)
    timing = lambda k: k.startswith(("time_", "memory_")) or k == "tokens_per_second"  # noqa: E731 - the process's
    a, b = rows(tmp_path / "sync"), rows(tmp_path / "producer")
    assert len(a) == len(b) == 4
    for x, y in zip(a, b):
        assert {k: v for k, v in x.items() if not timing(k)} == {k: v for k, v in y.items() if not timing(k)}
        assert y["staleness_max"] == 0 and y["staleness_0_frac"] == 1.0
    for (name, p), (_, q) in zip(sync.policy.named_parameters(), produced.policy.named_parameters()):
        assert torch.equal(p, q), name
    assert not producer_threads()


def test_weights_loaded_mid_sample_tag_each_token_with_its_version(model_dir, tokenizer, request):
    """A partial rollout: the engine takes new weights between two of its steps, and the tokens of
    one sample record which weights sampled them."""
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    from rlvr.trainers.models import load_causal_lm
    from rlvr.trainers.samplers import VLLMSampler

    sampler = VLLMSampler(str(model_dir), max_model_len=256)
    request.addfinalizer(sampler.close)
    sampler.track_versions = True
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Write a long story about ships."}],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    key = sampler.submit(prompt, 2, SamplingSettings(max_tokens=24, seed=3))
    done = sampler.poll() + sampler.poll() + sampler.poll()  # prefill and two decoding steps
    assert done == []
    policy = load_causal_lm(model_dir)
    sampler.update_weights(((n, p.detach()) for n, p in policy.named_parameters()), version=5)
    while sampler.unfinished():
        done += sampler.poll()
    [(got, samples)] = done
    assert got == key and len(samples) == 2
    for s in samples:
        k = s.versions.index(5)
        assert k >= 2 and s.versions == (0,) * k + (5,) * (len(s.token_ids) - k)


def test_staleness_1_trains_on_tokens_at_most_one_update_old_and_a_failing_producer_stops_the_run_to_resume(tmp_path):
    """A producer that fails a few steps in stops the run with its last finished step saved, and `--resume` goes
    on to the end. Both runs at staleness 1, whose steps (1-5, either run's) show that every token trained on is
    at most one update old, its version recorded per token, and some are (the producer ran ahead): one run
    checked for both properties, where test_staleness_1_trains_on_tokens_at_most_one_update_old had its own."""
    trainer = Trainer(config(tmp_path, max_staleness=1, steps=5))
    polls = {"n": 0}
    real_poll = trainer.sampler.inner.poll

    def crashing_poll():
        polls["n"] += 1
        if polls["n"] == 40:  # a few steps in (a step's rollout is ~12 engine steps)
            raise RuntimeError("engine died")
        return real_poll()

    trainer.sampler.inner.poll = crashing_poll
    try:
        with pytest.raises(ProducerError, match="engine died"):
            trainer.train()
    finally:
        trainer.sampler.close()
    finished = rows(tmp_path)[-1]["step"]
    assert 1 <= finished < 5 and not producer_threads()
    assert (tmp_path / "checkpoints" / f"step-{finished:08d}").is_dir()  # the last finished step, saved
    resumed = run(config(tmp_path, max_staleness=1, steps=5, resume=True))
    records = rows(tmp_path)
    assert resumed.step == 5 and [r["step"] for r in records] == list(range(1, 6))
    assert resumed.sampler.inner.track_versions  # each token's version, not its sample's last one
    assert all(r["staleness_max"] <= 1 for r in records)
    assert any(r["staleness_1_frac"] > 0 for r in records), [r["staleness_1_frac"] for r in records]  # ran ahead
    for r in records:  # decoupled PPO's correction and its metrics, every step
        assert r["staleness_0_frac"] + r["staleness_1_frac"] == pytest.approx(1.0)
        assert 0 < r["is_ess"] <= 1 and r["is_weight_mean"] > 0 and "time_waiting" in r
    assert not producer_threads()


def test_ctrl_c_leaves_no_thread_and_no_request(tmp_path, monkeypatch):
    trainer = Trainer(config(tmp_path, max_staleness=2, steps=6))
    real_log = MetricsLogger.log

    def interrupted(self, step, metrics):
        real_log(self, step, metrics)
        if step == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(MetricsLogger, "log", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            trainer.train()
        assert not producer_threads()
        assert trainer.sampler.unfinished() == 0
        # and the engine still works for whoever comes next
        assert len(trainer.sampler.generate([[1, 2, 3]], 2, SamplingSettings(max_tokens=4))[0]) == 2
    finally:
        trainer.sampler.close()
