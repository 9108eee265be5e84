"""An rlvr environment as what `trl.GRPOTrainer` consumes: a dataset of its tasks and a reward function.

    dataset = trl_dataset("rlvr/Arithmetic-v0", tasks=64)   # columns: prompt (chat messages), rlvr_task
    trainer = GRPOTrainer(model=..., reward_funcs=EnvReward(), train_dataset=dataset, args=GRPOConfig(...))

`prompt` is in TRL's conversational format (a list of `{"role", "content"}` messages), so TRL applies the
model's chat template; `rlvr_task` is the row's `TaskKey` as JSON. TRL passes every extra column to its
reward functions as a keyword list, and `EnvReward` scores each completion with that task's environment
(`scoring.TaskScorer`): the reward is the environment's own, and a grader failure (`error`) is None, which
TRL 1.x leaves out of its group baseline and gives no advantage (its documented meaning of None: "not
scored"), as rlvr leaves such an episode out of training.

TRL itself is not imported: the reward function only has to meet its signature
(`prompts`, `completions`, `completion_ids`, every dataset column, and `log_metric`, as keywords).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.envs.adapters.keys import AdapterError, TaskKey
from rlvr.envs.adapters.rows import TaskRow, task_rows
from rlvr.envs.adapters.scoring import Score, TaskScorer
from rlvr.verifiers.verdict import Outcome

TASK_COLUMN = "rlvr_task"  # the dataset column holding each row's TaskKey (JSON)


def trl_record(row: TaskRow) -> dict[str, Any]:
    """One dataset row: the prompt as chat messages and the task's key."""
    return {"prompt": row.prompt, TASK_COLUMN: row.key.to_json()}


def trl_dataset(env_id: str, tasks: int | None = None, env_args: Mapping[str, Any] | None = None, start: int = 0):
    """A `datasets.Dataset` of `tasks` tasks of `env_id` from `start` (`rows.task_rows` says which), with
    the columns `prompt` and `rlvr_task`. `AdapterError` for an environment the adapters cannot serve."""
    from datasets import Dataset  # a heavy import, only when a dataset is made

    return Dataset.from_list([trl_record(row) for row in task_rows(env_id, tasks, env_args, start)])


def completion_text(completion: str | Sequence[Mapping[str, Any]]) -> str:
    """The text a completion answers with: the string itself (TRL's standard format), or the content of
    its last assistant message (the conversational format); text parts of a content list are joined."""
    if isinstance(completion, str):
        return completion
    for message in reversed(completion):
        if message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
            return content if isinstance(content, str) else ""
    return ""


class EnvReward:
    """A TRL reward function that scores each completion with its task's environment (one `TaskScorer`).

    `stop_token_ids`: the token ids a completion ends on when it was not cut (the tokenizer's EOS and pad);
    given, a completion whose last token is none of them was cut at `max_completion_length` and earns 0
    (`truncated`), as in `rlvr train`. Without them, cut text is graded like any other text.
    `max_workers`: completions scored at once (a code environment's verifier waits on its sandbox).
    After each call, `last` holds its typed `Score`s, `outcomes` counts every outcome so far, and TRL's
    logs get each outcome's share of the batch as `rlvr/<outcome>`."""

    def __init__(self, stop_token_ids: Collection[int] | None = None, max_workers: int = 8, name: str = "rlvr"):
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.__name__ = name  # TRL names the reward's metrics after it
        self.stop_token_ids = None if stop_token_ids is None else frozenset(int(t) for t in stop_token_ids)
        self.max_workers = max_workers
        self.scorer = TaskScorer()
        self.outcomes: Counter[Outcome] = Counter()
        self.last: list[Score] = []
        self._pool: ThreadPoolExecutor | None = None

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        rlvr_task: Sequence[str] | None = None,
        log_metric: Any = None,
        **columns: Any,
    ) -> list[float | None]:
        if rlvr_task is None:
            raise AdapterError(
                f"the dataset has no {TASK_COLUMN!r} column to score with (columns: {sorted(columns)}): make it with "
                "rlvr.envs.adapters.trl.trl_dataset"
            )
        if len(rlvr_task) != len(completions):
            raise AdapterError(f"{len(completions)} completions but {len(rlvr_task)} {TASK_COLUMN} values")
        keys = [TaskKey.from_json(k) for k in rlvr_task]
        texts = [completion_text(c) for c in completions]
        cuts = self._cuts(completion_ids, len(texts))
        if self.max_workers == 1 or len(texts) == 1:
            scores = [self.scorer.score(k, t, c) for k, t, c in zip(keys, texts, cuts)]
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="rlvr-reward")
            scores = list(self._pool.map(self.scorer.score, keys, texts, cuts))
        self.last = scores
        batch = Counter(s.outcome for s in scores)
        self.outcomes.update(batch)
        if callable(log_metric):
            for outcome in Outcome:
                log_metric(f"rlvr/{outcome.value}", batch[outcome] / len(scores))
        return [s.reward for s in scores]

    def summary(self) -> str:
        """The outcomes so far, as one line: "16 completions scored: 7 correct, 9 incorrect"."""
        counts = ", ".join(f"{self.outcomes[o]} {o.value}" for o in Outcome if self.outcomes[o])
        return f"{sum(self.outcomes.values())} completions scored" + (f": {counts}" if counts else "")

    def _cuts(self, completion_ids: Sequence[Sequence[int]] | None, n: int) -> list[bool]:
        if self.stop_token_ids is None or completion_ids is None:
            return [False] * n
        return [bool(ids) and int(ids[-1]) not in self.stop_token_ids for ids in completion_ids]

    def close(self) -> None:
        """Stop the scoring threads (a later call starts them again)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
