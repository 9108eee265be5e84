"""`rlvr/MathDataset-v0`: math problems from a local JSONL or Parquet file, e.g. a downloaded GSM8K
or MATH split. Single-step; the answer is checked with `verifiers.math` (symbolic equivalence).

Knobs: `path` (a `.jsonl` or `.parquet` file, or a directory together with `split`, which picks
the files in it whose names start with the split, as in Hugging Face downloads such as
`main/test-00000-of-00001.parquet`), `question_key` and `answer_key` (the column names),
`answer_format` ("raw": the column is the answer; "gsm8k": the text after `####`; "boxed": the
last `\\boxed{...}` of a worked solution, as in MATH), `limit` (keep the first N rows) and
`prompt_template` (with a `{question}` placeholder). Task ids are row indices: stable for a file.
Every row is read and validated up front; errors name the file and the row.

Instead of `path`, `dataset` takes a Hugging Face `datasets` name (with `config`, e.g.
`dataset="openai/gsm8k", config="main", split="test"`) or a `datasets.Dataset` object, read the same
way (same keys, formats, `limit`, row-index ids); see `envs.tasks.dataset_sources` for its rules and errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from rlvr.envs.core import EnvError, SingleTurnEnv, Task, TaskNotFoundError
from rlvr.envs.tasks import dataset_sources
from rlvr.verifiers import math as math_verifier
from rlvr.verifiers.verdict import Verdict

DEFAULT_TEMPLATE = "{question}\n\nGive the final answer as \\boxed{answer}."
FORMATS = ("raw", "gsm8k", "boxed")
SUFFIXES = (".jsonl", ".parquet")


class DatasetError(EnvError, ValueError):
    """A dataset file is missing, unreadable or has a bad row; the message names the file and row."""


def find_files(path: str | Path, split: str | None) -> list[Path]:
    """The data files `path` (and `split`, for a directory) stands for."""
    p = Path(path).expanduser()
    if p.is_dir():
        if not split:
            raise DatasetError(f"{p} is a directory: pass split= to pick its files (e.g. split='test')")
        files = sorted(f for f in p.iterdir() if f.name.startswith(split) and f.suffix in SUFFIXES)
        if not files:
            have = sorted(f.name for f in p.iterdir() if f.suffix in SUFFIXES)
            raise DatasetError(f"{p}: no {'/'.join(SUFFIXES)} file starting with {split!r} (found: {have})")
        return files
    if not p.exists():
        raise DatasetError(f"{p}: no such file")
    if split:
        raise DatasetError(f"split={split!r} selects files in a directory, but {p} is a file")
    if p.suffix not in SUFFIXES:
        raise DatasetError(f"{p}: unsupported file type {p.suffix!r} (use {' or '.join(SUFFIXES)})")
    return [p]


def _jsonl_rows(path: Path):
    """Yield (where, row dict) for each non-blank line; `where` names the file, row and line."""
    row = 0
    with path.open("r", encoding="utf-8", errors="strict") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}, row {row} (line {line_no})"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError(f"{where}: invalid JSON: {e.msg} at column {e.colno}") from None
            if not isinstance(obj, dict):
                raise DatasetError(f"{where}: expected a JSON object, got {type(obj).__name__}")
            yield where, obj
            row += 1


def _parquet_rows(path: Path, keys: list[str]):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        missing = [k for k in keys if k not in schema.names]
        if missing:
            raise DatasetError(f"{path}: no column(s) {missing}; columns are {schema.names}")
        table = pq.read_table(path, columns=keys)
    except (pa.ArrowException, OSError) as e:
        raise DatasetError(f"{path}: not a readable Parquet file: {e}") from None
    for i, obj in enumerate(table.to_pylist()):
        yield f"{path}, row {i}", obj


def extract_boxed(text: str) -> str | None:
    """The contents of the last `\\boxed{...}` (balanced braces), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j]
    return None


def parse_answer(raw: Any, answer_format: str, where: str) -> str:
    """The gold answer of one row, as a string, in the given format."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise DatasetError(f"{where}: the answer must be a string or a number, got {type(raw).__name__}")
    text = str(raw).strip()
    if answer_format == "gsm8k":
        if "####" not in text:
            raise DatasetError(f"{where}: answer_format='gsm8k' but the answer has no '####': {text[-60:]!r}")
        text = text.rsplit("####", 1)[1].strip().replace(",", "")
    elif answer_format == "boxed":
        boxed = extract_boxed(text)
        if boxed is None:
            raise DatasetError(f"{where}: answer_format='boxed' but the answer has no complete \\boxed{{}}")
        text = boxed.strip()
    if not text:
        raise DatasetError(f"{where}: the answer is empty")
    return text


def load_problems(
    files: list[Path], question_key: str, answer_key: str, answer_format: str, limit: int | None
) -> list[tuple[str, str]]:
    """(question, gold answer) pairs from the files, in order, at most `limit`."""

    def all_rows():
        for path in files:
            yield from _jsonl_rows(path) if path.suffix == ".jsonl" else _parquet_rows(path, [question_key, answer_key])

    return problems_from_rows(all_rows(), question_key, answer_key, answer_format, limit)


def problems_from_rows(
    rows: Iterable[tuple[str, dict]], question_key: str, answer_key: str, answer_format: str, limit: int | None
) -> list[tuple[str, str]]:
    """(question, gold answer) pairs from (where, row) pairs, in order, at most `limit`; `where` names a bad row."""
    out: list[tuple[str, str]] = []
    for where, obj in rows:
        if limit is not None and len(out) >= limit:
            return out
        for key in (question_key, answer_key):
            if key not in obj:
                raise DatasetError(f"{where}: no {key!r} key; keys are {sorted(obj)}")
        question = obj[question_key]
        if not isinstance(question, str) or not question.strip():
            raise DatasetError(f"{where}: {question_key!r} must be a non-empty string")
        out.append((question, parse_answer(obj[answer_key], answer_format, where)))
    return out


def load_source(
    dataset: Any,
    config: str | None,
    split: str | None,
    question_key: str,
    answer_key: str,
    answer_format: str,
    limit: int | None,
) -> tuple[list[tuple[str, str]], str]:
    """(problems, origin) from a `datasets` name or object (see `envs.tasks.dataset_sources`)."""
    ds, origin = dataset_sources.resolve(dataset, config, split)
    table = dataset_sources.rows(ds, origin, [question_key, answer_key], limit)
    return problems_from_rows(
        ((f"{origin}, row {i}", row) for i, row in enumerate(table)), question_key, answer_key, answer_format, limit
    ), origin


def wrong_answer(answer: str) -> str:
    """A well-formed answer that differs from `answer`: the number plus one, else `answer + 1`."""
    try:
        return str(int(answer) + 1)
    except ValueError:
        pass
    try:
        return repr(float(answer) + 1)
    except ValueError:
        return f"{answer} + 1"


class MathDatasetEnv(SingleTurnEnv):
    """Math problems from a local JSONL/Parquet file (GSM8K, MATH, ...), answers checked symbolically."""

    version: ClassVar[str] = "0"

    def __init__(
        self,
        path: str | None = None,
        question_key: str = "question",
        answer_key: str = "answer",
        answer_format: str = "raw",
        split: str | None = None,
        limit: int | None = None,
        prompt_template: str = DEFAULT_TEMPLATE,
        render_mode: str | None = None,
        dataset: Any = None,
        config: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if answer_format not in FORMATS:
            raise ValueError(f"answer_format must be one of {FORMATS}, got {answer_format!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
        if "{question}" not in prompt_template:
            raise ValueError("prompt_template must contain '{question}'")
        if (path is None) == (dataset is None):
            raise DatasetError(
                "pass exactly one of path= (a local file or folder) and dataset= (a `datasets` name or object)"
            )
        self.prompt_template = prompt_template
        if dataset is not None:
            self.problems, self.path = load_source(
                dataset, config, split, question_key, answer_key, answer_format, limit
            )
        else:
            if config is not None:
                raise DatasetError("config= names a subset of a `datasets` name: pass it with dataset=, not path=")
            self.path = str(path)
            self.problems = load_problems(find_files(path, split), question_key, answer_key, answer_format, limit)
        if not self.problems:
            raise DatasetError(f"{self.path}: no rows")

    def sample_task(self, rng: np.random.Generator) -> Task:
        return self.get_task(str(int(rng.integers(0, len(self.problems)))))

    def task_ids(self) -> list[str]:
        return [str(i) for i in range(len(self.problems))]

    def get_task(self, task_id: str) -> Task:
        index = int(task_id) if task_id.isascii() and task_id.isdigit() and len(task_id) < 19 else -1
        if not 0 <= index < len(self.problems):
            raise TaskNotFoundError(
                f"{self.path}: task ids are row indices 0..{len(self.problems) - 1}, got {task_id!r}"
            )
        question, answer = self.problems[index]
        return Task(
            task_id=str(index),
            prompt=[{"role": "user", "content": self.prompt_template.replace("{question}", question)}],
            answer=answer,
            reference=f"\\boxed{{{answer}}}",
            wrong=f"\\boxed{{{wrong_answer(answer)}}}",
            metadata={"path": self.path, "row": index},
        )

    def verify(self, task: Task, response: str) -> Verdict:
        return math_verifier.verify(response, task.answer)
