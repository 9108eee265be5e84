"""Episodes as JSON lines, written as they come so that an interrupted run can resume.

Each line is one episode: `Episode.to_dict()` plus any readable extras the writer adds (e.g.
the prompt and completion as text). A run killed mid-write leaves at most a torn last line and
an incomplete last group; `load_complete_groups` drops both and rewrites the file without them
(atomically), so appending after it is safe.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from rlvr.envs.core import EnvError
from rlvr.envs.episode import Episode

_FIELDS = {f.name for f in dataclasses.fields(Episode)}


class EpisodeLogError(EnvError, ValueError):
    """A line in the middle of the log is not an episode (the file is not ours, or is damaged)."""


def episode_from_record(record: dict[str, Any]) -> Episode:
    return Episode.from_dict({k: v for k, v in record.items() if k in _FIELDS})


def _read(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """The complete lines' records, and whether a torn last line (no newline) was left out. A
    line is written with its newline in one call, so only the last one can lack it."""
    if not path.exists():
        return [], False
    complete, _, torn = path.read_text(encoding="utf-8").rpartition("\n")
    records = []
    for i, line in enumerate(complete.split("\n") if complete else []):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise EpisodeLogError(f"{path}:{i + 1} is not JSON") from None
        if not isinstance(record, dict) or not _FIELDS <= record.keys():
            raise EpisodeLogError(f"{path}:{i + 1} is not an episode record")
        records.append(record)
    return records, bool(torn)


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every complete line as a dict; a torn final line is ignored."""
    return _read(Path(path))[0]


def append_records(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> None:
    """Append records as lines and flush them to disk."""
    with open(path, "a", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def load_complete_groups(path: str | os.PathLike, group_size: int) -> list[dict[str, Any]]:
    """The records of every group with all `group_size` episodes; the file is rewritten to hold
    exactly those when it held anything else (a torn line, a partial group)."""
    path = Path(path)
    records, torn = _read(path)
    by_group: dict[int, int] = defaultdict(int)
    for r in records:
        by_group[int(r["group_id"])] += 1
    keep = [r for r in records if by_group[int(r["group_id"])] == group_size]
    if torn or len(keep) != len(records):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text("", encoding="utf-8")
        append_records(tmp, keep)
        os.replace(tmp, path)
    return keep
