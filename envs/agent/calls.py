"""The recording rule of the agent gateway: the calls an agent made in one episode -> token-exact segments.

An agent program (its own loop, the OpenAI Agents SDK, LangGraph, ...) talks to the gateway
(`envs.agent.gateway`) with the plain `openai` client. Each call it makes is recorded as it was
served: the prompt ids the gateway built, the completion ids and logprobs the engine produced, the
policy version of the weights that answered. A call asking for `n` choices is `n` `Call`s with one
prompt. This module turns the calls of one episode into training sequences, `Segment`s.

The rule (pure, on token ids only; never on text):
- Calls are taken in the order they were answered.
- A call JOINS a segment when its prompt ids extend that segment's context (the segment's prompt
  plus everything appended so far), i.e. the context is a prefix of the prompt. The prompt's ids
  past the context are the environment's tokens (the end of the model's turn, tool results, the
  next user message, the generation prompt): appended with loss mask 0, logprob 0.0 and version -1;
  then the call's completion, mask 1, the engine's logprobs and versions.
- Among the segments a call extends, it joins the one extended most recently (the latest call's,
  in the usual case of one conversation; an agent that keeps two conversations apart, or continues
  one of `n` choices, still joins the right one).
- A call that extends no segment (the agent rewrote or cut its history, summarised it, started a
  sub-agent, or the history re-tokenizes differently) STARTS a new segment: its prompt ids are the
  segment's prompt. Every segment of an episode is credited with the episode's one reward.

Why on ids, not messages: a segment is trained on exactly the ids the model was conditioned on and
produced, so "extends" must hold for the ids themselves. The gateway does its part: when a call's
messages are an earlier call's messages plus that call's answer, unchanged, it builds the prompt
from that call's ids (never re-tokenizing the model's text), so such a call extends by construction
(`envs.agent.gateway`). A model turn that ended without eos (`max_tokens`, a stop string) then
continues with the template's end-of-turn tokens, masked, as `envs.rollout` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlvr.envs.sampler import FinishReason

ENV_VERSION = -1  # the version recorded on the environment's tokens (and on untracked ones)


@dataclass(frozen=True)
class Call:
    """One answered completion, as the gateway served it. `version`: the policy version of the
    sampler's weights when it answered (None: not tracked); `versions`: per completion token, when the
    sampler tags them (weights changing mid-sample); `messages`/`tools`: the chat request that built
    the prompt (None for `/v1/completions`); `text`: what the agent was sent back as content, and
    `tool_calls` the tool calls read from the completion (`envs.agent.responses.split_tool_calls`)."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: FinishReason = FinishReason.STOP
    version: int | None = None
    versions: tuple[int, ...] = ()
    text: str = ""
    messages: tuple[dict, ...] | None = None
    tools: tuple[dict, ...] | None = None
    tool_calls: tuple[dict, ...] = ()  # the calls read from the completion, as the agent was sent them

    def __post_init__(self) -> None:
        object.__setattr__(self, "finish_reason", FinishReason(self.finish_reason))
        if len(self.logprobs) != len(self.completion_ids):
            raise ValueError(f"{len(self.logprobs)} logprobs for {len(self.completion_ids)} completion tokens")
        if self.versions and len(self.versions) != len(self.completion_ids):
            raise ValueError(f"{len(self.versions)} versions for {len(self.completion_ids)} completion tokens")

    def token_versions(self) -> tuple[int, ...]:
        """The version of each completion token: tagged, else the call's, else `ENV_VERSION`."""
        if self.versions:
            return self.versions
        return (ENV_VERSION if self.version is None else self.version,) * len(self.completion_ids)


@dataclass(frozen=True)
class Segment:
    """One training sequence: `prompt_ids`, then `completion_ids` with `loss_mask` 1 on the model's
    tokens and 0 on the environment's, `logprobs` (0.0 on the environment's) and `versions`
    (`ENV_VERSION` on the environment's). `calls`: the indices of the calls it holds, in order;
    `finish_reason`: how its last call ended."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...] = ()
    loss_mask: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    versions: tuple[int, ...] = ()
    calls: tuple[int, ...] = ()
    finish_reason: FinishReason = FinishReason.STOP

    @property
    def context_ids(self) -> tuple[int, ...]:
        return self.prompt_ids + self.completion_ids

    def extended_by(self, prompt_ids: Sequence[int]) -> bool:
        """Whether `prompt_ids` starts with this segment's whole context."""
        context = self.context_ids
        return len(prompt_ids) >= len(context) and tuple(prompt_ids[: len(context)]) == context

    def joined(self, index: int, call: Call) -> Segment:
        """This segment with call `index` appended: the prompt's new ids masked, then its completion."""
        gap = tuple(call.prompt_ids[len(self.context_ids) :])
        n = len(call.completion_ids)
        return Segment(
            prompt_ids=self.prompt_ids,
            completion_ids=self.completion_ids + gap + call.completion_ids,
            loss_mask=self.loss_mask + (0,) * len(gap) + (1,) * n,
            logprobs=self.logprobs + (0.0,) * len(gap) + tuple(float(x) for x in call.logprobs),
            versions=self.versions + (ENV_VERSION,) * len(gap) + call.token_versions(),
            calls=self.calls + (index,),
            finish_reason=call.finish_reason,
        )


def segments(calls: Sequence[Call]) -> list[Segment]:
    """The calls of one episode as segments, by the rule of the module docstring, in the order each
    segment was started."""
    out: list[Segment] = []
    recent: list[int] = []  # segment indices, the most recently extended last
    for i, call in enumerate(calls):
        target = next((s for s in reversed(recent) if out[s].extended_by(call.prompt_ids)), None)
        if target is None:
            out.append(Segment(prompt_ids=tuple(call.prompt_ids)).joined(i, call))
            target = len(out) - 1
        else:
            out[target] = out[target].joined(i, call)
            recent.remove(target)
        recent.append(target)
    return out
