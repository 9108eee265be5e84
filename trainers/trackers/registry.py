"""Which tracker class each `--report-to` name opens, the check that the chosen ones are installed
(before anything loads: `trainers.preflight`), and opening them. A tracker that is not installed
is one line naming the package to install (`TrackerMissing`, exit 2), never a traceback mid-run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rlvr.trainers.config import ConfigError
from rlvr.trainers.trackers.names import PACKAGES, split
from rlvr.trainers.trackers.protocol import Tracker


class TrackerMissing(ConfigError):
    """A tracker named by --report-to whose package is not installed."""


def check_installed(report_to: str) -> None:
    """Raise `TrackerMissing` for the first tracker of `report_to` whose package is absent.
    `find_spec` looks without importing (wandb's import alone takes seconds)."""
    for name in split(report_to):
        if importlib.util.find_spec(PACKAGES[name]) is None:
            raise TrackerMissing(f"--report-to {name} needs `pip install {PACKAGES[name]}`")


def open_trackers(report_to: str, out_dir: str | Path, start_step: int = 0, verbose: bool = False) -> list[Tracker]:
    """The trackers of `report_to`, opened, in its order (none for `none`)."""
    check_installed(report_to)
    trackers: list[Tracker] = []
    try:
        for name in split(report_to):
            trackers.append(_open(name, out_dir, start_step, verbose))
    except BaseException:  # one that fails to open: the others opened before it are closed, not leaked
        for tracker in trackers:
            tracker.close()
        raise
    return trackers


def _open(name: str, out_dir: str | Path, start_step: int, verbose: bool) -> Tracker:
    if name == "tensorboard":
        from rlvr.trainers.trackers.tensorboard_tracker import TensorBoardTracker

        return TensorBoardTracker(out_dir, start_step)
    if name == "wandb":
        from rlvr.trainers.trackers.wandb_tracker import WandbTracker

        return WandbTracker(out_dir, start_step, verbose)
    if name == "trackio":
        from rlvr.trainers.trackers.trackio_tracker import TrackioTracker

        return TrackioTracker(out_dir, start_step, verbose)
    raise ConfigError(f"unknown tracker {name!r}")  # names.problem refused it already
