"""`rlvr/Code-v0`: single-step programming tasks shipped with rlvr, checked in the sandbox.

35 tasks of graded difficulty (1: easy string and number functions; 2: loops, collections and
parsing; 3: moderate algorithms such as dynamic programming, graph search and binary search),
each with a reference solution, a plausible wrong one and tests of the three kinds (standard
input/output, function calls, assert code). They live in `envs/data/code_tasks.jsonl`. Each also
has six `heldout_tests` (generated from the reference by `scripts/gen_code_heldout.py`): the
tests `rlvr/CodeFeedback-v0` pays on and never quotes. This single-step env shows no feedback, so
it runs all of a task's tests, `tests` and `heldout_tests` alike.

This module also holds what every code environment shares: the prompt, task records -> `Task`,
and `CodeTaskSource`, a task list with seeded sampling and the sandbox held only at step time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

import numpy as np

from rlvr.envs.core import EnvError, Message, SingleTurnEnv, Task, TaskNotFoundError
from rlvr.envs.tasks import code_completion
from rlvr.verifiers import code as code_verifier
from rlvr.verifiers.verdict import Verdict

TASKS_RESOURCE = ("rlvr.envs", "data/code_tasks.jsonl")
FUNCTION_INSTRUCTIONS = (
    "Write it in Python 3 (standard library only). Answer with the complete code, including any "
    "imports, in a single ```python code block."
)
PROGRAM_INSTRUCTIONS = (
    "Write a complete Python 3 program (standard library only) that reads standard input and "
    "writes the answer to standard output. Answer with the code in a single ```python code block."
)
# A program that fails every kind of test: the checker's known-bad answer when a record has none.
FAILING_PROGRAM = "raise SystemExit(1)\n"


class TaskRecordError(EnvError, ValueError):
    """A task record (a JSONL line) is malformed."""


def fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def code_prompt(statement: str, entry_point: str | None) -> list[Message]:
    instructions = FUNCTION_INSTRUCTIONS if entry_point else PROGRAM_INSTRUCTIONS
    return [{"role": "user", "content": f"{statement.strip()}\n\n{instructions}"}]


def task_from_record(record: Mapping[str, Any]) -> Task:
    """A `Task` from a record in rlvr's own shape: `id`, `prompt` (the statement), `tests`
    (dicts `verifiers.code.load_tests` reads), optional `heldout_tests` (more such dicts: tests
    no feedback may quote, see `envs.tasks.code_feedback`), `entry_point`, `reference`, `wrong`,
    `difficulty`, `title`, `stub` (a function stub the response completes, HumanEval's shape:
    `envs.tasks.code_completion`). `answer` is the tuple of typed tests, `tests` then `heldout_tests`;
    `metadata["n_heldout"]` says how many of the last ones are held out (0: none declared)."""
    missing = [k for k in ("id", "prompt", "tests") if k not in record]
    if missing:
        raise TaskRecordError(f"task record lacks {missing}: keys {sorted(record)}")
    task_id = str(record["id"])
    try:
        shown = code_verifier.load_tests(record["tests"])
        heldout = code_verifier.load_tests(record.get("heldout_tests") or [])
    except code_verifier.TestSpecError as exc:
        raise TaskRecordError(f"task {task_id}: {exc}") from None
    tests = tuple(shown + heldout)
    if not shown:
        raise TaskRecordError(f"task {task_id} has no tests")
    entry_point = record.get("entry_point") or None
    return Task(
        task_id=task_id,
        prompt=code_prompt(str(record["prompt"]), entry_point),
        answer=tests,
        reference=fenced(record.get("reference") or FAILING_PROGRAM),
        wrong=fenced(record.get("wrong") or FAILING_PROGRAM),
        metadata={k: record[k] for k in ("difficulty", "title", "source", "stub") if record.get(k) is not None}
        | {"entry_point": entry_point, "n_tests": len(tests), "n_heldout": len(heldout)},
    )


def read_jsonl(lines: Iterable[str], origin: str) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskRecordError(f"{origin}:{number}: not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise TaskRecordError(f"{origin}:{number}: expected a JSON object, got {type(record).__name__}")
        records.append(record)
    return records


def builtin_records() -> list[dict[str, Any]]:
    package, name = TASKS_RESOURCE
    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    return read_jsonl(text.splitlines(), name)


def builtin_tasks(difficulty: int | Sequence[int] | None = None) -> list[Task]:
    """The shipped tasks, optionally only those of the given difficulty level(s) 1-3."""
    levels = {difficulty} if isinstance(difficulty, int) else set(difficulty) if difficulty is not None else None
    if levels is not None and (not levels or not levels <= {1, 2, 3}):
        raise ValueError(f"difficulty must be 1, 2, 3 (or a list of them), got {difficulty!r}")
    tasks = [task_from_record(r) for r in builtin_records()]
    return tasks if levels is None else [t for t in tasks if t.metadata.get("difficulty") in levels]


class SandboxUser:
    """Mixin for envs that run code. The sandbox is never stored across a pickle or copy (envs
    cross process boundaries): one passed in is used until then, else `sandbox.shared_sandbox()`
    at step time."""

    sandbox: Any = None

    def get_sandbox(self) -> Any:
        if self.sandbox is not None:
            return self.sandbox
        from rlvr import sandbox  # at step time: building an env needs no Docker

        return sandbox.shared_sandbox()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["sandbox"] = None  # a live Docker client does not cross a pickle
        return state


class CodeTaskSource(SandboxUser):
    """Mixin: a fixed list of code tasks. `sample_task` draws one with the env's seeded RNG,
    `get_task` finds one by id; `verify_response` runs the tests in the sandbox."""

    scoring: str = "all_or_nothing"
    timeout_s: float = 4.0

    def _init_tasks(self, tasks: Sequence[Task], sandbox: Any, scoring: str, timeout_s: float) -> None:
        if not tasks:
            raise ValueError(f"{type(self).__name__} has no tasks to offer")
        if scoring not in code_verifier.SCORINGS:
            raise ValueError(f"scoring must be one of {code_verifier.SCORINGS}, got {scoring!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        ids = [t.task_id for t in tasks]
        if len(set(ids)) != len(ids):
            raise ValueError("task ids must be unique")
        self.tasks = list(tasks)
        self._by_id = {t.task_id: t for t in self.tasks}
        self.sandbox = sandbox
        self.scoring = scoring
        self.timeout_s = float(timeout_s)

    def sample_task(self, rng: np.random.Generator) -> Task:
        return self.tasks[int(rng.integers(0, len(self.tasks)))]

    def task_ids(self) -> list[str]:
        return [t.task_id for t in self.tasks]

    def get_task(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise TaskNotFoundError(f"{type(self).__name__} has no task {task_id!r}") from None

    def verify_response(
        self,
        task: Task,
        response: str,
        *,
        fail_fast: bool | None = None,
        tests: Sequence[Any] | None = None,
        wall_s: float | None = None,
    ) -> Verdict:
        """Run `tests` (default: all of `task.answer`) against the response's program (for a task
        with a function stub, the response's code completed by it: `envs.tasks.code_completion`)."""
        if task.metadata.get("stub") and task.metadata.get("entry_point"):
            response = code_completion.as_program(response, task.metadata["stub"], task.metadata["entry_point"])
        settings = code_verifier.RunSettings(
            timeout_s=self.timeout_s,
            fail_fast=self.scoring == "all_or_nothing" if fail_fast is None else fail_fast,
            **({} if wall_s is None else {"max_wall_s": wall_s}),  # a cap of the caller's (code_feedback)
        )
        return code_verifier.verify(
            response,
            task.answer if tests is None else tests,
            self.sandbox,
            scoring=self.scoring,
            function=task.metadata.get("entry_point"),
            settings=settings,
        )


class CodeEnv(CodeTaskSource, SingleTurnEnv):
    """Programming tasks shipped with rlvr (35, difficulty 1-3), run against tests in the sandbox."""

    version = "0"

    def __init__(
        self,
        difficulty: int | Sequence[int] | None = None,
        scoring: str = "all_or_nothing",
        timeout_s: float = 4.0,
        sandbox: Any = None,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        self.difficulty = difficulty
        self._init_tasks(builtin_tasks(difficulty), sandbox, scoring, timeout_s)

    def verify(self, task: Task, response: str) -> Verdict:
        return self.verify_response(task, response)
