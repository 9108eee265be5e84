"""The recording rule (`envs.agent.calls.segments`) on worked token ids."""

from __future__ import annotations

import pytest

from rlvr.envs.agent.calls import ENV_VERSION, Call, Segment, segments
from rlvr.envs.sampler import FinishReason


def call(prompt, completion, logprobs=None, **kw) -> Call:
    logprobs = logprobs if logprobs is not None else [-0.5] * len(completion)
    return Call(tuple(prompt), tuple(completion), tuple(logprobs), **kw)


def test_a_call_that_extends_joins_with_the_environment_tokens_masked():
    # call 0: prompt 1 2 3 -> 10 11 (eos 99); call 1's prompt is that plus the env's 7 8 (tool reply)
    calls = [
        call([1, 2, 3], [10, 11, 99], [-0.1, -0.2, -0.3], version=4),
        call([1, 2, 3, 10, 11, 99, 7, 8], [12, 99], [-0.4, -0.5], version=5),
    ]
    (seg,) = segments(calls)
    assert seg == Segment(
        prompt_ids=(1, 2, 3),
        completion_ids=(10, 11, 99, 7, 8, 12, 99),
        loss_mask=(1, 1, 1, 0, 0, 1, 1),
        logprobs=(-0.1, -0.2, -0.3, 0.0, 0.0, -0.4, -0.5),
        versions=(4, 4, 4, ENV_VERSION, ENV_VERSION, 5, 5),
        calls=(0, 1),
        finish_reason=FinishReason.STOP,
    )


def test_a_call_that_does_not_extend_starts_a_new_segment():
    # call 1 rewrote the history (its prompt drops the first answer): a segment of its own;
    # call 2 extends call 1's segment, not the first
    calls = [
        call([1, 2, 3], [10, 99]),
        call([1, 2, 5, 6], [20, 99], finish_reason="length"),
        call([1, 2, 5, 6, 20, 99, 8], [21]),
    ]
    first, second = segments(calls)
    assert first.prompt_ids == (1, 2, 3) and first.completion_ids == (10, 99) and first.calls == (0,)
    assert second.prompt_ids == (1, 2, 5, 6)
    assert second.completion_ids == (20, 99, 8, 21)
    assert second.loss_mask == (1, 1, 0, 1)
    assert second.calls == (1, 2)


def test_a_prompt_equal_to_the_context_joins_with_no_environment_tokens():
    (seg,) = segments([call([1], [2, 3]), call([1, 2, 3], [4])])
    assert seg.completion_ids == (2, 3, 4) and seg.loss_mask == (1, 1, 1)


def test_a_call_joins_the_segment_it_extends_most_recently_extended_first():
    # two conversations kept apart (a sub-agent), interleaved; then n=2 choices of one prompt
    calls = [
        call([1], [2]),  # A
        call([5], [6]),  # B
        call([1, 2, 0], [3]),  # extends A
        call([5, 6, 0], [7]),  # extends B
        call([9], [1]),  # C: choice 0 of a call with n=2
        call([9], [2]),  # D: choice 1 (same prompt; C's context is not its prefix)
        call([9, 2, 0], [4]),  # the agent continued choice 1: joins D
    ]
    a, b, c, d = segments(calls)
    assert (a.calls, b.calls, c.calls, d.calls) == ((0, 2), (1, 3), (4,), (5, 6))
    assert a.completion_ids == (2, 0, 3) and b.completion_ids == (6, 0, 7) and d.completion_ids == (2, 0, 4)


def test_versions_tagged_per_token_are_kept_and_untracked_ones_are_env_version():
    (seg,) = segments([call([1], [2, 3], versions=(6, 7)), call([1, 2, 3, 0], [4])])
    assert seg.versions == (6, 7, ENV_VERSION, ENV_VERSION)


def test_no_calls_no_segments_and_bad_calls_are_refused():
    assert segments([]) == []
    with pytest.raises(ValueError, match="logprobs"):
        Call((1,), (2, 3), (-0.1,))
    with pytest.raises(ValueError, match="versions"):
        Call((1,), (2,), (-0.1,), versions=(1, 2))
