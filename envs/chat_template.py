"""The chat template's token arithmetic for token-exact rollouts: a prompt's tokens
(`template_ids`) and the tokens an environment's reply appends after the model's turn
(`reply_ids`), checked against the template's prefix property (`TemplateError` otherwise).

Text that is not the model's (prompts, environment replies, tool output: a program's error text
can hold anything) is tokenized as text: a special token's text inside it (`<|im_start|>`) gets a
zero-width space after its first character, so the tokenizer cannot read it as the special token
and an environment's text never opens or closes a turn (`as_text`). The model's own turns are
kept as sampled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvr.envs.core import EnvError, Message
from rlvr.envs.sampler import Tokenizer


class TemplateError(EnvError, ValueError):
    """The chat template cannot extend a conversation by appending tokens (no prefix property,
    or no eos token closing an assistant turn)."""


_BREAK = "\u200b"  # after a special token's first character: the same text to a reader, no special token


def as_text(tokenizer: Tokenizer, messages: list[Message]) -> list[Message]:
    """`messages` with every special token's text in a non-assistant message's content broken by a
    zero-width space (see the module docstring); the messages themselves are not changed."""
    specials = [t for t in _special_texts(tokenizer) if len(t) > 1]
    if not specials:
        return messages
    out = []
    for m in messages:
        content = m.get("content")
        if m.get("role") != "assistant" and isinstance(content, str) and any(t in content for t in specials):
            for t in specials:
                content = content.replace(t, t[0] + _BREAK + t[1:])
            m = {**m, "content": content}
        out.append(m)
    return out


def _special_texts(tokenizer: Tokenizer) -> list[str]:
    """The texts the tokenizer reads as special tokens (all of them, longest first)."""
    texts = set(getattr(tokenizer, "all_special_tokens", None) or [])
    for added in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(added, "special", False):
            texts.add(str(added))
    return sorted(texts, key=len, reverse=True)


def template_ids(
    tokenizer: Tokenizer,
    messages: list[Message],
    add_generation_prompt: bool,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """The chat template's token ids for `messages` (listing `tools` when given), as a list of ints;
    text that is not the model's is tokenized as text (`as_text`)."""
    ids = tokenizer.apply_chat_template(
        as_text(tokenizer, messages),
        tokenize=True,
        add_generation_prompt=add_generation_prompt,
        return_dict=False,
        **_tools_kwarg(tools),
    )
    if isinstance(ids, Mapping):  # some tokenizers answer a BatchEncoding whatever return_dict says
        ids = ids["input_ids"]
    return [int(t) for t in ids]


def _tools_kwarg(tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    # Passed only when there are tools: a tokenizer without a `tools` argument still renders the rest.
    return {} if tools is None else {"tools": tools}


def reply_ids(
    tokenizer: Tokenizer,
    conversation: list[Message],
    reply: list[Message],
    model_ended_turn: bool,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """Tokens that follow the model's last turn (the last message of `conversation`) up to the
    next generation prompt: the end of that turn when the model did not emit eos itself, the
    template's tail after eos, the reply messages, and the generation prompt. `tools`: the env's
    `chat_tools`, which the template lists as it did for the prompt. The reply is text (`as_text`)."""
    if _eos_splits_text(tokenizer):
        return _reply_ids_after_eos(tokenizer, conversation, reply, model_ended_turn, tools)
    return _reply_ids_whole(tokenizer, conversation, reply, model_ended_turn, tools)


def _reply_ids_whole(
    tokenizer: Tokenizer,
    conversation: list[Message],
    reply: list[Message],
    model_ended_turn: bool,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """`reply_ids` from the template's tokens of the conversation before and after the reply."""
    before = template_ids(tokenizer, conversation, add_generation_prompt=False, tools=tools)
    after = template_ids(tokenizer, conversation + reply, add_generation_prompt=True, tools=tools)
    if after[: len(before)] != before:
        raise TemplateError(_NO_PREFIX)
    eos = tokenizer.eos_token_id
    if eos not in before:
        raise TemplateError(f"the chat template does not close assistant turns with eos (id {eos})")
    close_at = len(before) - before[::-1].index(eos)  # just after the eos that closes the model's turn
    return before[close_at if model_ended_turn else close_at - 1 :] + after[len(before) :]


_NO_PREFIX = (
    "the chat template re-renders earlier turns when a message is added (no prefix property), "
    "so environment replies cannot be appended as tokens"
)


def _eos_splits_text(tokenizer: Tokenizer) -> bool:
    """Whether the tokenizer cuts its text at eos before anything else, as a Hugging Face fast
    tokenizer cuts at a special token that strips no whitespace: the text after an eos then
    tokenizes alone (its `encode`) exactly as it does within the whole. A tokenizer that must
    render every turn's whole conversation (`ChatSampler`'s, which remembers what it renders) sets
    `renders_whole_turns`."""
    if getattr(tokenizer, "renders_whole_turns", False):
        return False
    eos, eos_id = getattr(tokenizer, "eos_token", None), tokenizer.eos_token_id
    added = getattr(tokenizer, "added_tokens_decoder", {}).get(eos_id)
    return (
        getattr(tokenizer, "is_fast", False)
        and isinstance(eos, str)
        and added is not None
        and str(added) == eos
        and added.special
        and not (added.lstrip or added.rstrip or added.single_word)
    )


def _reply_ids_after_eos(
    tokenizer: Tokenizer,
    conversation: list[Message],
    reply: list[Message],
    model_ended_turn: bool,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """`reply_ids` from the template's text: only the text after the eos that closes the model's
    turn is tokenized, not the whole conversation twice (a multi-turn episode's turns would
    otherwise cost time quadratic in its length). Same tokens (`_eos_splits_text`; a test checks)."""
    kwargs = _tools_kwarg(tools)
    conversation, reply = as_text(tokenizer, conversation), as_text(tokenizer, reply)  # as template_ids does
    before = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=False, **kwargs)
    after = tokenizer.apply_chat_template(conversation + reply, tokenize=False, add_generation_prompt=True, **kwargs)
    if not after.startswith(before):
        raise TemplateError(_NO_PREFIX)
    close = before.rfind(tokenizer.eos_token)
    if close < 0:
        raise TemplateError(f"the chat template does not close assistant turns with eos ({tokenizer.eos_token!r})")
    tail = before[close + len(tokenizer.eos_token) :] + after[len(before) :]
    ids = [int(t) for t in tokenizer.encode(tail, add_special_tokens=False)]
    return ids if model_ended_turn else [tokenizer.eos_token_id] + ids
