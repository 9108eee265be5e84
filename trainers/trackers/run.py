"""The run a tracker logs to, kept across `--resume`: its id (or name) is written once into `--out`
and read back by a resumed run, so the resumed steps continue the same tracker run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def run_id(id_file: Path, start_step: int, new: Callable[[], str]) -> str:
    """The id in `id_file` for a resumed run (`start_step` > 0); else a `new()` one, written there."""
    saved = id_file.read_text().strip() if start_step and id_file.is_file() else ""
    if saved:
        return saved
    fresh = new()
    id_file.write_text(fresh + "\n")
    return fresh
