"""The sampler seam (trainers.samplers.protocol, registry, factory): every registered backend is
built by the one factory and meets the declared contract; the trainer's sampler, local or the Ray
pool, meets `TrainerSampler`; `rlvr eval` asks the same factory; and a backend registered by one
entry alone trains and rolls out. Real tiny model, real Hugging Face generation."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect

import pytest
import torch

from rlvr.envs.rollout import RolloutRequest
from rlvr.envs.sampler import SamplingSettings
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.samplers import registry
from rlvr.trainers.samplers.factory import build_sampler
from rlvr.trainers.samplers.hf_sampler import HFCopySampler, HFSampler
from rlvr.trainers.samplers.local import LocalSampler, local_sampler
from rlvr.trainers.samplers.protocol import SamplerBackend, SamplerSpec, TrainerSampler
from tests.conftest import train_device

TRAINER_SIDE = [name for name, member in inspect.getmembers(TrainerSampler) if not name.startswith("_")]


def test_every_registered_builder_exists_and_takes_spec_version_policy():
    for name, entry in registry.BACKENDS.items():
        module, _, function = entry.builder.partition(":")
        build = getattr(importlib.import_module(module), function)
        assert list(inspect.signature(build).parameters)[:3] == ["spec", "version", "policy"], name
    assert registry.TRAINING_BACKENDS == ("vllm", "hf")
    assert [n for n, b in registry.BACKENDS.items() if b.overlaps] == ["vllm"]


def test_an_unknown_backend_is_a_config_error_naming_the_known_ones(model_dir):
    with pytest.raises(ConfigError, match="no sampler backend 'sglang'; known: vllm, hf, openai"):
        build_sampler(SamplerSpec("sglang", str(model_dir)))


def test_hf_backends_meet_the_contract(model_dir, hf_model):
    shared = build_sampler(SamplerSpec("hf", str(model_dir)), version=3, policy=hf_model)
    assert isinstance(shared, HFSampler) and shared.model is hf_model  # the live policy: nothing to sync
    assert isinstance(shared, SamplerBackend) and shared.version is None and not shared.track_versions
    copy = build_sampler(SamplerSpec("hf", str(model_dir)), version=3)
    assert isinstance(copy, HFCopySampler) and isinstance(copy, SamplerBackend) and copy.version == 3
    assert copy.model is not hf_model and copy.tokenizer.eos_token_id is not None
    moved = [(n, p.detach() + 0.5) for n, p in hf_model.named_parameters()]
    copy.update_weights(moved, version=7)
    assert copy.version == 7
    name, tensor = moved[0]
    assert torch.equal(dict(copy.model.named_parameters())[name], tensor)


def test_local_sampler_rolls_out_a_request_and_counts_its_clock(model_dir):
    sampler = local_sampler(build_sampler(SamplerSpec("hf", str(model_dir)), version=2))
    try:
        assert isinstance(sampler, TrainerSampler) and sampler.version == 2
        sampling = SamplingSettings(max_tokens=6, seed=1)
        groups = sampler.rollout(RolloutRequest("rlvr/Arithmetic-v0", {}, (5, 6), 2, sampling, group_id_start=4))
        assert [g.group_id for g in groups] == [4, 5] and all(len(g.episodes) == 2 for g in groups)
        assert sampler.seconds > 0
        sampler.reset_clock()
        assert sampler.seconds == 0
    finally:
        sampler.close()


def test_the_ray_pool_meets_the_trainer_side_protocol_without_starting_ray():
    from rlvr.trainers.samplers.ray_pool import RayRolloutPool

    for name in TRAINER_SIDE:
        if name not in ("seconds", "version"):  # instance attributes, set by __init__
            assert callable(getattr(RayRolloutPool, name, None)), name
    assert {
        "rollout",
        "update_weights",
        "stage",
        "start_producing",
        "stop_producing",
        "reset_clock",
        "close",
        "version",
    } <= set(TRAINER_SIDE)


def test_the_trainer_reaches_its_sampler_through_the_protocol_only(tmp_path):
    from rlvr.trainers.loop import Trainer

    cfg = TrainConfig.from_dict(
        dict(
            device=train_device(),
            sampler="hf",
            tasks_per_step=2,
            group_size=2,
            max_tokens=6,
            steps=1,
            threads=1,
            progress=False,
            out=str(tmp_path),
        )
    )
    trainer = Trainer(cfg)
    try:
        assert isinstance(trainer.sampler, LocalSampler) and isinstance(trainer.sampler, TrainerSampler)
        assert trainer.sampler.inner.model is trainer.policy
        assert trainer.train_step()["episodes"] == 4
    finally:
        trainer.close()
    source = inspect.getsource(importlib.import_module("rlvr.trainers.loop"))
    assert "config.ray" not in source and "getattr(self.sampler" not in source and ".inner" not in source


def test_overlap_needs_a_backend_that_loads_weights_between_engine_steps(tmp_path):
    from rlvr.trainers.loop import Trainer

    cfg = TrainConfig.from_dict(dict(sampler="hf", steps=1, progress=False, out=str(tmp_path), device=train_device()))
    with pytest.raises(ConfigError, match="overlapped sampling needs a sampler that loads weights"):
        Trainer(cfg, overlap=True)


def eval_args(**kw) -> argparse.Namespace:
    base = dict(
        model="tiny",
        sampler=None,
        base_url=None,
        api="completions",
        api_key=None,
        tokenizer=None,
        seed=3,
        max_model_len=None,
    )
    return argparse.Namespace(**{**base, **kw})


def test_rlvr_eval_describes_its_sampler_to_the_same_factory(monkeypatch):
    from rlvr.commands.eval import sampler_spec
    from rlvr.trainers.models import resolve_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    tiny = str(resolve_model("tiny"))
    assert sampler_spec(eval_args()) == SamplerSpec("vllm", tiny, seed=3)
    assert sampler_spec(eval_args(sampler="hf", max_model_len=64)) == SamplerSpec("hf", tiny, seed=3, max_model_len=64)
    url = "http://127.0.0.1:9/v1"
    assert sampler_spec(eval_args(base_url=url, api_key="k")) == SamplerSpec(
        "openai", "tiny", tokenizer="tiny", base_url=url, api_key="k"
    )
    chat = sampler_spec(eval_args(model="served-name", base_url=url, api="chat"))
    assert chat == SamplerSpec("openai-chat", "served-name", base_url=url)
    sampler = build_sampler(chat)  # no request is sent until a rollout
    assert isinstance(sampler, SamplerBackend) and sampler.version is None


# ---- a new backend: its own module (here, this one) and one registry entry ----------------------
class Greedy(HFCopySampler):
    """A backend that always decodes greedily (a stand-in for a new engine), on its own model copy."""

    def generate(self, prompt_token_ids, n, sampling):
        return super().generate(prompt_token_ids, n, dataclasses.replace(sampling, temperature=0.0))


def build(spec, version, policy=None):
    from rlvr.trainers.models import load_causal_lm, load_tokenizer

    return Greedy(load_causal_lm(spec.model), load_tokenizer(spec.tokenizer or spec.model), version=version)


def test_a_backend_registered_once_is_built_synced_and_rolled_out(model_dir, hf_model, monkeypatch):
    monkeypatch.setitem(registry.BACKENDS, "greedy", registry.Backend(f"{__name__}:build", trains=True))
    sampler = local_sampler(build_sampler(SamplerSpec("greedy", str(model_dir)), version=0))
    try:
        assert isinstance(sampler.inner, SamplerBackend)
        sampler.update_weights([(n, p.detach()) for n, p in hf_model.named_parameters()], version=1)
        request = RolloutRequest("rlvr/Arithmetic-v0", {}, (1, 2), 3, SamplingSettings(max_tokens=6, seed=0))
        groups = sampler.rollout(request)
        assert sampler.version == 1 and len(groups) == 2
        for g in groups:  # greedy: a group's copies agree
            assert len({tuple(ep.completion_ids) for ep in g.episodes}) == 1
    finally:
        sampler.close()
