"""A run's control, apart from its steps: Ctrl-C (deferred while the weights change,
`trainers.interrupt`), the streaks that stop or warn (steps of errors alone, `trainers.outage`;
steps without signal, `trainers.zero_signal`), the time limit, and saving the last finished step
when the run fails, so that it resumes from there."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from rlvr.trainers import checkpoint as ckpt
from rlvr.trainers.interrupt import Aborted, InterruptGuard, TrainingInterrupted, interrupted_line
from rlvr.trainers.outage import ErrorStreak, NothingProduced
from rlvr.trainers.producer import ProducerError
from rlvr.trainers.weight_sync import WeightSyncError
from rlvr.trainers.zero_signal import SignalStreak


class Saves(Protocol):
    """What run control needs of a trainer: where it is, and how to save it."""

    step: int  # steps done
    version: int  # updates done
    saved_step: int  # the step of the last checkpoint (resumed from, or saved)
    out: Path

    def save(self) -> Path: ...


class RunControl:
    def __init__(self, max_error_steps: int, time_limit: float | None, resume: bool):
        self.interrupts = InterruptGuard()  # Ctrl-C waits while a step changes the weights
        self.time_limit, self.resume = time_limit, resume
        self.errors = ErrorStreak(max_error_steps)  # steps in a row whose every episode was an error
        self.flat = SignalStreak()  # steps in a row without reward variance: one warning per streak
        self.started = time.monotonic()

    def start(self) -> None:
        """The clock of the time limit starts (after the evaluation before training)."""
        self.started = time.monotonic()
        self.errors, self.flat = ErrorStreak(self.errors.limit), SignalStreak(self.flat.limit)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def out_of_time(self) -> bool:
        return self.time_limit is not None and self.elapsed() > self.time_limit

    def stop_line(self) -> str:
        return f"time limit of {self.time_limit:g} s reached"

    @contextlib.contextmanager
    def saving_on_failure(self, trainer: Saves) -> Iterator[None]:
        """When the producer failed, or the sampler was found not to hold the trained weights
        (before the step trained), first save the last finished step, to resume from."""
        try:
            yield
        except (ProducerError, WeightSyncError):
            if trainer.step and trainer.saved_step != trainer.step:
                trainer.save()
            raise

    def observe(self, trainer: Saves, episodes: Sequence[Any], zero_signal: bool, warn: Callable) -> None:
        """After a step: warn when an outage (steps of errors alone) ended or a streak without signal
        reached its limit; stop the run at `max_error_steps` steps of errors, first saving what was
        trained (the skipped steps changed nothing), so that it resumes once the cause is fixed."""
        try:
            warn(self.errors.observe(trainer.step, episodes))
        except NothingProduced:
            if trainer.version and trainer.saved_step != trainer.step:
                trainer.save()
            raise
        warn(self.flat.observe(trainer.step, zero_signal))

    def interrupted(self, trainer: Saves, exc: KeyboardInterrupt) -> TrainingInterrupted:
        """Ctrl-C: save the last finished step (unless a second Ctrl-C aborted a half-done one), and
        the line naming how to continue. A Ctrl-C during this save aborts it (the save is atomic)."""
        self.interrupts.release(raise_pending=False)  # a second Ctrl-C now interrupts the save
        aborted = isinstance(exc, Aborted)
        saved = None
        if not aborted and trainer.step and trainer.saved_step != trainer.step:
            saved = trainer.save()
        elif trainer.step or self.resume:
            saved = ckpt.latest_checkpoint(trainer.out)
        return TrainingInterrupted(interrupted_line(trainer.step, saved, aborted))
