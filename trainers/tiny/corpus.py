"""The tiny model's warm-start corpus: whole conversations in the exact format of each built-in
environment, so that `--model tiny` plays every one of them (answers in the right place, stops
at the end of its turn, fits in its context) and RL has something to improve.

A conversation is a list of chat messages in which the assistant's turns are the targets. Every
source draws from seeds below the held-out ones (`envs.seeds.HELD_OUT_SEED_START`), or from another
dataset seed (reasoning-gym), so the tasks the trainer and `rlvr eval` measure on are never trained on; code
tasks are synthetic (`trainers.tiny.code_tasks`), because `rlvr/Code-v0` has no other tasks.

`sft_conversation` turns a conversation into (input ids, labels) exactly as a rollout sees it:
the chat template of the opening messages with the generation prompt, each assistant turn's
tokens plus eos (labelled), and each environment reply as `envs.chat_template.reply_ids` appends it
(not labelled).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rlvr.envs.core import Message

Conversation = list[Message]
SOURCES = ("arithmetic", "symbolic_math", "reasoning_gym", "guess_number", "python_tool", "code")
RG_TRAIN_SEED = 12_345  # reasoning-gym's own dataset seed for training; the env's default is 0


@dataclass(frozen=True)
class Source:
    """One kind of conversation: `make(seed)` builds the one of that seed."""

    name: str
    make: Callable[[int], Conversation]


def _single(prompt: list[Message], reply: str) -> Conversation:
    return [*prompt, {"role": "assistant", "content": reply}]


def arithmetic_source(difficulties: tuple[int, ...]) -> Source:
    from rlvr.envs.tasks.arithmetic import ArithmeticEnv

    envs = [ArithmeticEnv(difficulty=d) for d in difficulties]

    def make(seed: int) -> Conversation:
        task = envs[seed % len(envs)].make_task(seed)
        return _single(task.prompt, task.reference)

    return Source("arithmetic", make)


def symbolic_math_source() -> Source:
    from rlvr.envs.tasks.symbolic_math import SymbolicMathEnv

    env = SymbolicMathEnv(difficulty=1)

    def make(seed: int) -> Conversation:
        task = env.make_task(seed)
        return _single(task.prompt, task.reference)

    return Source("symbolic_math", make)


def reasoning_gym_source(size: int) -> Source:
    from rlvr.envs.tasks.reasoning_gym_env import ReasoningGymEnv

    env = ReasoningGymEnv(seed=RG_TRAIN_SEED, size=size)  # the default dataset, other entries

    def make(seed: int) -> Conversation:
        task = env.get_task(str(seed % size))
        return _single(task.prompt, task.reference)

    return Source("reasoning_gym", make)


def guess_number_source() -> Source:
    """Binary search played to the end: the prompt, each guess and the env's "higher"/"lower"."""
    from rlvr.envs.tasks.guess_number import GuessNumberEnv

    env = GuessNumberEnv()

    def make(seed: int) -> Conversation:
        env.reset(seed=seed)
        messages = list(env.task.prompt)
        done = False
        while not done:
            guess = env.reference_action()
            reply, _, terminated, truncated, _ = env.step(guess)
            messages += [{"role": "assistant", "content": guess}, *reply]
            done = terminated or truncated
        return messages

    return Source("guess_number", make)


def python_tool_source() -> Source:
    """The reference tool call, its output (every template prints just the answer), the answer."""
    from rlvr.envs.tasks.python_tool import PythonToolEnv

    env = PythonToolEnv()

    def make(seed: int) -> Conversation:
        task = env.make_task(seed)
        return [
            *task.prompt,
            {"role": "assistant", "content": task.reference},
            {"role": env.tool_role, "content": task.answer},
            {"role": "assistant", "content": f"The answer is \\boxed{{{task.answer}}}."},
        ]

    return Source("python_tool", make)


def code_source() -> Source:
    from rlvr.envs.tasks.code import code_prompt, fenced
    from rlvr.trainers.tiny.code_tasks import code_task

    def make(seed: int) -> Conversation:
        statement, entry_point, code = code_task(seed)
        return _single(code_prompt(statement, entry_point), fenced(code))

    return Source("code", make)


def sources(arithmetic_difficulties: tuple[int, ...], reasoning_gym_size: int) -> dict[str, Source]:
    made = (
        arithmetic_source(arithmetic_difficulties),
        symbolic_math_source(),
        reasoning_gym_source(reasoning_gym_size),
        guess_number_source(),
        python_tool_source(),
        code_source(),
    )
    return {source.name: source for source in made}


def tokenizer_text(conversation: Conversation) -> list[str]:
    """What the tokenizer is trained on: each message as the template shows it, minus special tokens."""
    return [f"{m['role']}\n{m['content']}\n" for m in conversation]


def sft_conversation(
    tokenizer, conversation: Conversation, tools: list[dict] | None = None
) -> tuple[list[int], list[int]]:
    """(input ids, labels) of a whole conversation, token-exact with a rollout that produced it
    (in an env whose `chat_tools` are `tools`); only the assistant's tokens (and the eos ending
    each of its turns) carry loss."""
    from rlvr.envs.chat_template import reply_ids, template_ids

    first = next(i for i, m in enumerate(conversation) if m["role"] == "assistant")
    history = conversation[:first]
    ids = template_ids(tokenizer, history, add_generation_prompt=True, tools=tools)
    labels = [-100] * len(ids)
    i = first
    while i < len(conversation):
        turn = conversation[i]
        response = tokenizer.encode(turn["content"], add_special_tokens=False) + [tokenizer.eos_token_id]
        ids, labels = ids + response, labels + response
        history = history + [turn]
        j = i + 1
        while j < len(conversation) and conversation[j]["role"] != "assistant":
            j += 1
        if j > i + 1:
            reply = reply_ids(tokenizer, history, conversation[i + 1 : j], model_ended_turn=True, tools=tools)
            ids, labels = ids + reply, labels + [-100] * len(reply)
            history = history + conversation[i + 1 : j]
        i = j
    return ids, labels
