"""Asynchronous RL's sampling side: a thread that samples the rollouts of the next steps while the
trainer updates on the current one, with weights at most `max_staleness` updates old.

Pacing, not dropping: the rollout of step s starts only once the trainer has finished step s - K,
and weights only move forward. The K steps between make at most K updates (a step that trains on
nothing, every episode an error or every group filtered, makes none), so every token the trainer
updates on was sampled by weights at most K updates older: staleness <= K, counted in the updates
the sampler received (the policy version), not in steps. Slow tasks are not thrown away (which
would favour fast, often easy ones); the producer waits instead.

New weights reach the engine between its steps (`StagedWeights`): the trainer stages a copy, the
producer's sampler loads it before its next engine step, and tokens sampled from then on carry the
new version, so an episode in flight when its weights change records each token's version.

The producer is the only thread that drives the engine while it runs; `paused()` lends the engine
to the trainer (evaluation). An exception in the producer (an environment, the sampler) stops it and
is raised by `get` as a `ProducerError`; `close` stops it (Ctrl-C included) without orphans.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from rlvr.errors import RlvrError


class ProducerError(RlvrError, RuntimeError):
    """The rollout producer failed; the message names the step and the cause."""


class ProducerStopped(Exception):
    """Raised inside the producer's thread to end a rollout early when the run is closing."""


@dataclass
class _Staged:
    tensors: list[tuple[str, Any]]
    version: int


class StagedWeights:
    """Weights handed from the trainer's thread to whichever thread next drives the engine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._staged: _Staged | None = None

    def stage(self, named_tensors: Iterable[tuple[str, Any]], version: int) -> None:
        """Keep a copy of the weights (the trainer goes on changing its own) for the next load."""
        copy = [(name, t.detach().clone()) for name, t in named_tensors]
        with self._lock:
            self._staged = _Staged(copy, version)  # a newer version replaces one not yet loaded

    def take(self) -> _Staged | None:
        with self._lock:
            staged, self._staged = self._staged, None
        return staged


class RolloutProducer:
    """Runs `produce(step)` for steps `first_step .. last_step - 1` in a thread, each as soon as the
    trainer's progress allows (step - steps finished <= max_staleness), keeping the results for
    `get`. `version` (and `advance`'s) counts the trainer's finished steps."""

    def __init__(
        self, produce: Callable[[int], Any], first_step: int, last_step: int, max_staleness: int, version: int
    ):
        if max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0, got {max_staleness}")
        self._produce = produce
        self._steps = range(first_step, last_step)
        self.max_staleness = max_staleness
        self._cond = threading.Condition()
        self._version = version
        self._ready: dict[int, Any] = {}
        self._failed: tuple[int, BaseException] | None = None
        self._stopping = False
        self._paused = False
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="rlvr-rollout-producer", daemon=True)
        self._thread.start()

    def in_own_thread_and_stopping(self) -> bool:
        """True in the producer's thread once `close` was called: its rollout should end now."""
        return self._stopping and threading.current_thread() is self._thread

    def _run(self) -> None:
        for step in self._steps:
            with self._cond:
                self._cond.wait_for(
                    lambda step=step: (
                        self._stopping or (not self._paused and step - self._version <= self.max_staleness)
                    )
                )
                if self._stopping:
                    return
                self._busy = True
            try:
                result = self._produce(step)
            except BaseException as e:  # noqa: BLE001 - handed to the trainer's thread by `get`
                with self._cond:
                    self._busy = False
                    if not isinstance(e, ProducerStopped):
                        self._failed = (step, e)
                    self._cond.notify_all()
                return
            with self._cond:
                self._busy = False
                self._ready[step] = result
                self._cond.notify_all()

    def get(self, step: int) -> Any:
        """The rollout of `step`, waiting for it; `ProducerError` if the producer failed first."""
        with self._cond:
            self._cond.wait_for(lambda: step in self._ready or self._failed is not None or self._stopping)
            if step in self._ready:
                return self._ready.pop(step)
            if self._failed is not None:
                failed_step, error = self._failed
                raise ProducerError(
                    f"sampling the rollout of step {failed_step + 1} failed: {type(error).__name__}: {error}"
                ) from error
            raise ProducerError("the rollout producer was stopped")

    def advance(self, version: int) -> None:
        """The trainer has finished `version` steps (their weights, if any, staged for the sampler)."""
        with self._cond:
            self._version = version
            self._cond.notify_all()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Lend the engine to the caller: wait for the rollout in progress, start none meanwhile."""
        with self._cond:
            self._paused = True
            self._cond.wait_for(lambda: not self._busy)
        try:
            yield
        finally:
            with self._cond:
                self._paused = False
                self._cond.notify_all()

    def close(self, timeout: float = 60.0) -> None:
        """Stop the producer: a rollout in progress ends at its sampler's next engine step."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout)
