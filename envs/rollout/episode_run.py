"""One episode in progress (`EpisodeRun`), and one turn of it (`take_turn`): the model's tokens, the
environment's step on their text, the reply's tokens.

Token exactness. `prompt_ids` is the chat template of the opening messages with the generation
prompt. After it, the model's tokens are stored exactly as sampled (loss mask 1, sampler
logprobs); the environment's reply goes in as the template's tokens for the new messages only:
template(conversation + reply, generation prompt) minus the template(conversation) prefix
(`envs.chat_template`; the prefix property is checked, `TemplateError` otherwise), with the
model's turn rendered from its decoded text only to find that boundary, never stored. The
model's text is never re-tokenized. An env whose `chat_tools` is set (a `ToolEnv`) has the
template list those tools (`tools=`) in the prompt and in every reply's rendering alike.

A model turn that ends without eos (the `max_tokens` limit or a stop string) in a multi-turn
episode: the environment still steps on the decoded text, and the rollout closes the turn with
the template's end-of-turn tokens (eos and what follows it), masked 0, so the next turn starts
exactly as the template would start it.

Outcomes: the final turn's verdict, except that a last turn cut by `max_tokens` makes it
`truncated` unless the verifier found it correct, and a verdict of `error` (or an env or grader
that raises) makes the episode `error` at once: counted, tokens kept, excluded from `Group`
statistics. An episode whose next prompt plus `max_tokens` would not fit in `max_length` ends
`truncated` there, without the reply tokens (prompt plus completion never exceed `max_length`).
A `truncated` episode says why in `Episode.truncation`: `length` (the last turn's `max_tokens`),
`context` (the opening prompt or the next turn did not fit in `max_length`), or `turns` (the
environment's own limit, its verdict `truncated`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlvr.envs.chat_template import TemplateError, reply_ids
from rlvr.envs.core import EnvError, Message, copy_messages
from rlvr.envs.episode import TruncationReason
from rlvr.envs.sampler import FinishReason, Sample, Tokenizer
from rlvr.verifiers.verdict import Outcome, Verdict


@dataclass
class EpisodeRun:
    """One episode in progress."""

    env: Any
    group: int
    task_id: str
    seed: int | None
    messages: list[Message]
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # -1: an environment token, or not tracked
    turn_rewards: list[float] = field(default_factory=list)
    verdict: Verdict | None = None
    outcome: Outcome | None = None
    finish_reason: FinishReason | None = None  # of the last model turn; None until one is sampled
    turns: int = 0
    error: str | None = None
    note: str = ""
    truncation: TruncationReason | None = None
    slot: int = 0  # the episode's index in the rollout (group * G + copy): its later turns' seed offset
    tools: list[dict[str, Any]] | None = None  # the env's `chat_tools`: the template lists them
    reset_first: bool = False  # a copy sharing its group's single-step env: reset it onto the task, then step

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def context_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


def take_turn(run: EpisodeRun, sample: Sample, tokenizer: Tokenizer, context_limit: int | None) -> None:
    """Append the model's turn, step the environment on its text, append the reply tokens
    unless the next turn would then start past `context_limit` (the episode ends there)."""
    if run.reset_first:  # the group's env, last stepped for another copy: reset it as this copy's own
        task = run.env.unwrapped.task
        run.env.reset(seed=run.seed, options={"task": task})
        if run.env.unwrapped.task is not task:
            raise EnvError(
                f"a copy of task {run.task_id} reset to another task: the env ignores options={{'task': ...}}"
            )
    run.completion_ids += sample.token_ids
    run.loss_mask += [1] * len(sample.token_ids)
    run.logprobs += sample.logprobs
    run.versions += sample.versions or [-1] * len(sample.token_ids)
    run.finish_reason = FinishReason(sample.finish_reason)  # a duck-typed sample may carry a str
    run.turns += 1
    try:
        text = tokenizer.decode(list(sample.token_ids), skip_special_tokens=True)
        run.messages.append({"role": "assistant", "content": text})
        reply, reward, terminated, truncated, info = run.env.step(text)
        # a turn cut at max_tokens is never paid (a policy would learn to ramble until cut, on numbers
        # restated from the question); an env that grades cut text says so (`TextEnv.grade_truncated`)
        cut = run.finish_reason is FinishReason.LENGTH and not getattr(run.env.unwrapped, "grade_truncated", False)
        run.turn_rewards.append(0.0 if cut else float(reward))
        verdict = info.get("verdict")
        if not isinstance(verdict, Verdict):
            raise EnvError(f"env.step returned no Verdict in info['verdict'] (got {type(verdict).__name__})")
        run.verdict = verdict
        if verdict.is_error:
            run.error, run.outcome = verdict.detail or "the verifier failed", Outcome.ERROR
        elif terminated or truncated:
            run.outcome = verdict.outcome
            if cut or run.finish_reason is FinishReason.LENGTH and verdict.outcome is not Outcome.CORRECT:
                run.outcome, run.truncation = Outcome.TRUNCATED, TruncationReason.LENGTH
            elif run.outcome is Outcome.TRUNCATED:  # the env's verdict: out of turns
                run.truncation = TruncationReason.TURNS
        else:
            ended = bool(sample.token_ids) and sample.token_ids[-1] == tokenizer.eos_token_id
            extra = reply_ids(tokenizer, run.messages, list(reply), ended, run.tools)
            if context_limit is not None and len(run.context_ids()) + len(extra) > context_limit:
                run.outcome, run.note = Outcome.TRUNCATED, "the next turn would not fit in the context"
                run.truncation = TruncationReason.CONTEXT
                return
            run.messages.extend(copy_messages(reply))
            run.completion_ids += extra
            run.loss_mask += [0] * len(extra)
            run.logprobs += [0.0] * len(extra)
            run.versions += [-1] * len(extra)
    except TemplateError:
        raise  # a setup problem, not an episode's: every episode would hit it
    except Exception as e:  # noqa: BLE001 - an env or verifier crash is this episode's error, counted
        run.error, run.outcome = f"{type(e).__name__}: {e}", Outcome.ERROR
