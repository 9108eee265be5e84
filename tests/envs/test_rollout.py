"""Rollouts with real samplers in real environments: groups, token exactness over several turns,
typed outcomes, error episodes, and the context limit."""

from __future__ import annotations

from collections import Counter

import gymnasium as gym
import pytest

from rlvr.envs.chat_template import reply_ids
from rlvr.envs.core import ProceduralTasks, SingleTurnEnv, Task
from rlvr.envs.rollout import Group, RolloutRequest, rollout
from rlvr.envs.sampler import FinishReason, SamplingSettings
from rlvr.trainers.models import load_causal_lm
from rlvr.trainers.samplers import HFSampler
from rlvr.verifiers.verdict import Outcome, Verdict

GUESS = "rlvr/GuessNumber-v0"


class RecordingSampler:
    """A real sampler, with every call's prompts and samples kept for the checks."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []
        self.max_model_len = getattr(inner, "max_model_len", None)

    def generate(self, prompt_token_ids, n, sampling):
        out = self.inner.generate(prompt_token_ids, n, sampling)
        self.calls.append(([list(p) for p in prompt_token_ids], n, out))
        return out


class ParityEnv(ProceduralTasks, SingleTurnEnv):
    """Says whether a number is even. Its grader fails (raises) on tasks whose seed is 3 mod 4
    and reports an `error` verdict on 2 mod 4, so error episodes can be checked for real."""

    version = "7"

    def make_task(self, seed: int) -> Task:
        n = seed * 7 + 1
        return Task(str(seed), [{"role": "user", "content": f"Is {n} even?"}], n % 2 == 0, "yes", "no")

    def verify(self, task: Task, response: str) -> Verdict:
        seed = int(task.task_id)
        if seed % 4 == 3:
            raise RuntimeError("grader crashed")
        if seed % 4 == 2:
            return Verdict(0.0, Outcome.ERROR, "grader timed out")
        said = "yes" in response.lower()
        return Verdict(
            float(said == task.answer),
            Outcome.CORRECT if said == task.answer else Outcome.INCORRECT,
            info={"verifier_version": "parity-1"},
        )


gym.register("rlvr-test/Parity-v0", entry_point=ParityEnv)


@pytest.fixture(scope="module")
def hf_sampler(model_dir, tokenizer):
    return HFSampler(load_causal_lm(model_dir), tokenizer)


def mask_runs(episode) -> list[tuple[int, int, int]]:
    """(start, end, mask value) of the maximal runs of equal mask values."""
    runs, start = [], 0
    for i in range(1, len(episode.loss_mask) + 1):
        if i == len(episode.loss_mask) or episode.loss_mask[i] != episode.loss_mask[start]:
            runs.append((start, i, episode.loss_mask[start]))
            start = i
    return runs


def assert_token_exact(episode, calls, tokenizer) -> None:
    """Every mask-1 run is a sample, verbatim, that the sampler produced from exactly the
    tokens before it; its logprobs are that sample's; every mask-0 run is the template's
    reply tokens, ending in a fresh generation prompt; nothing else is in the episode."""
    ids = episode.prompt_ids + episode.completion_ids
    assert len(episode.completion_ids) == len(episode.loss_mask) == len(episode.logprobs)
    probe = [{"role": "user", "content": "x"}]
    with_prompt, without = (
        tokenizer.apply_chat_template(probe, add_generation_prompt=g, tokenize=True, return_dict=False)
        for g in (True, False)
    )
    generation_prompt = with_prompt[len(without) :]
    model_turns = 0
    for start, end, mask in mask_runs(episode):
        tokens = tuple(episode.completion_ids[start:end])
        if mask == 1:
            context = ids[: len(episode.prompt_ids) + start]
            produced = [
                s
                for prompts, _, out in calls
                for p, group in zip(prompts, out)
                if p == context
                for s in group
                if s.token_ids == tokens
            ]
            assert produced, f"model tokens at {start}:{end} were not sampled from the tokens before them"
            # (several samples of a group can share their tokens: the logprobs are one of theirs)
            assert any(tuple(episode.logprobs[start:end]) == s.logprobs for s in produced)
            model_turns += 1
        else:
            assert all(lp == 0.0 for lp in episode.logprobs[start:end])
            assert list(tokens[-len(generation_prompt) :]) == generation_prompt
    assert model_turns == episode.metadata["turns"] == len(episode.turn_rewards)


def test_guess_number_episodes_are_token_exact(hf_sampler, tokenizer):
    sampler = RecordingSampler(hf_sampler)
    groups = rollout(
        RolloutRequest(
            GUESS,
            {"n": 20, "max_turns": 3},
            seeds=[5, 6],
            group_size=3,
            sampling=SamplingSettings(temperature=1.0, max_tokens=6, seed=0),
            model_info={"model": "tiny", "step": 4},
        ),
        sampler,
        tokenizer,
        progress=False,
    )
    assert [len(c[0]) for c in sampler.calls][0] == 2 and sampler.calls[0][1] == 3  # turn 1: n=G per task
    assert all(n == 1 for _, n, _ in sampler.calls[1:])  # later turns: one per active episode
    assert len(sampler.calls) <= 3  # one sampler call per turn
    turns = [ep.metadata["turns"] for g in groups for ep in g.episodes]
    assert max(turns) > 1, "no episode went past one turn: the multi-turn path was not exercised"
    for g in groups:
        assert isinstance(g, Group) and len(g.episodes) == 3 and len({ep.task_id for ep in g.episodes}) == 1
        for ep in g.episodes:
            assert_token_exact(ep, sampler.calls, tokenizer)
            assert ep.metadata["model"] == "tiny" and ep.metadata["model_step"] == 4 and ep.metadata["seed"] in (5, 6)
            assert ep.outcome in (Outcome.CORRECT, Outcome.INCORRECT, Outcome.FORMAT_ERROR, Outcome.TRUNCATED)
            env_text = tokenizer.decode([t for t, m in zip(ep.completion_ids, ep.loss_mask) if m == 0])
            replies = [m["content"] for m in ep.messages[1:] if m["role"] == "user"]
            assert all(r in env_text for r in replies)
            assert [m["role"] for m in ep.messages[:2]] == ["user", "assistant"]


def test_turns_cut_by_max_tokens_are_closed_by_the_template(hf_sampler, tokenizer):
    """With 2 tokens a turn nothing ends on eos: each env reply starts by closing the turn with eos."""
    sampler = RecordingSampler(hf_sampler)
    groups = rollout(
        RolloutRequest(
            GUESS,
            {"n": 20, "max_turns": 2},
            seeds=(),
            task_ids=["9"],
            group_size=2,
            sampling=SamplingSettings(max_tokens=2, seed=1),
        ),
        sampler,
        tokenizer,
        progress=False,
    )
    for ep in groups[0].episodes:
        assert_token_exact(ep, sampler.calls, tokenizer)
        assert ep.finish_reason is FinishReason.LENGTH and ep.outcome is Outcome.TRUNCATED
        ((start, end, _),) = [r for r in mask_runs(ep) if r[2] == 0]
        assert (
            ep.completion_ids[start] == tokenizer.eos_token_id
            and ep.completion_ids[start - 1] != tokenizer.eos_token_id
        )


def test_reply_ids_extend_the_template_exactly(tokenizer):
    """What the rollout appends equals the template's own rendering of the longer conversation."""
    conversation = [{"role": "user", "content": "Guess."}, {"role": "assistant", "content": "50"}]
    reply = [{"role": "user", "content": "higher"}]
    full = tokenizer.apply_chat_template(
        conversation + reply, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    head = tokenizer.apply_chat_template(conversation, tokenize=True, return_dict=False)
    eos_end = len(head) - head[::-1].index(tokenizer.eos_token_id)
    assert head[:eos_end] + reply_ids(tokenizer, conversation, reply, model_ended_turn=True) == full
    assert head[: eos_end - 1] + reply_ids(tokenizer, conversation, reply, model_ended_turn=False) == full


def test_error_episodes_are_counted_not_scored(hf_sampler, tokenizer):
    groups = rollout(
        RolloutRequest(
            "rlvr-test/Parity-v0",
            {},
            seeds=(),
            task_ids=["0", "1", "2", "3"],
            group_size=2,
            sampling=SamplingSettings(max_tokens=4, seed=0),
            group_id_start=10,
        ),
        hf_sampler,
        tokenizer,
        progress=False,
    )
    assert [g.group_id for g in groups] == [10, 11, 12, 13] and [g.task_id for g in groups] == ["0", "1", "2", "3"]
    ok, ok2, timed_out, crashed = groups
    assert ok.num_errors == 0 and len(ok.rewards) == 2 and ok.mean_reward in (0.0, 0.5, 1.0)
    assert all(ep.metadata["verifier"] == "parity-1" and ep.metadata["env_version"] == "7" for ep in ok.episodes)
    for g, why in ((timed_out, "grader timed out"), (crashed, "RuntimeError: grader crashed")):
        assert g.num_errors == 2 and g.valid == [] and g.rewards == [] and g.mean_reward is None
        assert all(ep.is_error and ep.metadata["error"] == why for ep in g.episodes)
        assert all(ep.loss_mask and set(ep.loss_mask) == {1} for ep in g.episodes)  # the tokens are kept


def test_episodes_that_would_overflow_the_context_end_truncated(hf_sampler, tokenizer):
    prompt_len = len(
        tokenizer.apply_chat_template(
            gym.make(GUESS, n=20).reset(seed=0)[0], add_generation_prompt=True, tokenize=True, return_dict=False
        )
    )
    groups = rollout(
        RolloutRequest(
            GUESS,
            {"n": 20, "max_turns": 5},
            seeds=[0],
            group_size=2,
            sampling=SamplingSettings(max_tokens=4, seed=0),
            max_length=prompt_len + 20,
        ),
        hf_sampler,
        tokenizer,
        progress=False,
    )
    for ep in groups[0].episodes:
        assert len(ep.prompt_ids) + len(ep.completion_ids) <= prompt_len + 20
        assert ep.loss_mask[-1] == 1  # ends on the model's turn: no reply tokens it never answered
    assert any("context" in ep.metadata["detail"] for ep in groups[0].episodes)
    tiny = rollout(
        RolloutRequest(
            GUESS, {"n": 20}, seeds=[0], group_size=2, sampling=SamplingSettings(max_tokens=4), max_length=prompt_len
        ),
        hf_sampler,
        tokenizer,
        progress=False,
    )
    assert all(ep.outcome is Outcome.TRUNCATED and ep.completion_ids == [] for ep in tiny[0].episodes)


def test_bad_arguments(hf_sampler, tokenizer):
    with pytest.raises(ValueError):
        rollout(
            RolloutRequest(GUESS, {}, seeds=[1], task_ids=["1"], group_size=2, sampling=SamplingSettings()),
            hf_sampler,
            tokenizer,
        )
    with pytest.raises(ValueError):
        rollout(RolloutRequest(GUESS, {}, seeds=[1], group_size=0, sampling=SamplingSettings()), hf_sampler, tokenizer)


def test_vllm_rollout_on_arithmetic(tiny_engine, model_dir, tokenizer, capsys):
    """The training path: vLLM, a single-turn env, G samples per task from one call, progress shown.
    (`tiny_engine`: the folder's engine, tests/envs/conftest.py.)"""
    sampler = RecordingSampler(tiny_engine)
    groups = rollout(
        RolloutRequest(
            "rlvr/Arithmetic-v0",
            {"difficulty": 1},
            seeds=range(4),
            group_size=4,
            sampling=SamplingSettings(max_tokens=16, seed=0),
            model_info={"model": str(model_dir), "step": 0},
        ),
        sampler,
        tokenizer,
    )
    assert len(sampler.calls) == 1 and len(sampler.calls[0][0]) == 4 and sampler.calls[0][1] == 4
    assert "rlvr/Arithmetic-v0" in capsys.readouterr().err  # the progress bar
    for g in groups:
        assert len(g.episodes) == 4 and all(0.0 <= r <= 1.0 for r in g.rewards)
        for ep in g.episodes:
            assert set(ep.loss_mask) == {1} and ep.metadata["sampling"]["max_tokens"] == 16
            assert_token_exact(ep, sampler.calls, tokenizer)
    # And several turns on the same engine: prompts of different lengths, n=1 each.
    sampler.calls.clear()
    groups = rollout(
        RolloutRequest(
            GUESS,
            {"n": 20, "max_turns": 3},
            seeds=[3, 4],
            group_size=2,
            sampling=SamplingSettings(max_tokens=8, seed=1),
        ),
        sampler,
        tokenizer,
        progress=False,
    )
    assert len(sampler.calls) == max(ep.metadata["turns"] for g in groups for ep in g.episodes)
    for ep in (ep for g in groups for ep in g.episodes):
        assert_token_exact(ep, sampler.calls, tokenizer)


class CountingParityEnv(ParityEnv):
    """ParityEnv that writes every task it builds, reset and step (with its own id) to `log`."""

    grade_truncated = True  # the tiny model's short samples are cut; this test is about resets, not cuts

    def __init__(self, log: list, render_mode=None):
        super().__init__(render_mode=render_mode)
        self.log = log

    def make_task(self, seed: int) -> Task:
        self.log.append(("make_task", id(self), seed))
        return super().make_task(seed)

    def reset(self, *, seed=None, options=None):
        out = super().reset(seed=seed, options=options)
        self.log.append(("reset", id(self), id(self.task)))
        return out

    def step(self, action):
        self.log.append(("step", id(self), id(self.task), action))
        return super().step(action)


gym.register("rlvr-test/CountingParity-v0", entry_point=CountingParityEnv)


def test_a_single_step_group_shares_one_env_reset_before_each_copy(hf_sampler, tokenizer):
    """A contextual bandit's G copies: one env and one task built per group, reset onto that
    Task before every copy's step; each episode is scored as a fresh env would score it."""
    log: list = []
    groups = rollout(
        RolloutRequest(
            "rlvr-test/CountingParity-v0",
            {"log": log},
            seeds=[0, 4],
            group_size=3,
            sampling=SamplingSettings(max_tokens=4, seed=0),
        ),
        hf_sampler,
        tokenizer,
        progress=False,
        per_episode=False,
    )
    assert sorted(e[2] for e in log if e[0] == "make_task") == [0, 4]  # one task built per group
    steps = [e for e in log if e[0] == "step"]
    assert sorted(Counter(env for _, env, _, _ in steps).values()) == [3, 3]  # one env per group, 3 copies each
    assert all(len({task for _, env, task, _ in steps if env == e}) == 1 for _, e, _, _ in steps)
    last: dict = {}  # env -> its last event: every step follows a reset of that env onto that task
    for e in log:
        if e[0] == "step":
            assert last.get(e[1]) == ("reset", e[2])
        last[e[1]] = e[0], e[2]
    fresh = ParityEnv()
    for ep in (ep for g in groups for ep in g.episodes):
        fresh.reset(seed=ep.metadata["seed"])
        assert ep.reward == fresh.step(ep.messages[1]["content"])[1]


def test_a_task_can_be_handed_to_reset(tokenizer):
    env = ParityEnv()
    env.reset(seed=5)
    task = env.task
    other = ParityEnv()
    messages, info = other.reset(seed=5, options={"task": task})
    assert other.task is task and info["task_id"] == "5" and messages == task.prompt and messages is not task.prompt
    with pytest.raises(TypeError, match="rlvr.envs.Task"):
        other.reset(options={"task": "5"})


@pytest.mark.parametrize("model_ended_turn", [True, False])
def test_reply_ids_from_the_text_after_eos_equal_the_whole_templates(tokenizer, model_ended_turn):
    """The fast path tokenizes only the text after the model turn's eos; it gives the tokens the
    template's whole rendering gives, whatever the turn holds (special-token text, whitespace,
    code, unicode, empty) and however long the conversation."""
    from rlvr.envs.chat_template import _eos_splits_text, _reply_ids_after_eos, _reply_ids_whole

    assert _eos_splits_text(tokenizer)
    texts = [
        "50",
        "",
        " \n\n ",
        "<|im_end|> 7",
        "def f(x):\n    return x * 2\n",
        "é ü 名字 🙂",
        "Lower.\n",
        "\\boxed{42}",
        "<|im_start|>user\nhi",
    ]
    conversation = [{"role": "user", "content": "Guess a number between 1 and 100."}]
    for i, text in enumerate(texts):
        conversation = conversation + [{"role": "assistant", "content": text}]
        for reply in ([{"role": "user", "content": texts[-1 - i]}], [{"role": "tool", "content": "out: 3\n"}], []):
            fast = _reply_ids_after_eos(tokenizer, conversation, reply, model_ended_turn)
            assert fast == _reply_ids_whole(tokenizer, conversation, reply, model_ended_turn), (text, reply)
        conversation.append({"role": "user", "content": "Higher."})
