"""`rlvr/ReasoningGym-v0`: any dataset of the `reasoning-gym` package, by name.

Knobs: `dataset` (a reasoning-gym name such as "chain_sum", "leg_counting", "spell_backward";
`reasoning_gym.factory.DATASETS` lists about a hundred, all generated offline), `size` and
`seed` (the dataset's own), any further keyword arguments go to the dataset's config (e.g.
`min_terms=2`), `scorer` ("reasoning_gym": the dataset's own `score_answer`; "rlvr": our
`verifiers.math`, for math-like answers), `partial_credit` (keep the scorer's fractional
scores, e.g. 0.01 for a well-formed wrong answer in some datasets; False makes rewards 0/1) and
`score_timeout_s`.

reasoning-gym's scorers are not bounded (some hand the answer to SymPy: `9**9**9**9` never
returns), so they run in worker processes with a deadline (`verifiers.math.bounded`); a scorer
that misses it, or a worker that dies, is an `error` verdict (the grader failed), and one that
raises on the answer is a `format_error`. The pool is a module-level cache, started on first
use (about 4 s: the workers import reasoning-gym) and never stored on the env, which stays
picklable.

The prompt is reasoning-gym's default system prompt plus the question; as reasoning-gym expects,
the answer is the text inside the last `<answer>...</answer>` tags (none: a format error). Task
ids are the dataset indices 0..size-1. Datasets whose entries carry no reference answer (their
scorer checks solutions, e.g. "graph_color") are rejected: every rlvr task needs one.

reasoning-gym is the extra `reasoning-gym` (`pip install 'rlvr[reasoning-gym]'`), not in the light core: without it,
making the env is one line saying so (`MissingEnvExtraError`).
"""

from __future__ import annotations

import atexit
import difflib
import os
import pickle
import threading
from typing import Any, ClassVar

import numpy as np

from rlvr.envs.core import MissingEnvExtraError, SingleTurnEnv, Task, TaskNotFoundError
from rlvr.errors import missing_extra
from rlvr.verifiers import math as math_verifier
from rlvr.verifiers.math.bounded import PoolError, PoolTimeout, WorkerPool
from rlvr.verifiers.verdict import Outcome, Verdict

SCORERS = ("reasoning_gym", "rlvr")
_MAX_ANSWER_CHARS = 20_000  # longer answers are not scored at all
SCORER_WORKERS = 2
_pool_lock = threading.Lock()
_pool: list[WorkerPool] = []  # the cached scorer pool (zero or one), see the module docstring
_worker_datasets: dict[bytes, Any] = {}  # inside a worker: the datasets built so far (a cache)


def _rg():
    try:
        import reasoning_gym  # slow to import (about 3 s): only when the env is made
    except ModuleNotFoundError as exc:  # its own extra, not in the light core (pyproject.toml)
        if exc.name != "reasoning_gym":
            raise  # installed, but one of its own imports is not
        raise MissingEnvExtraError(missing_extra("rlvr/ReasoningGym-v0", "reasoning-gym", "reasoning-gym")) from None
    return reasoning_gym


def create_dataset(name: str, size: int, seed: int, kwargs: dict[str, Any]):
    """The reasoning-gym dataset, with clear errors for unknown names and bad config values."""
    rg = _rg()
    known = sorted(rg.factory.DATASETS)
    if name not in known:
        close = difflib.get_close_matches(str(name), known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(known)}"
        raise ValueError(f"unknown reasoning-gym dataset {name!r}{hint}")
    try:
        return rg.create_dataset(name, size=size, seed=seed, **kwargs)
    except (TypeError, ValueError, AssertionError) as e:
        fields = sorted(getattr(rg.factory.DATASETS[name][1], "__dataclass_fields__", {}))
        raise ValueError(
            f"reasoning-gym dataset {name!r} rejected its config ({e}); its config fields are: {', '.join(fields)}"
        ) from None


def _import_rg() -> None:
    _rg()


def scorer_pool() -> WorkerPool:
    with _pool_lock:
        if _pool and (_pool[0].closed or _pool[0].pid != os.getpid()):
            _pool.clear()  # closed, or inherited through fork
        if not _pool:
            _pool.append(WorkerPool(SCORER_WORKERS, memory_mb=4096, init=(_import_rg, ())))
        return _pool[0]


@atexit.register
def shutdown_scorers() -> None:
    """Stop the scorer workers (a later score starts new ones)."""
    with _pool_lock:
        pools = [p for p in _pool if p.pid == os.getpid()]
        _pool.clear()
    for pool in pools:
        pool.close()


def score_job(config: tuple, entry: dict, answer: str) -> tuple[float | None, str]:
    """In a worker: the dataset's score for `answer`, or (None, why) if its scorer raised."""
    key = pickle.dumps(config)
    if key not in _worker_datasets:
        name, size, seed, kwargs = config
        _worker_datasets[key] = create_dataset(name, size, seed, dict(kwargs))
    try:
        return float(_worker_datasets[key].score_answer(answer, entry)), ""
    except Exception as e:  # noqa: BLE001 - some scorers raise on answers they cannot parse
        return None, f"{type(e).__name__}: {str(e)[:200]}"


def wrong_candidates(answer: str) -> list[str]:
    """Well-formed answers that differ from `answer`, most plausible first."""
    out = []
    try:
        out.append(str(int(answer) + 1))
    except ValueError:
        out.append(f"{answer} x")
    return out + ["0", "none", "x" + answer[::-1]]


class ReasoningGymEnv(SingleTurnEnv):
    """Any reasoning-gym dataset by name, scored by its own scorer or by rlvr's math verifier."""

    version: ClassVar[str] = "0"

    def __init__(
        self,
        dataset: str = "chain_sum",
        size: int = 1000,
        seed: int = 0,
        scorer: str = "reasoning_gym",
        partial_credit: bool = True,
        score_timeout_s: float = 2.0,
        render_mode: str | None = None,
        **dataset_kwargs: Any,
    ):
        super().__init__(render_mode=render_mode)
        if scorer not in SCORERS:
            raise ValueError(f"scorer must be one of {SCORERS}, got {scorer!r}")
        if not isinstance(score_timeout_s, (int, float)) or not 0 < score_timeout_s <= 60:
            raise ValueError(f"score_timeout_s must be in (0, 60], got {score_timeout_s!r}")
        self.score_timeout_s = float(score_timeout_s)
        self._config = (dataset, size, seed, tuple(sorted(dataset_kwargs.items())))
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive integer, got {size!r}")
        self.dataset_name, self.size, self.seed = dataset, size, seed
        self.scorer, self.partial_credit = scorer, partial_credit
        self.dataset = create_dataset(dataset, size, seed, dataset_kwargs)
        if not isinstance(self.dataset[0].get("answer"), str):
            raise ValueError(
                f"reasoning-gym dataset {dataset!r} gives no reference answers (its scorer checks "
                "solutions instead); rlvr environments need one per task"
            )
        self.system_prompt = _rg().utils.SYSTEM_PROMPTS["default"]

    def sample_task(self, rng: np.random.Generator) -> Task:
        return self.get_task(str(int(rng.integers(0, self.size))))

    def task_ids(self) -> list[str]:
        return [str(i) for i in range(self.size)]

    def get_task(self, task_id: str) -> Task:
        index = int(task_id) if task_id.isascii() and task_id.isdigit() and len(task_id) < 19 else -1
        if not 0 <= index < self.size:
            raise TaskNotFoundError(f"{self.dataset_name}: task ids are indices 0..{self.size - 1}, got {task_id!r}")
        entry = self.dataset[index]
        answer = str(entry["answer"])
        return Task(
            task_id=str(index),
            prompt=[{"role": "system", "content": self.system_prompt}, {"role": "user", "content": entry["question"]}],
            answer=answer,
            reference=f"<answer>{answer}</answer>",
            wrong=f"<answer>{wrong_candidates(answer)[0]}</answer>",
            metadata={"dataset": self.dataset_name, "entry": entry},
        )

    def verify(self, task: Task, response: str) -> Verdict:
        extracted = _rg().utils.extract_answer(response)
        if extracted is None:
            return Verdict(0.0, Outcome.FORMAT_ERROR, "no <answer>...</answer> tags")
        if len(extracted) > _MAX_ANSWER_CHARS:
            return Verdict(0.0, Outcome.FORMAT_ERROR, f"answer longer than {_MAX_ANSWER_CHARS} characters")
        if self.scorer == "rlvr":
            verdict = math_verifier.verify(f"<answer>{extracted}</answer>", task.answer)
        else:
            verdict = self._rg_verdict(task, extracted)
        if not self.partial_credit and verdict.outcome is not Outcome.CORRECT and verdict.score > 0:
            verdict = Verdict(
                0.0, verdict.outcome, f"{verdict.detail} (partial credit {verdict.score:g} off)", verdict.info
            )
        return verdict

    def _rg_verdict(self, task: Task, extracted: str) -> Verdict:
        try:
            score, error = scorer_pool().run(
                score_job, (self._config, task.metadata["entry"], extracted), self.score_timeout_s
            )
        except PoolTimeout:
            return Verdict(0.0, Outcome.ERROR, f"the {self.dataset_name} scorer took over {self.score_timeout_s:g} s")
        except PoolError as e:
            return Verdict(0.0, Outcome.ERROR, f"the {self.dataset_name} scorer failed: {e}")
        if score is None:
            return Verdict(
                0.0, Outcome.FORMAT_ERROR, f"the {self.dataset_name} scorer could not read the answer: {error}"
            )
        score = min(max(score, 0.0), 1.0) if np.isfinite(score) else 0.0
        outcome = Outcome.CORRECT if score >= 1.0 else Outcome.INCORRECT
        return Verdict(score, outcome, f"{self.dataset_name} scorer: {score:g}")

    def wrong_action(self) -> str:
        """The first candidate wrong answer that the scorer gives nothing (else the lowest scoring)."""
        candidates = [f"<answer>{c}</answer>" for c in wrong_candidates(self.task.answer)]
        scored = [(self.verify(self.task, c).score, i) for i, c in enumerate(candidates)]
        return candidates[min(scored)[1]]
