"""Weights & Biases (`--report-to wandb`, `pip install wandb`). The run's files go under
`OUT/wandb`; `WANDB_MODE=offline` keeps everything on this machine (`wandb sync OUT/wandb/offline-run-*`
uploads it later), `WANDB_PROJECT` names the project (default `rlvr`). Metrics are `train/KEY` and
`eval/KEY` at the training step; the config is the run's config; a table is a `wandb.Table` logged
at its step. The run id is kept in `OUT/wandb-run-id`, so a resumed rlvr run continues the same
wandb run (`resume="allow"`); wandb keeps the first value it was given for a step, so the steps a
resume redoes keep the values logged before the stop (`metrics.jsonl` holds the redone ones)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.trainers.trackers.run import run_id

RUN_ID_FILE = "wandb-run-id"


class WandbTracker:
    name = "wandb"

    def __init__(self, out_dir: str | Path, start_step: int = 0, verbose: bool = False):
        import wandb

        self.wandb = wandb
        out = Path(out_dir)
        wandb_id = run_id(out / RUN_ID_FILE, start_step, lambda: uuid.uuid4().hex[:8])  # wandb's: 8 of [a-z0-9]
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or "rlvr",
            name=out.resolve().name,
            id=wandb_id,
            resume="allow",
            dir=str(out),
            # wandb's own banner lines only with --verbose; the console is rlvr's (issue 32)
            settings=wandb.Settings(silent=not verbose, console="off"),
        )

    def log_config(self, config: Mapping[str, Any]) -> None:
        self.run.config.update(dict(config), allow_val_change=True)

    def log_metrics(self, step: int, metrics: Mapping[str, float], section: str) -> None:
        self.run.log({f"{section}/{key}": value for key, value in metrics.items()}, step=step)

    def log_table(self, step: int, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        table = self.wandb.Table(columns=list(columns), data=[list(row) for row in rows])
        self.run.log({name: table}, step=step)

    def close(self) -> None:
        self.run.finish()
