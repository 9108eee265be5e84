"""Episodes as JSON lines, written as they come so that an interrupted run can resume.

Each line is one episode: `Episode.to_dict()` plus any readable extras the writer adds (e.g.
the prompt and completion as text) and, from a run sampled in chunks, `"chunk": [start, stop]`.

Resuming is by whole chunks (`load_whole_chunks`). A run samples its tasks in chunks whose
bounds are fixed from the start (`chunk_bounds`: task 0 on, `size` tasks each, the last cut at
the run's task count), one sampler call per chunk, and writes a chunk's lines after the call. A
sampler's output for one task may depend on the other tasks in its call (a batched generator's
shared random stream, padding, float32 batch numerics: batched matmuls are not batch-invariant),
so a task is exactly reproducible only as part of the very same call. Hence a chunk's lines are
kept only when they are exactly what sampling it whole wrote: every group of the chunk, each with
all its episodes (an agent episode's later segments are lines of their own, not episodes), each
line carrying this chunk's bounds, and no `error` among them (a grader outage is no answer; its
chunk is sampled again). Anything else (a stop inside the chunk's write,
a torn last line, a chunk sampled with other bounds by a run with fewer tasks, an error) sends the
whole chunk back to be sampled again, with the same call the uninterrupted run makes. The
resumed run's episodes are then those of an uninterrupted run, on any hardware where a call is
itself deterministic; "each episode a function of its own seed, whatever the batching" would
hold only where batched numerics are batch-invariant, which CPUs and GPUs do not promise.

A run killed mid-write leaves at most a torn last line (each line is written with its newline in
one call, and `append_records` fsyncs); the file is rewritten atomically without the dropped
lines, so appending after it is safe.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rlvr.envs.core import EnvError
from rlvr.envs.episode import Episode
from rlvr.verifiers.verdict import Outcome

_FIELDS = {f.name for f in dataclasses.fields(Episode)}
CHUNK = "chunk"  # a line's extra field: [start, stop) of the chunk it was sampled in


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
    # Any string is written: a lone surrogate (text from outside, e.g. a file name in invalid UTF-8)
    # becomes its JSON escape, which reads back as the same string.
    with open(path, "a", encoding="utf-8", errors="backslashreplace") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def chunk_bounds(tasks: int, size: int) -> list[tuple[int, int]]:
    """[start, stop) of each chunk of a run of `tasks` tasks: fixed from task 0, `size` tasks each,
    the last one cut at `tasks`. Only `tasks` and `size` decide them, never what a log holds."""
    if tasks < 0 or size < 1:
        raise ValueError(f"need tasks >= 0 and size >= 1, got {tasks} and {size}")
    return [(start, min(start + size, tasks)) for start in range(0, tasks, size)]


def load_whole_chunks(
    path: str | os.PathLike, chunks: list[tuple[int, int]], group_size: int
) -> tuple[list[dict[str, Any]], list[tuple[int, int]]]:
    """(the records of every chunk in `chunks` that the log holds whole, the chunks to sample).
    Whole: see the module docstring. The lines of the other chunks in `chunks` (and a torn last
    line) leave the file, rewritten atomically when anything goes; lines of groups outside
    `chunks` (a run with more tasks wrote them) stay as they are, for a later run to judge."""
    path = Path(path)
    records, torn = _read(path)
    by_group: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_group[int(r["group_id"])].append(r)

    def whole(start: int, stop: int) -> bool:
        groups = [by_group.get(g, []) for g in range(start, stop)]
        return all(sum(_segment(r) == 0 for r in lines) == group_size for lines in groups) and all(
            r.get(CHUNK) == [start, stop] and r["outcome"] != Outcome.ERROR.value for lines in groups for r in lines
        )

    redo = [c for c in chunks if not whole(*c)]
    dropped = {g for start, stop in redo for g in range(start, stop)}
    keep = [r for r in records if int(r["group_id"]) not in dropped]
    if torn or len(keep) != len(records):
        _rewrite(path, keep)
    ours = {g for start, stop in chunks for g in range(start, stop)} - dropped
    return [r for r in keep if int(r["group_id"]) in ours], redo


def _segment(record: dict[str, Any]) -> int:
    """The line's `Episode.segment`: 0 for an episode's first (or only) training sequence."""
    return int((record.get("metadata") or {}).get("segment", 0))


def sort_by_group(path: str | os.PathLike) -> None:
    """Rewrite the log in group order (stable) when it is not: a chunk sampled again after later
    ones were kept (an error's, a cut-short last one's) then reads where the uninterrupted run
    wrote it."""
    path = Path(path)
    records, torn = _read(path)
    ordered = sorted(records, key=lambda r: int(r["group_id"]))
    if torn or ordered != records:
        _rewrite(path, ordered)


def _rewrite(path: Path, records: list[dict[str, Any]]) -> None:
    """`path` holding exactly `records`, replaced atomically: a stop leaves the old file or the new one."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("", encoding="utf-8")
    append_records(tmp, records)
    os.replace(tmp, path)
