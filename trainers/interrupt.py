"""Ctrl-C keeps the work: the run saves its last finished step and says how to continue.

A checkpoint is the state after a whole step, never part of one. So Ctrl-C (SIGINT, a
`KeyboardInterrupt` in the main thread) is taken at once while the weights are as the last finished
step left them (sampling, scoring, the logprob forwards), and deferred while they change: from the
first optimizer step of a step until that step is logged and saved (`InterruptGuard.hold` ..
`release`), then raised. A second Ctrl-C while deferred aborts at once (`Aborted`): the step is
half-done, so nothing is saved and the last checkpoint stands. A Ctrl-C while the interrupt's own
checkpoint is written aborts it too; checkpoints are atomic (`trainers.checkpoint`), so the previous
one stands.

`TrainingInterrupted` carries the one line the CLI prints (exit 130). A terminal's Ctrl-C reaches
every process of its group, Ray's workers included: they ignore it (`ignore_in_worker`), the driver
ends them, so no worker prints a traceback.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path


class Aborted(KeyboardInterrupt):
    """A second Ctrl-C while a step's weights were changing: nothing may be saved."""


class TrainingInterrupted(KeyboardInterrupt):
    """The run was stopped by Ctrl-C; its message says what was saved and how to continue."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "interrupted"


def interrupted_line(step: int, saved: Path | None, aborted: bool) -> str:
    """The line that ends an interrupted run: the checkpoint to continue from, or that there is none."""
    when = f"interrupted at step {step}" if not aborted else f"aborted during step {step + 1} (not saved)"
    if saved is None:
        return f"{when}: no checkpoint yet; the same command starts again from the beginning"
    return f"{when}: saved {saved}; continue with the same command plus --resume"


class InterruptGuard:
    """Defers SIGINT between `hold()` and `release()` (main thread only, and only where SIGINT has
    Python's default handler: a caller that set its own keeps it)."""

    def __init__(self) -> None:
        self.pending = False
        self._previous = None

    @property
    def holding(self) -> bool:
        return self._previous is not None

    def hold(self) -> None:
        if self.holding or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return
        self._previous = signal.signal(signal.SIGINT, self._defer)

    def _defer(self, signum, frame) -> None:
        if self.pending:
            self.release(raise_pending=False)
            raise Aborted()
        self.pending = True

    def release(self, raise_pending: bool = True) -> None:
        """Stop deferring; raise the `KeyboardInterrupt` deferred meanwhile (if asked)."""
        if self.holding:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        if self.pending and raise_pending:
            self.pending = False
            raise KeyboardInterrupt()
        self.pending = False


def ignore_in_worker() -> None:
    """In a worker process (a Ray actor): ignore SIGINT; the driver decides, and ends the worker."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
