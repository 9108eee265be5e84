"""What a tracker does: log a run's config once, each step's numbers, and now and then a table
(the sample completions). `start_step` > 0 (a resumed run) is given when the tracker opens: the
steps after it are logged again, and a tracker that can drops what it held of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class Tracker(Protocol):
    name: str

    def log_config(self, config: Mapping[str, Any]) -> None:
        """The run's settings (`TrainConfig.to_dict()`), once, at the start."""

    def log_metrics(self, step: int, metrics: Mapping[str, float], section: str) -> None:
        """Numbers of `step` under `section` (`train`, `eval`): `section/key`."""

    def log_table(self, step: int, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """A table of `step` (rows of plain values: str, int, float)."""

    def close(self) -> None:
        """Flush and release (a tracker's files complete on disk)."""
