"""The tiny model's warm-start corpus: conversations in each built-in env's exact format, whose
targets the envs' own verifiers accept, token-exact with what a rollout feeds the model, and
drawn from tasks that the evaluation never uses."""

from __future__ import annotations

import json
from difflib import SequenceMatcher
from importlib.resources import files

import pytest

from rlvr.envs.chat_template import template_ids
from rlvr.envs.tasks.arithmetic import ArithmeticEnv
from rlvr.envs.tasks.code import code_prompt
from rlvr.envs.tasks.guess_number import GuessNumberEnv
from rlvr.envs.tasks.python_tool import PythonToolEnv
from rlvr.envs.tasks.reasoning_gym_env import ReasoningGymEnv
from rlvr.envs.tasks.symbolic_math import SymbolicMathEnv
from rlvr.trainers.models import load_tokenizer
from rlvr.trainers.tiny.code_tasks import code_task
from rlvr.trainers.tiny.corpus import SOURCES, sft_conversation, sources
from rlvr.trainers.tiny.model import TinySpec, schedule
from rlvr.verifiers import math as math_verifier
from rlvr.verifiers.verdict import Outcome


@pytest.fixture(scope="module")
def corpus():
    return sources((2,), reasoning_gym_size=500)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


def test_every_source_is_there(corpus):
    assert tuple(corpus) == SOURCES


@pytest.mark.parametrize("seed", [0, 7, 123])
def test_single_step_targets_are_what_the_env_accepts(corpus, seed):
    for name, env in (("arithmetic", ArithmeticEnv(difficulty=2)), ("symbolic_math", SymbolicMathEnv(difficulty=1))):
        conversation = corpus[name].make(seed)
        task = env.make_task(seed)
        assert conversation[:-1] == task.prompt
        assert env.verify(task, conversation[-1]["content"]).outcome is Outcome.CORRECT


def test_reasoning_gym_targets_use_another_dataset_seed(corpus):
    env = ReasoningGymEnv(size=500)  # the env as evaluated: dataset seed 0
    trained = ReasoningGymEnv(seed=12_345, size=500)
    held_out = {env.get_task(str(i)).prompt[-1]["content"] for i in range(500)}
    questions = []
    for seed in range(200):
        conversation = corpus["reasoning_gym"].make(seed)
        task = trained.get_task(str(seed))
        assert conversation[:-1] == task.prompt and conversation[-1]["content"] == f"<answer>{task.answer}</answer>"
        questions.append(task.prompt[-1]["content"])
    assert len(set(questions) & held_out) <= 2  # chance collisions of tiny problems only


def test_guess_number_conversations_are_binary_search_played_to_the_secret(corpus):
    for seed in range(20):
        conversation = corpus["guess_number"].make(seed)
        env = GuessNumberEnv()
        env.reset(seed=seed)
        assert conversation[0] == env.task.prompt[0]
        guesses = [m["content"] for m in conversation if m["role"] == "assistant"]
        replies = [m["content"] for m in conversation[1:] if m["role"] == "user"]
        assert guesses[0] == "50" and int(guesses[-1]) == env.task.answer
        assert len(guesses) <= env.max_turns and len(replies) == len(guesses) - 1
        assert set(replies) <= {"higher", "lower"}
        assert conversation[-1]["role"] == "assistant"


def test_python_tool_conversations_call_the_tool_then_answer(corpus):
    env = PythonToolEnv()
    for seed in range(10):
        task = env.make_task(seed)
        prompt, call, output, answer = (conversation := corpus["python_tool"].make(seed))[0], *conversation[1:]
        assert [prompt] == task.prompt and call["content"] == task.reference
        assert output == {"role": "tool", "content": task.answer}
        assert math_verifier.verify(answer["content"], task.answer).outcome is Outcome.CORRECT
        assert answer["content"] == f"The answer is \\boxed{{{task.answer}}}."


def test_code_tasks_are_not_code_v0_tasks_and_their_references_run(corpus):
    shipped = [json.loads(line) for line in (files("rlvr.envs") / "data" / "code_tasks.jsonl").read_text().splitlines()]
    names, statements = {r["entry_point"] for r in shipped}, {r["prompt"].strip() for r in shipped}
    for seed in range(300):
        statement, entry_point, code = code_task(seed)
        assert entry_point is None or entry_point not in names
        assert max(SequenceMatcher(None, statement, other).ratio() for other in statements) < 0.8
        conversation = corpus["code"].make(seed)
        assert conversation[:-1] == code_prompt(statement, entry_point)
        assert conversation[-1]["content"] == f"```python\n{code.rstrip()}\n```"
        if entry_point is not None:
            namespace: dict = {}
            exec(compile(code, "<reference>", "exec"), namespace)  # our own code, not a model's
            assert callable(namespace[entry_point])
    # Names must be copied, not remembered: many names, and no small set of first words to guess from.
    functions = [name for name in (code_task(seed)[1] for seed in range(300)) if name is not None]
    assert len(set(functions)) > 0.95 * len(functions)
    assert len({name.removeprefix("is_").split("_")[0] for name in functions}) > 0.6 * len(functions)


def test_sft_conversation_is_token_exact_with_the_template_and_labels_only_the_model(corpus, tokenizer):
    conversation = corpus["guess_number"].make(3)
    ids, labels = sft_conversation(tokenizer, conversation)
    whole = template_ids(tokenizer, conversation, add_generation_prompt=False)
    assert ids == whole[:-1]  # the template closes the last turn with eos and a newline
    spans, current = [], []
    for token, label in zip(ids, labels):
        if label != -100:
            assert label == token
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    spans.append(current)
    assistant = [m["content"] for m in conversation if m["role"] == "assistant"]
    assert [tokenizer.decode(span) for span in spans] == [f"{text}<|im_end|>" for text in assistant]


def test_schedule_worked_example():
    spec = TinySpec(mix=(("arithmetic", 3), ("code", 1)), sft_steps=6)
    assert schedule(spec) == ["arithmetic", "code", "arithmetic", "arithmetic", "arithmetic", "code"]
    with pytest.raises(ValueError, match="mix"):
        TinySpec(mix=(("chess", 1),))
    with pytest.raises(ValueError, match="mix"):
        TinySpec(mix=(("code", 0),))
