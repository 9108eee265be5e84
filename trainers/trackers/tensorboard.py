"""TensorBoard (the default tracker): event files under `OUT/tensorboard`. Scalars `train/KEY` and
`eval/KEY`; the config as a text summary `config` (a YAML block); a table as a text summary (a
Markdown table, which TensorBoard's Text tab renders). A resumed run purges the events of the steps
after its checkpoint (`purge_step`), which it then logs again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml


class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, out_dir: str | Path, start_step: int = 0):
        from torch.utils.tensorboard import SummaryWriter

        self.start_step = start_step
        # purge_step hides TensorBoard events of steps after the checkpoint we resumed from
        purge = start_step + 1 if start_step else None
        self.writer = SummaryWriter(str(Path(out_dir) / "tensorboard"), purge_step=purge)

    def log_config(self, config: Mapping[str, Any]) -> None:
        text = yaml.safe_dump(dict(config), sort_keys=True)
        self.writer.add_text("config", "```yaml\n" + text + "```", self.start_step)

    def log_metrics(self, step: int, metrics: Mapping[str, float], section: str) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(f"{section}/{key}", value, step)
        if section != "train":  # an evaluation is rare and worth seeing at once
            self.writer.flush()

    def log_table(self, step: int, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.writer.add_text(name, markdown_table(columns, rows), step)

    def close(self) -> None:
        self.writer.close()


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table; a cell's `|` escaped and its line breaks as `<br>`, so a completion of
    several lines stays in its cell."""

    def cell(value: Any) -> str:
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        return text.replace("|", "\\|").replace("\r", "").replace("\n", "<br>")

    lines = ["| " + " | ".join(map(cell, columns)) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)
