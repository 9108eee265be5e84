"""Experiment trackers (`--report-to`, as TRL names it): where a run's per-step metrics, its config
(once) and its sample tables go besides `metrics.jsonl` and `samples.jsonl`.

One module per tracker in this folder, each one class with one job: `tensorboard` (the default;
torch's SummaryWriter), `wandb` and `trackio` (optional packages). Each meets the `Tracker` protocol
below. Their names live in `names` (a leaf, so that `trainers.config` validates the setting without
loading torch or a tracker). Here: the check that the chosen trackers are installed, run before
anything loads (`trainers.preflight`), and opening them. A tracker that is not installed is one line
naming the package to install (`TrackerMissing`, exit 2), never a traceback mid-run; one that is
installed but fails to import (a broken install, a dependency of the wrong version) or to start its
run (wandb without a login) is one line too (`TrackerFailed`), naming the tracker, the library's own
error and what to do."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rlvr.errors import RlvrError, missing_extra
from rlvr.trainers.config import ConfigError
from rlvr.trainers.trackers.names import EXTRAS, PACKAGES, split


class Tracker(Protocol):
    """What a tracker does: log a run's config once, each step's numbers, and now and then a table
    (the sample completions). `start_step` > 0 (a resumed run) is given when the tracker opens: the
    steps after it are logged again, and a tracker that can drops what it held of them."""

    name: str

    def log_config(self, config: Mapping[str, Any]) -> None:
        """The run's settings (`TrainConfig.to_dict()`), once, at the start."""

    def log_metrics(self, step: int, metrics: Mapping[str, float], section: str) -> None:
        """Numbers of `step` under `section` (`train`, `eval`): `section/key`."""

    def log_table(self, step: int, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """A table of `step` (rows of plain values: str, int, float)."""

    def close(self) -> None:
        """Flush and release (a tracker's files complete on disk)."""


class TrackerMissing(ConfigError):
    """A tracker named by --report-to whose package is not installed."""


def check_installed(report_to: str) -> None:
    """Raise `TrackerMissing` for the first tracker of `report_to` whose package is absent.
    `find_spec` looks without importing (wandb's import alone takes seconds)."""
    for name in split(report_to):
        if importlib.util.find_spec(PACKAGES[name]) is None:
            raise TrackerMissing(missing_extra(f"--report-to {name}", EXTRAS[name], PACKAGES[name]))


class TrackerFailed(RlvrError):
    """A tracker named by --report-to that is installed but could not be imported or started."""


# What to try when a tracker's run does not start, by tracker (its import failing is the install's).
START_HINTS = {
    "wandb": "`wandb login` for the cloud, or WANDB_MODE=offline to keep the run on this machine",
    "trackio": "see trackio's own message",
    "tensorboard": "see tensorboard's own message",
}


def failed_line(name: str, step: str, exc: BaseException) -> str:
    """The one line of a tracker that failed at `step` ("import" or "start")."""
    package = PACKAGES[name]
    error = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    if step == "import":
        todo = f"reinstall it (`pip install --force-reinstall {package}`), or pass another --report-to"
        return f"--report-to {name}: {package} is installed but `import {package}` failed ({error}); {todo}"
    todo = f"{START_HINTS[name]}, or pass another --report-to"
    return f"--report-to {name}: {package} could not start its run ({error}); {todo}"


def open_trackers(report_to: str, out_dir: str | Path, start_step: int = 0, verbose: bool = False) -> list[Tracker]:
    """The trackers of `report_to`, opened, in its order (none for `none`); `TrackerFailed` when one
    cannot be imported or started (the library's traceback is the cause, for a debugger)."""
    check_installed(report_to)
    trackers: list[Tracker] = []
    try:
        for name in split(report_to):
            try:
                importlib.import_module(PACKAGES[name])
            except Exception as exc:
                raise TrackerFailed(failed_line(name, "import", exc)) from exc
            try:
                trackers.append(_open(name, out_dir, start_step, verbose))
            except Exception as exc:
                raise TrackerFailed(failed_line(name, "start", exc)) from exc
    except BaseException:  # one that fails to open: the others opened before it are closed, not leaked
        for tracker in trackers:
            tracker.close()
        raise
    return trackers


def _open(name: str, out_dir: str | Path, start_step: int, verbose: bool) -> Tracker:
    if name == "tensorboard":
        from rlvr.trainers.trackers.tensorboard import TensorBoardTracker

        return TensorBoardTracker(out_dir, start_step)
    if name == "wandb":
        from rlvr.trainers.trackers.wandb import WandbTracker

        return WandbTracker(out_dir, start_step, verbose)
    if name == "trackio":
        from rlvr.trainers.trackers.trackio import TrackioTracker

        return TrackioTracker(out_dir, start_step, verbose)
    raise ConfigError(f"unknown tracker {name!r}")  # names.problem refused it already
