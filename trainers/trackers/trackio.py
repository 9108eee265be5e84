"""Trackio (`--report-to trackio`, `pip install trackio`): Hugging Face's local-first tracker with
wandb's API. Runs go where trackio keeps them (`TRACKIO_DIR`, default `$HF_HOME/trackio`; `trackio
show` opens the dashboard), in project `TRACKIO_PROJECT` (default `rlvr`). Metrics are `train/KEY`
and `eval/KEY` at the training step; the config is given to `trackio.init`; a table is a
`trackio.Table`. The run's name is kept in `OUT/trackio-run`, so a resumed rlvr run continues the
same trackio run."""

from __future__ import annotations

import contextlib
import io
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.trainers.trackers.run import run_id

RUN_NAME_FILE = "trackio-run"


class TrackioTracker:
    name = "trackio"

    def __init__(self, out_dir: str | Path, start_step: int = 0, verbose: bool = False):
        import trackio

        self.trackio = trackio
        out = Path(out_dir)
        self.out, self.start_step, self.verbose = out, start_step, verbose
        self.run_name = run_id(out / RUN_NAME_FILE, start_step, lambda: f"{out.resolve().name}-{uuid.uuid4().hex[:6]}")
        self.run = None  # opened by log_config: trackio takes the config at init

    def _open(self, config: Mapping[str, Any] | None) -> None:
        with self._quiet():
            self.run = self.trackio.init(
                project=os.environ.get("TRACKIO_PROJECT") or "rlvr",
                name=self.run_name,
                config=dict(config) if config is not None else None,
                resume="allow" if self.start_step else "never",
                embed=False,
            )

    def _quiet(self):
        """trackio prints its banner (where the run goes, how to see it) on stdout: only with --verbose,
        stdout being the summary's (issue 32: a run prints its own lines)."""
        return contextlib.nullcontext() if self.verbose else contextlib.redirect_stdout(io.StringIO())

    def log_config(self, config: Mapping[str, Any]) -> None:
        if self.run is None:
            self._open(config)

    def log_metrics(self, step: int, metrics: Mapping[str, float], section: str) -> None:
        if self.run is None:
            self._open(None)
        self.run.log({f"{section}/{key}": value for key, value in metrics.items()}, step=step)

    def log_table(self, step: int, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        if self.run is None:
            self._open(None)
        table = self.trackio.Table(columns=list(columns), data=[list(row) for row in rows])
        self.run.log({name: table}, step=step)

    def close(self) -> None:
        if self.run is not None:
            with self._quiet():
                self.trackio.finish()
