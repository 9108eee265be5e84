"""`truncated` episodes say why (turns, context, length), old logs still load, eval and train
report the reasons, and a run where many episodes do not fit in the context says so once."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from rlvr.envs.episode import Episode, TruncationReason
from rlvr.envs.evaluate import context_cut_warning, format_table, summarize, truncation_counts
from rlvr.envs.rollout import RolloutRequest, rollout
from rlvr.envs.sampler import SamplingSettings
from rlvr.trainers.models import load_causal_lm
from rlvr.trainers.samplers import HFSampler
from rlvr.verifiers.verdict import Outcome

GUESS = "rlvr/GuessNumber-v0"


def episode(outcome=Outcome.TRUNCATED, truncation=None, finish="stop", detail="", prompt=10, completion=3, **meta):
    return Episode(
        env_id="e",
        task_id="0",
        group_id=0,
        prompt_ids=[1] * prompt,
        completion_ids=[2] * completion,
        loss_mask=[1] * completion,
        logprobs=[0.0] * completion,
        turn_rewards=[0.0],
        outcome=outcome,
        messages=[],
        finish_reason=finish,
        metadata={"detail": detail, **meta},
        truncation=truncation,
    )


def test_reason_is_a_plain_string_in_logs_and_old_logs_load():
    ep = episode(truncation=TruncationReason.CONTEXT)
    d = json.loads(json.dumps(ep.to_dict()))
    assert d["truncation"] == "context" and Episode.from_dict(d).truncation is TruncationReason.CONTEXT
    assert episode(outcome=Outcome.CORRECT).to_dict()["truncation"] == ""
    assert Episode.from_dict(episode(outcome=Outcome.CORRECT).to_dict()).truncation is None
    # Logs written before the field: the reason comes from the finish reason and the rollout's note.
    for finish, detail, reason in [
        ("stop", "the next turn would not fit in the context", "context"),
        ("", "the prompt does not fit in the context", "context"),
        ("length", "", "length"),
        ("stop", "no end after 3 turns", "turns"),
    ]:
        old = episode(finish=finish, detail=detail).to_dict()
        del old["truncation"]
        assert Episode.from_dict(old).truncation is TruncationReason(reason)
    old = episode(outcome=Outcome.INCORRECT).to_dict()
    del old["truncation"]
    assert Episode.from_dict(old).truncation is None


@pytest.fixture(scope="module")
def hf_sampler(model_dir, tokenizer):
    return HFSampler(load_causal_lm(model_dir), tokenizer)


def test_rollout_types_each_reason(hf_sampler, tokenizer):
    prompt_len = len(
        tokenizer.apply_chat_template(
            gym.make(GUESS, n=20).reset(seed=0)[0], add_generation_prompt=True, tokenize=True, return_dict=False
        )
    )
    run = lambda max_length, max_tokens=4, **kw: [  # noqa: E731
        ep
        for g in rollout(
            RolloutRequest(
                GUESS,
                {"n": 20, **kw},
                seeds=[0, 1],
                group_size=2,
                sampling=SamplingSettings(max_tokens=max_tokens, seed=0),
                max_length=max_length,
            ),
            hf_sampler,
            tokenizer,
            progress=False,
        )
        for ep in g.episodes
    ]
    no_room = run(prompt_len)  # the prompt leaves no room for max_tokens
    assert all(ep.truncation is TruncationReason.CONTEXT for ep in no_room)
    assert all(ep.metadata["max_length"] == prompt_len for ep in no_room)
    cut = run(prompt_len + 20, max_turns=50)  # the conversation outgrows the context
    assert any(ep.truncation is TruncationReason.CONTEXT for ep in cut)
    turns = run(4096, max_tokens=16, max_turns=1)  # one turn allowed: out of turns (or cut by max_tokens)
    for ep in turns:
        if ep.outcome is Outcome.TRUNCATED:
            expected = TruncationReason.LENGTH if ep.finish_reason == "length" else TruncationReason.TURNS
            assert ep.truncation is expected
        else:
            assert ep.truncation is None
    length = run(4096, max_tokens=1, max_turns=1)
    assert {ep.truncation for ep in length if ep.outcome is Outcome.TRUNCATED} <= {TruncationReason.LENGTH}


def test_eval_summary_counts_reasons_and_warns():
    eps = (
        [
            episode(
                truncation=TruncationReason.CONTEXT,
                prompt=240,
                completion=12,
                max_length=256,
                sampling={"max_tokens": 32},
            )
        ]
        * 3
        + [episode(truncation=TruncationReason.LENGTH)]
        + [episode(outcome=Outcome.CORRECT)] * 6
    )
    assert truncation_counts(eps) == {"turns": 0, "context": 3, "length": 1}
    summary = summarize(eps, [1], env_id="e", env_args={}, model="m")
    table = format_table(summary)
    assert "truncated by      turns 0, context 3, length 1" in table
    assert summary["warnings"] and summary["warnings"][0] in table
    text = summary["warnings"][0]
    assert "3 of 10 episodes (30%)" in text and "256 tokens" in text and "max 240" in text
    assert "shorter prompts" in text and "longer context" in text and "max_tokens" in text
    # at most 20%: no warning; an old summary (no reasons) still formats
    assert context_cut_warning(eps[2:], 256) is None
    del summary["truncation"], summary["warnings"]
    assert "truncated by" not in format_table(summary)


def test_train_metrics_have_rates_per_reason():
    from rlvr.trainers.step_rollout import Rollout, rollout_metrics

    eps = [
        episode(truncation=TruncationReason.TURNS),
        episode(truncation=TruncationReason.CONTEXT),
        episode(outcome=Outcome.CORRECT),
        episode(outcome=Outcome.INCORRECT),
    ]
    r = Rollout(
        episodes=eps,
        all_episodes=eps,
        errors=0,
        groups_total=1,
        groups_kept=1,
        seconds_sampling=0.0,
        seconds_scoring=0.0,
    )
    m = rollout_metrics(r)
    assert (m["truncated_turns_rate"], m["truncated_context_rate"], m["truncated_length_rate"]) == (0.25, 0.25, 0.0)
