"""Episodes -> padded tensors (`trainers.batch`) and per-token logprobs under a real (random-init,
tiny) Qwen2 (`trainers.policy`): padding must change nothing."""

from __future__ import annotations

import pytest
import torch

from rlvr.envs.episode import Episode, TruncationReason
from rlvr.trainers.batch import BatchError, collate
from rlvr.trainers.policy import ValueHead, entropy_from_logits, forward
from rlvr.verifiers.verdict import Outcome
from tests.conftest import random_qwen2
from tests.tolerances import forward_bound, gradient_bound

PAD = 0


def episode(prompt, completion, mask=None, logprobs=None, group=0, reward=1.0, finish="stop", outcome=Outcome.CORRECT):
    mask = [1] * len(completion) if mask is None else mask
    logprobs = [-0.5] * len(completion) if logprobs is None else logprobs
    return Episode(
        "rlvr/Test-v0", "t", group, list(prompt), list(completion), mask, logprobs, [reward], outcome, [], finish
    )


@pytest.fixture(scope="module")
def model():
    return random_qwen2()


EPISODES = [
    episode([5, 6, 7, 8], [9, 10], group=0, reward=1.0),
    episode(
        [5, 6],
        [11, 12, 13, 14, 15],
        mask=[1, 1, 0, 0, 1],
        logprobs=[-1, -2, -9, -9, -3],
        group=0,
        reward=0.0,
        finish="length",
        outcome=Outcome.INCORRECT,
    ),
    episode([3, 4, 5, 6, 7, 8, 9], [20], group=1, reward=0.5, outcome=Outcome.FORMAT_ERROR),
]


def test_collate_layout():
    b = collate(EPISODES, PAD)
    assert b.prompt_len == 7 and b.completion_len == 5 and len(b) == 3
    # prompts end at column 7 (left padded), completions start there (right padded)
    assert b.input_ids[0].tolist() == [0, 0, 0, 5, 6, 7, 8, 9, 10, 0, 0, 0]
    assert b.input_ids[1].tolist() == [0, 0, 0, 0, 0, 5, 6, 11, 12, 13, 14, 15]
    assert b.attention_mask[0].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0]
    # positions count real tokens only, as the sampler saw them
    assert b.position_ids[0, 3:9].tolist() == [0, 1, 2, 3, 4, 5]
    assert b.position_ids[2, :8].tolist() == list(range(8))
    assert b.loss_mask.tolist() == [[1, 1, 0, 0, 0], [1, 1, 0, 0, 1], [1, 0, 0, 0, 0]]
    # sampler logprobs are zero off the mask, even where the episode said otherwise
    assert b.sampler_logprobs[1].tolist() == [-1, -2, 0, 0, -3]
    assert b.rewards.tolist() == [1.0, 0.0, 0.5]
    assert b.group_ids.tolist() == [0, 0, 1]
    assert b.truncated.tolist() == [False, True, False]
    assert b.correct.tolist() == [True, False, False]
    assert b.completion_ids[1].tolist() == [11, 12, 13, 14, 15]


def test_turn_rewards_sit_on_each_turns_last_model_token():
    # Two turns: model tokens 0-1 (reward 0.5), env tokens 2-3, model token 4 (reward 0.25).
    # Episode 0 (one turn) has its reward 1.0 on its last model token, column 1.
    two_turns = episode([5, 6], [11, 12, 13, 14, 15], mask=[1, 1, 0, 0, 1], group=0)
    two_turns.turn_rewards = [0.5, 0.25]
    b = collate([EPISODES[0], two_turns], PAD)
    assert b.turn_rewards.tolist() == [[0, 1.0, 0, 0, 0], [0, 0.5, 0, 0, 0.25]]
    assert b.rewards.tolist() == [1.0, 0.75]
    assert b.select([1]).turn_rewards.tolist() == [[0, 0.5, 0, 0, 0.25]]
    # Fewer rewards than runs of model tokens pair up from the end: the last reward stays last.
    short = episode([5], [11, 12, 13, 14, 15], mask=[1, 0, 1, 0, 1])
    short.turn_rewards = [0.5, 0.25]
    assert collate([short], PAD).turn_rewards.tolist() == [[0, 0, 0.5, 0, 0.25]]


def test_truncated_means_cut_by_a_length_limit():
    # The last turn hit max_tokens; a multi-turn episode whose next turn would not fit in the
    # context (the rollout's note, finish reason "stop"); an env's own turn limit is NOT a cut.
    budget = episode([1], [2], finish="length", outcome=Outcome.INCORRECT)
    context = episode([1], [2, 3, 4], mask=[1, 0, 1], outcome=Outcome.TRUNCATED)
    context.truncation = TruncationReason.CONTEXT  # what the rollout records
    turn_limit = episode([1], [2, 3, 4], mask=[1, 0, 1], outcome=Outcome.TRUNCATED)
    turn_limit.truncation = TruncationReason.TURNS
    b = collate([budget, context, turn_limit, EPISODES[0]], PAD)
    assert b.truncated.tolist() == [True, True, False, False]


def test_select_trims_padding_and_keeps_content():
    b = collate(EPISODES, PAD)
    s = b.select([0, 2])
    assert s.prompt_len == 7 and s.completion_len == 2  # episode 2's prompt is 7 long; completions <= 2
    assert s.input_ids.tolist() == [[0, 0, 0, 5, 6, 7, 8, 9, 10], [3, 4, 5, 6, 7, 8, 9, 20, 0]]
    s = b.select([0])
    assert s.prompt_len == 4 and s.input_ids.tolist() == [[5, 6, 7, 8, 9, 10]]
    assert s.loss_mask.tolist() == [[1, 1]]


def test_the_segments_of_an_agent_episode_share_an_episode_id():
    eps = [episode([1, 2], [3]), episode([4, 5], [6]), episode([1, 2], [7]), episode([8], [9], group=1)]
    eps[1].metadata["segment"] = 1  # the second segment of the first episode (its agent rewrote its history)
    batch = collate(eps, PAD)
    assert batch.episode_ids.tolist() == [1, 1, 2, 3] and batch.select([1, 3]).episode_ids.tolist() == [1, 3]
    assert collate(EPISODES, PAD).episode_ids is None  # every row its own episode


def test_collate_rejects_bad_episodes():
    with pytest.raises(BatchError, match="no episodes"):
        collate([], PAD)
    with pytest.raises(BatchError, match="differ in length"):
        collate([episode([1, 2], [3, 4], mask=[1])], PAD)
    with pytest.raises(BatchError, match="empty prompt"):
        collate([episode([], [3])], PAD)


def unpadded_logprobs(model, ep, temperature):
    ids = torch.tensor([ep.prompt_ids + ep.completion_ids])
    logits = model(ids).logits[0].float() / temperature
    p = len(ep.prompt_ids)
    logp = torch.log_softmax(logits[p - 1 : -1], -1)
    return logp.gather(-1, torch.tensor(ep.completion_ids)[:, None])[:, 0], entropy_from_logits(logits[p - 1 : -1])


@torch.no_grad()
def test_padded_forward_matches_each_sequence_alone(model):
    b = collate(EPISODES, PAD)
    out = forward(model, b, temperature=0.7, with_entropy=True)
    for row, ep in enumerate(EPISODES):
        n = len(ep.completion_ids)
        want_lp, want_ent = unpadded_logprobs(model, ep, 0.7)  # other shapes: other orders of sums (tests.tolerances)
        torch.testing.assert_close(out.logprobs[row, :n], want_lp, atol=forward_bound(model.config, want_lp), rtol=0)
        torch.testing.assert_close(out.entropy[row, :n], want_ent, atol=forward_bound(model.config, want_ent), rtol=0)
    # a trimmed sub-batch gives the same numbers
    sub = forward(model, b.select([1, 2]), temperature=0.7)
    want = out.logprobs[[1, 2], : sub.logprobs.shape[1]]
    torch.testing.assert_close(sub.logprobs, want, atol=forward_bound(model.config, want), rtol=0)


@torch.no_grad()
def test_temperature_scales_the_distribution(model):
    b = collate(EPISODES[:1], PAD)
    hot, cold = forward(model, b, 2.0, with_entropy=True), forward(model, b, 0.5, with_entropy=True)
    assert bool((hot.entropy > cold.entropy).all())  # hotter is flatter
    with pytest.raises(ValueError, match="temperature"):
        forward(model, b, 0.0)


def test_shared_prompts_give_the_same_numbers_and_gradients(model):
    """A group's rows share their prompt: running it once and reusing its cache must change
    nothing, neither the values nor the gradient."""
    prompts = [[5, 6, 7, 8, 9, 10], [3, 4], [11, 12, 13]]
    episodes = [
        episode(p, [20 + i, 21 + j, 22][: 1 + (i + j) % 3], group=i) for i, p in enumerate(prompts) for j in range(3)
    ]
    b = collate(episodes, PAD)
    head = ValueHead(model.config.hidden_size)
    torch.nn.init.normal_(head.linear.weight, std=0.1)
    grads, outs = [], []
    for share in (False, True):
        model.zero_grad()
        out = forward(model, b, 0.9, with_entropy=True, value_head=head, share_prompts=share)
        ((out.logprobs + out.values) * b.loss_mask).sum().backward()
        outs.append(out)
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    mask = b.loss_mask > 0  # the same sums in other orders (tests.tolerances)
    for name in ("logprobs", "entropy", "values"):
        a, c = getattr(outs[0], name), getattr(outs[1], name)
        torch.testing.assert_close(c[mask], a[mask], atol=forward_bound(model.config, a[mask]), rtol=0)
    atol = gradient_bound(model.config, int(mask.sum()), grads[0])
    torch.testing.assert_close(grads[1], grads[0], atol=atol, rtol=0)
    model.zero_grad()


def test_value_head_reads_the_state_before_each_token(model):
    head = ValueHead(model.config.hidden_size)
    b = collate(EPISODES, PAD)
    out = forward(model, b, 1.0, value_head=head)
    assert out.values.shape == b.loss_mask.shape
    assert bool((out.values == 0).all())  # zero-initialised head
    torch.nn.init.normal_(head.linear.weight)
    values = forward(model, b, 1.0, value_head=head).values
    hidden = model(
        b.input_ids[:1], attention_mask=b.attention_mask[:1], position_ids=b.position_ids[:1], output_hidden_states=True
    ).hidden_states[-1]
    want = head(hidden[0, b.prompt_len - 1 : b.prompt_len + 1])  # row 0 has two completion tokens
    torch.testing.assert_close(values[0, :2], want, atol=forward_bound(model.config, want), rtol=0)
    values.sum().backward()
    assert head.linear.weight.grad is not None and model.model.layers[0].mlp.up_proj.weight.grad is not None
