"""trainers/run_control.py: the time limit, saving the last finished step when a run fails, the
streak of error steps that stops a run, and the line an interrupted run ends with."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvr.envs.episode import Episode
from rlvr.trainers.interrupt import Aborted
from rlvr.trainers.outage import NothingProduced
from rlvr.trainers.producer import ProducerError
from rlvr.trainers.run_control import RunControl
from rlvr.verifiers.verdict import Outcome


class Run:
    """A run's position as run control sees it (the `Saves` protocol): saving records the step."""

    def __init__(self, out: Path, step: int, version: int, saved_step: int):
        self.out, self.step, self.version, self.saved_step = out, step, version, saved_step
        self.saves: list[int] = []

    def save(self) -> Path:
        self.saves.append(self.step)
        self.saved_step = self.step
        return self.out / f"step-{self.step}"


def error_episode() -> Episode:
    return Episode("e", "0", 0, [1], [2], [1], [0.0], [0.0], Outcome.ERROR, [], None, metadata={"error": "boom"})


def test_the_time_limit():
    assert not RunControl(5, None, False).out_of_time()
    control = RunControl(5, 0.0, False)
    control.start()
    assert control.out_of_time() and control.stop_line() == "time limit of 0 s reached"


def test_a_failed_step_saves_the_last_finished_one_once(tmp_path):
    control, run = RunControl(5, None, False), Run(tmp_path, step=3, version=3, saved_step=2)
    with pytest.raises(ProducerError), control.saving_on_failure(run):
        raise ProducerError("the producer failed")
    assert run.saves == [3]
    with pytest.raises(ProducerError), control.saving_on_failure(run):  # already saved: not again
        raise ProducerError("again")
    assert run.saves == [3]


def test_steps_of_errors_alone_stop_the_run_saving_what_was_trained(tmp_path):
    control, run, warnings = RunControl(2, None, False), Run(tmp_path, 1, 1, 0), []
    control.observe(run, [error_episode()], False, warnings.append)
    run.step = 2
    with pytest.raises(NothingProduced, match="for 2 steps in a row"):
        control.observe(run, [error_episode()], False, warnings.append)
    assert run.saves == [2] and warnings == [None, None]


def test_an_interrupt_saves_a_whole_step_and_never_a_half_done_one(tmp_path):
    run = Run(tmp_path, step=4, version=4, saved_step=2)
    line = str(RunControl(5, None, False).interrupted(run, KeyboardInterrupt()))
    assert run.saves == [4] and "interrupted at step 4: saved" in line and "--resume" in line
    run = Run(tmp_path, step=4, version=4, saved_step=2)
    line = str(RunControl(5, None, False).interrupted(run, Aborted()))
    assert run.saves == [] and line.startswith("aborted during step 5 (not saved)")
