"""The text-environment contract: observations are chat messages, actions are the model's text.

A `TextEnv` is a `gymnasium.Env`. `reset(seed=None, options=None)` returns the opening messages
and an info dict; `step(text)` returns the environment's reply messages (empty when done), the
turn's reward, `terminated`, `truncated`, and `info` carrying the verifier's `Verdict`.
The same seed gives the same task, and `options={"task_id": ...}` selects a task so that G
copies can be reset onto one task for a group; `options={"task": task}` resets onto a `Task`
object itself, which a group's copies share with the first (nothing is rebuilt).

An env whose tasks are a fixed list of problems says so with `task_ids()` (their ids, in order):
an evaluation then visits each once, instead of drawing tasks by seed.

Subclass `SingleTurnEnv` (a contextual bandit: one completion, one reward) or `MultiTurnEnv`
(its `respond` hook returns a `TurnResult`); an env's `kind` (`EnvKind`) says which way it is played.
"""

from __future__ import annotations

import copy
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding

from rlvr.envs.seeds import SEED_SPACE
from rlvr.errors import MissingExtraError, RlvrError
from rlvr.verifiers.verdict import Outcome, Verdict

Message = dict[str, str]  # {"role": "system" | "user" | "assistant" | "tool", "content": str}


def copy_messages(messages: list[Message]) -> list[Message]:
    """A copy the caller may change without touching `messages`. Messages of plain strings (all of
    rlvr's) are copied dict by dict, several times faster than `copy.deepcopy`, which a rollout's
    every reset and step would pay; anything nested (tool calls, content parts) is deep-copied."""
    if all(type(m) is dict and all(v is None or type(v) is str for v in m.values()) for m in messages):
        return [dict(m) for m in messages]
    return copy.deepcopy(messages)


class EnvKind(StrEnum):
    """How an environment is played, which rollouts and trainers branch on. A StrEnum, so it compares
    equal to and serialises as the plain string (`rlvr envs` prints it; a plugin's plain "multi-turn"
    is the same kind)."""

    SINGLE_STEP = "single-step"  # one prompt, one completion, one reward (`SingleTurnEnv`)
    MULTI_TURN = "multi-turn"  # the env replies to each model turn until done (`MultiTurnEnv`)
    AGENT = "agent"  # an agent program drives the calls (`envs.agent.env.AgentEnv`)


class EnvError(RlvrError):
    """Base class of rlvr's environment errors."""


class MissingEnvExtraError(EnvError, MissingExtraError):
    """An environment needs a package of an rlvr extra that is not installed (reasoning-gym for
    rlvr/ReasoningGym-v0, datasets for dataset=NAME): one line names the extra (`rlvr.errors.missing_extra`)."""


class TaskNotFoundError(EnvError, KeyError):
    """`options={"task_id": ...}` named a task this environment does not have."""


class StepAfterDoneError(EnvError, RuntimeError):
    """`step` was called after the episode ended, or before `reset`."""


class MessagesSpace(gym.Space[list]):
    """A chat transcript: a list of `{"role": str, "content": str}` dicts."""

    def __init__(self, seed: int | np.random.Generator | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in x
        )

    def sample(self, mask: Any = None, probability: Any = None) -> list[Message]:
        return [{"role": "user", "content": _random_text(self.np_random)}]

    def __repr__(self) -> str:
        return "MessagesSpace()"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, MessagesSpace)


class TextSpace(gym.Space[str]):
    """Any string of at most `max_length` characters: a model's completion."""

    def __init__(self, max_length: int = 1_000_000, seed: int | np.random.Generator | None = None):
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return _random_text(self.np_random)

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length


def _random_text(rng: np.random.Generator) -> str:
    alphabet = string.ascii_letters + string.digits + " +-*/=()."
    return "".join(rng.choice(list(alphabet), size=int(rng.integers(1, 40))))


@dataclass(frozen=True)
class Task:
    """One problem. `answer` is what the verifier checks against; `reference` is a known-good
    response (full marks) and `wrong` a known-bad but well-formed one (zero), for the checker."""

    task_id: str
    prompt: list[Message]
    answer: Any
    reference: str
    wrong: str
    metadata: dict[str, Any] = field(default_factory=dict)


class TextEnv(gym.Env[list, str]):
    """Base of every rlvr environment. Subclasses set `kind`, `version`, `reward_range` and
    implement `sample_task(rng)` and `get_task(task_id)` (the task source), and `task_ids()` when
    that source is a fixed list."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}
    kind: ClassVar[EnvKind] = EnvKind.SINGLE_STEP
    version: ClassVar[str] = "0"
    reward_range: tuple[float, float] = (0.0, 1.0)
    # A model turn cut at its max_tokens is `truncated` with reward 0 however it would grade (the
    # rollout sees the sampler's finish reason; the env never does). True lets an env's verdict
    # stand on cut text (set it on a subclass, or on `env.unwrapped` of one made env).
    grade_truncated: bool = False

    def __init__(self, render_mode: str | None = None):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self.observation_space = MessagesSpace()
        self.action_space = TextSpace()
        self._task: Task | None = None
        self._transcript: list[Message] = []
        self._done = True

    # ---- the task source -------------------------------------------------------------------
    def sample_task(self, rng: np.random.Generator) -> Task:
        raise NotImplementedError

    def get_task(self, task_id: str) -> Task:
        raise NotImplementedError

    def task_ids(self) -> Sequence[str] | None:
        """Every task's id, in order, when the tasks are a fixed list of problems (a dataset, a
        benchmark); None (the default) when they are generated or open-ended. An evaluation visits
        each listed task once, in this order (`rlvr eval`, `envs.eval_tasks`); training draws tasks
        with replacement either way (`sample_task`)."""
        return None

    # ---- the generator, seeded when first used (see reset) -------------------------------------
    _pending_seed: int | None = None

    def _seed_if_pending(self) -> None:
        if self._pending_seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(self._pending_seed)
            self._pending_seed = None

    @property
    def np_random(self) -> np.random.Generator:
        self._seed_if_pending()
        return gym.Env.np_random.fget(self)

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self._pending_seed = None
        gym.Env.np_random.fset(self, value)

    @property
    def np_random_seed(self) -> int:
        self._seed_if_pending()
        return gym.Env.np_random_seed.fget(self)

    @property
    def task(self) -> Task:
        if self._task is None:
            raise StepAfterDoneError("call reset() first")
        return self._task

    # ---- gymnasium API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=None)
        if seed is not None:
            if type(seed) is not int or seed < 0:
                seeding.np_random(seed)  # raises gymnasium's own error for a bad seed
            # `np_random` is made from the seed when first used (`_seed_if_pending`): the generator is exactly
            # the one a reset makes, but a group copy that never draws (most don't) skips the cost,
            # more than the rest of its reset.
            self._np_random, self._np_random_seed, self._pending_seed = None, None, seed
        options = options or {}
        task, task_id = options.get("task"), options.get("task_id")
        if task is not None:  # a group's copy: its first episode's task, shared (a Task is frozen)
            if not isinstance(task, Task):
                raise TypeError(f"options['task'] must be an rlvr.envs.Task, got {type(task).__name__}")
            self._task = task
        elif task_id is not None:
            self._task = self.get_task(str(task_id))
        else:
            self._task = self.sample_task(self.np_random)
        self._transcript = copy_messages(self._task.prompt)
        self._done = False
        self._on_reset()
        return copy_messages(self._task.prompt), self._info()

    def step(self, action: str):
        if self._done or self._task is None:
            raise StepAfterDoneError("the episode is over: call reset() before step()")
        if not isinstance(action, str):
            raise TypeError(f"action must be the model's text (str), got {type(action).__name__}")
        self._transcript.append({"role": "assistant", "content": action})
        reply, reward, terminated, truncated, verdict = self._step(action)
        self._done = terminated or truncated
        self._transcript.extend(copy_messages(reply))
        info = self._info()
        info["verdict"] = verdict
        return reply, float(reward), terminated, truncated, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m['role']}] {m['content']}" for m in self._transcript)

    # ---- for subclasses --------------------------------------------------------------------
    def _on_reset(self) -> None:
        """Reset per-episode state beyond the task (multi-turn envs)."""

    def _step(self, action: str) -> tuple[list[Message], float, bool, bool, Verdict]:
        raise NotImplementedError

    def _info(self) -> dict[str, Any]:
        return {"task_id": self.task.task_id, "env_version": self.version}

    @property
    def chat_tools(self) -> list[dict[str, Any]] | None:
        """Tools the chat template lists (its `tools=` argument, OpenAI function schemas) for the
        prompt and every reply of this env's episodes; None: rendered without tools (`ToolEnv`)."""
        return None

    # ---- for the checker -------------------------------------------------------------------
    def reference_action(self) -> str:
        """A known-good action for the current state (the task's reference solution)."""
        return self.task.reference

    def wrong_action(self) -> str:
        """A known-bad, well-formed action for the current state."""
        return self.task.wrong


class SingleTurnEnv(TextEnv):
    """A contextual bandit: one prompt, one completion, one reward; terminates after one step.
    Subclasses implement `verify(task, response) -> Verdict`."""

    kind: ClassVar[EnvKind] = EnvKind.SINGLE_STEP

    def verify(self, task: Task, response: str) -> Verdict:
        raise NotImplementedError

    def _step(self, action: str):
        verdict = self.verify(self.task, action)
        lo, hi = self.reward_range
        return [], lo + (hi - lo) * verdict.score, True, False, verdict


@dataclass(frozen=True)
class TurnResult:
    """What `MultiTurnEnv.respond` returns for one model turn.

    `reply`: the environment's next messages (e.g. a `user` hint or a `tool` output); ignored when
    the episode ends. `reward`: this turn's reward (an episode's return is the sum over turns).
    `done`: the episode ended on this turn (solved, given up, or an error). `verdict`: how this
    turn was judged; the final turn's verdict is the episode's outcome."""

    reply: list[Message]
    reward: float
    done: bool
    verdict: Verdict


class MultiTurnEnv(TextEnv):
    """Answers each model turn until done. Subclasses implement the task source and
    `respond(action) -> TurnResult`.

    `respond` receives the model's text for this turn (a `str`, already appended to the
    transcript). The current task is `self.task` (a `Task`: its `answer`, `metadata`, ...), and
    `self.turns` is this turn's number, counting from 1 (already incremented). Per-episode state
    beyond the task (a search interval, a tool-call count) is reset in `_on_reset`: override it
    and call `super()._on_reset()`, which zeroes `turns`; `reset` calls it after the task is set.

    `max_turns` bounds the model turns: if turn `max_turns` is not `done`, the episode is
    truncated there; the turn keeps its reward, its reply is dropped, and the verdict's outcome
    becomes `truncated` (unless it is `error`, which stays so that the episode is not trained on).
    Returning anything but a `TurnResult` (e.g. the old 4-tuple) is a `TypeError`."""

    kind: ClassVar[EnvKind] = EnvKind.MULTI_TURN

    def __init__(self, max_turns: int = 8, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.max_turns = max_turns
        self.turns = 0

    def _on_reset(self) -> None:
        self.turns = 0

    def respond(self, action: str) -> TurnResult:
        raise NotImplementedError

    def _step(self, action: str):
        self.turns += 1
        result = self.respond(action)
        if not isinstance(result, TurnResult):
            raise TypeError(
                f"{type(self).__name__}.respond must return envs.TurnResult(reply, reward, done, verdict), "
                f"got {type(result).__name__} (the 4-tuple form is no longer accepted)"
            )
        reply, reward, done, verdict = result.reply, result.reward, result.done, result.verdict
        truncated = not done and self.turns >= self.max_turns
        if truncated and verdict.outcome is not Outcome.ERROR:
            verdict = Verdict(verdict.score, Outcome.TRUNCATED, f"no end after {self.max_turns} turns", verdict.info)
        return ([] if done or truncated else reply), reward, done, truncated, verdict


class ProceduralTasks:
    """Mixin for generated task sources: a task is made from an integer seed, and its id is
    that seed, so any task can be rebuilt from its id alone. Implement `make_task(seed)`.

    `reset(seed=s)` gives task `s` (`make_task(s)`, id `str(s)`), the task `options={"task_id": str(s)}`
    selects; `reset()` without a seed draws the next task's seed from the env's seeded RNG."""

    _reset_seed: int | None = None

    def make_task(self, seed: int) -> Task:
        raise NotImplementedError

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._reset_seed = None if seed is None else int(seed)
        try:
            return super().reset(seed=seed, options=options)
        finally:
            self._reset_seed = None

    def sample_task(self, rng: np.random.Generator) -> Task:
        if self._reset_seed is not None:  # reset(seed=s): the task whose id is s
            return self.make_task(self._reset_seed)
        return self.make_task(int(rng.integers(0, SEED_SPACE)))

    def get_task(self, task_id: str) -> Task:
        try:
            seed = int(task_id)
        except ValueError:
            raise TaskNotFoundError(f"{type(self).__name__} task ids are integer seeds, got {task_id!r}") from None
        return self.make_task(seed)
