"""`rlvr/CodeDataset-v0`: programming tasks from a local JSONL file, in the common shapes.

Each line is one task; its shape is recognised by its keys:
- rlvr's own (as `rlvr/Code-v0` ships): `prompt`, `tests` (io/call/assert dicts), optional
  `entry_point`, `reference`, `wrong`;
- MBPP-like: `text`, `test_list` (assert lines), optional `test_setup_code`, `code` (reference),
  `challenge_test_list` (added with `challenge_tests=True`);
- HumanEval-like: `prompt` (signature and docstring), `test` (defines `check(candidate)`),
  `entry_point`, optional `canonical_solution`. Helper functions the prompt defines and the test
  calls (HumanEval/32's `poly`, /38's `encode_cyclic`) are put in front of the test code, with
  the prompt's imports: the test then uses the prompt's own helpers, never the program's
  (which could lie). A response is read as HumanEval's harness reads it: a whole function keeps
  the prompt's imports and helpers, a body is joined to the prompt (`envs.tasks.code_completion`);
- APPS-like: `question`, `input_output` ({"inputs", "outputs", optional "fn_name"}; a JSON string
  or an object), optional `solutions` (a JSON list; the first is the reference). With `fn_name`
  each test is a plain call, `fn(a, b)`, and a check that `judged_asserts` converts (so it is
  judged on the host): as APPS does, a tuple counts as a list, and `outputs[i][0]` is accepted
  too when the output is a one-element list;
- CodeContests-like: `description`, `public_tests` / `private_tests` / `generated_tests`
  ({"input": [...], "output": [...]}), optional `solutions` / `incorrect_solutions`
  ({"language": [...], "solution": [...]}; Python 3 is language 3).
Ids come from `id`, `task_id`, `problem_id` or `name`, else the line number. Records without a
known-bad solution use a program that fails every test as the checker's wrong answer.

Instead of `path`, `dataset` takes a Hugging Face `datasets` name (with `config` and `split`, e.g.
`dataset="google-research-datasets/mbpp", config="full", split="test"`) or a `datasets.Dataset`
object; its rows are records in the shapes above (see `envs.tasks.dataset_sources` for its rules and errors).
"""

from __future__ import annotations

import ast
import builtins
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.envs.core import SingleTurnEnv, Task
from rlvr.envs.tasks import dataset_sources
from rlvr.envs.tasks.code import CodeTaskSource, TaskRecordError, read_jsonl, task_from_record
from rlvr.verifiers.verdict import Verdict

PYTHON3 = 3  # CodeContests' language code for Python 3
_CALLED = re.compile(r"assert\s+(?:not\s+)?\(?\s*(?:set\(|sorted\(|math\.isclose\()?\s*([A-Za-z_]\w*)\s*\(")
_DEFINED = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\(", re.M)
_BUILTINS = frozenset(dir(builtins))


def _record_id(record: Mapping[str, Any], line: int) -> str:
    for key in ("id", "task_id", "problem_id", "name"):
        if record.get(key) is not None:
            return str(record[key])
    return str(line)


def _json_field(value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else None
        except json.JSONDecodeError as exc:
            raise TaskRecordError(f"{what} is not valid JSON: {exc}") from None
    return value


def _text(value: Any) -> str:
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def _io_tests(inputs: Sequence[Any], outputs: Sequence[Any]) -> list[dict[str, Any]]:
    if len(inputs) != len(outputs):
        raise TaskRecordError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    return [{"stdin": _text(i), "stdout": _text(o)} for i, o in zip(inputs, outputs)]


def _called(test: str, defined: Sequence[str]) -> str | None:
    """The function an MBPP assert line tests: the first name it calls that the reference
    defines, else the first that is not a builtin (`all(f(x) == y for ...)` tests `f`)."""
    try:
        calls = [
            n.func.id for n in ast.walk(ast.parse(test)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        ]
    except (SyntaxError, ValueError):
        found = _CALLED.search(test)
        return found.group(1) if found else None
    return next((c for c in calls if c in defined), None) or next((c for c in calls if c not in _BUILTINS), None)


def _mbpp(record: Mapping[str, Any], challenge: bool) -> dict[str, Any]:
    asserts = list(record["test_list"]) + (list(record.get("challenge_test_list") or []) if challenge else [])
    setup = (record.get("test_setup_code") or "").strip()
    reference = record.get("code")
    names = _DEFINED.findall(reference or "")
    entry = _called(asserts[0], names) if asserts else None
    entry = entry or (names[-1] if names else None)
    example = f"\n\nYour code should pass tests like this one:\n{asserts[0]}" if asserts else ""
    return {
        "prompt": f"{record['text'].strip()}{example}",
        "entry_point": entry,
        "reference": reference,
        "tests": [{"assert": f"{setup}\n{a}" if setup else a} for a in asserts],
    }


def _prompt_helpers(prompt: str, entry: str, test: str) -> str:
    """The prompt's imports and helper definitions (all but `entry`), when the test calls one of
    those helpers; else "" (the test code stays as it is, convertible where it was)."""
    try:
        defined = ast.parse(prompt).body
        used = {n.id for n in ast.walk(ast.parse(test)) if isinstance(n, ast.Name)}
    except (SyntaxError, ValueError):
        return ""
    helpers = [s for s in defined if isinstance(s, (ast.FunctionDef, ast.ClassDef)) and s.name != entry]
    if not any(h.name in used for h in helpers):
        return ""
    imports = [s for s in defined if isinstance(s, (ast.Import, ast.ImportFrom))]
    return "\n\n".join(ast.get_source_segment(prompt, s) or ast.unparse(s) for s in imports + helpers) + "\n\n"


def _humaneval(record: Mapping[str, Any]) -> dict[str, Any]:
    entry = record["entry_point"]
    solution = record.get("canonical_solution")
    helpers = _prompt_helpers(record["prompt"], entry, record["test"])
    return {
        "prompt": "Complete the following Python function. Give the whole function, signature included.\n\n"
        f"```python\n{record['prompt'].rstrip()}\n```",
        "entry_point": entry,
        "reference": record["prompt"] + solution if solution else None,
        "tests": [{"assert": f"{helpers}{record['test']}\n\ncheck({entry})\n"}],
        "stub": record["prompt"],  # a completion is read against it (envs.tasks.code_completion)
    }


def _apps_call(fn: str, inputs: Any, output: Any) -> dict[str, Any]:
    """One APPS call-based test as a plain call and host-side checks (see the module docstring)."""
    args = ", ".join(repr(a) for a in (inputs if isinstance(inputs, list) else [inputs]))
    wrapped = isinstance(output, list) and len(output) == 1
    also = f" or _got == {output[0]!r}" if wrapped else ""
    return {
        "assert": f"_got = {fn}({args})\n_got = list(_got) if isinstance(_got, tuple) else _got\n"
        f"assert _got == {output!r}{also}\n"
    }


def _apps(record: Mapping[str, Any]) -> dict[str, Any]:
    io = _json_field(record["input_output"], "input_output") or {}
    inputs, outputs = io.get("inputs") or [], io.get("outputs") or []
    solutions = _json_field(record.get("solutions"), "solutions") or []
    fn = io.get("fn_name")
    if fn:
        if len(inputs) != len(outputs):
            raise TaskRecordError(f"{len(inputs)} inputs but {len(outputs)} outputs")
        if not (isinstance(fn, str) and fn.isidentifier()):
            raise TaskRecordError(f"fn_name {fn!r} is not a function name")
        tests = [_apps_call(fn, i, o) for i, o in zip(inputs, outputs)]
    else:
        tests = _io_tests(inputs, outputs)
    return {
        "prompt": record["question"],
        "entry_point": fn,
        "tests": tests,
        "reference": solutions[0] if solutions else None,
    }


def _first_python3(solutions: Any) -> str | None:
    if not isinstance(solutions, Mapping):
        return None
    for language, code in zip(solutions.get("language") or [], solutions.get("solution") or []):
        if language == PYTHON3:
            return code
    return None


def _codecontests(record: Mapping[str, Any], include_generated: bool) -> dict[str, Any]:
    tests: list[dict[str, Any]] = []
    for key in ("public_tests", "private_tests") + (("generated_tests",) if include_generated else ()):
        group = record.get(key) or {}
        tests += _io_tests(group.get("input") or [], group.get("output") or [])
    return {
        "prompt": record["description"],
        "tests": tests,
        "reference": _first_python3(record.get("solutions")),
        "wrong": _first_python3(record.get("incorrect_solutions")),
    }


def normalise_record(
    record: Mapping[str, Any],
    line: int,
    *,
    challenge_tests: bool = False,
    generated_tests: bool = False,
    max_tests: int | None = None,
) -> dict[str, Any]:
    """Any supported shape -> rlvr's own record shape (see the module docstring)."""
    if "tests" in record and "prompt" in record:
        out = dict(record)
    elif "test_list" in record and "text" in record:
        out = _mbpp(record, challenge_tests)
    elif "entry_point" in record and "test" in record and "prompt" in record:
        out = _humaneval(record)
    elif "input_output" in record and "question" in record:
        out = _apps(record)
    elif "description" in record and ("public_tests" in record or "private_tests" in record):
        out = _codecontests(record, generated_tests)
    else:
        raise TaskRecordError(f"line {line}: unknown task shape, keys {sorted(record)} (see envs.tasks.code_dataset)")
    out["id"] = _record_id(record, line)
    if max_tests is not None:
        out["tests"] = list(out["tests"])[:max_tests]
    return out


def load_dataset(path: str | Path, **options: Any) -> list[Task]:
    """Every task of a JSONL file; a malformed line raises `TaskRecordError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such dataset file: {path}")
    with path.open(encoding="utf-8") as f:
        records = read_jsonl(f, str(path))
    return tasks_from_records(records, str(path), **options)


def tasks_from_records(records: Sequence[Mapping[str, Any]], origin: str, **options: Any) -> list[Task]:
    """Every record as a task (numbered from 1); a malformed one raises `TaskRecordError` naming it."""
    tasks = []
    for line, record in enumerate(records, 1):
        try:
            tasks.append(task_from_record(normalise_record(record, line, **options)))
        except (KeyError, TypeError, TaskRecordError) as exc:
            raise TaskRecordError(f"{origin} task {line}: {type(exc).__name__}: {exc}") from None
    return tasks


class CodeDatasetEnv(CodeTaskSource, SingleTurnEnv):
    """Programming tasks from a local JSONL file (MBPP, HumanEval, APPS, CodeContests or rlvr shape)."""

    version = "0"

    def __init__(
        self,
        path: str | None = None,
        scoring: str = "all_or_nothing",
        max_tests: int | None = None,
        challenge_tests: bool = False,
        generated_tests: bool = False,
        timeout_s: float = 4.0,
        sandbox: Any = None,
        render_mode: str | None = None,
        dataset: Any = None,
        config: str | None = None,
        split: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if max_tests is not None and max_tests < 1:
            raise ValueError(f"max_tests must be >= 1 or None, got {max_tests!r}")
        if (path is None) == (dataset is None):
            raise TaskRecordError(
                "pass exactly one of path= (a local JSONL file) and dataset= (a `datasets` name or object)"
            )
        options = {"challenge_tests": challenge_tests, "generated_tests": generated_tests, "max_tests": max_tests}
        if dataset is not None:
            ds, self.path = dataset_sources.resolve(dataset, config, split)
            tasks = tasks_from_records(dataset_sources.rows(ds, self.path), self.path, **options)
        else:
            if config is not None or split is not None:
                raise TaskRecordError(
                    "config= and split= pick from a `datasets` name: pass them with dataset=, not path="
                )
            self.path = str(path)
            tasks = load_dataset(path, **options)
        self._init_tasks(tasks, sandbox, scoring, timeout_s)

    def verify(self, task: Task, response: str) -> Verdict:
        return self.verify_response(task, response)
