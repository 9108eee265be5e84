"""What `rlvr eval` says about stopping and continuing (issue 43, item 3): the chunk size when none is
given, the line a rerun starts with (what it keeps), and the line a Ctrl-C ends with (what was kept,
how to continue). A stop keeps whole chunks only (`rlvr.envs.episode_log`): at the old default of 32
tasks a chunk, a stop in a 32-task evaluation kept nothing, and said nothing."""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.envs import eval_tasks


def default_chunk(tasks: int, out: Path) -> int:
    """--chunk when not given: the chunk of the run `out` holds (fixed for its life), else
    `envs.eval_tasks.default_chunk` (32 tasks, or a quarter of the tasks when that is fewer)."""
    run_file = out / "run.json"
    if run_file.exists():
        try:
            saved = json.loads(run_file.read_text()).get("chunk")
        except (OSError, ValueError, AttributeError):
            saved = None  # the run's own check reports an unreadable run.json
        if isinstance(saved, int) and saved >= 1:
            return saved
    return eval_tasks.default_chunk(tasks)


def resuming_line(kept: int, total: int, chunk: int, log: Path) -> str:
    """A rerun's first word on what it keeps."""
    if kept == total:
        return f"resuming: all {total} tasks kept from {log}"
    if kept:
        return f"resuming: {kept} of {total} tasks kept from {log}; sampling the other {total - kept}"
    return (
        f"resuming: none of the {total} tasks could be kept (no chunk of {chunk} tasks was written whole); "
        "sampling them all"
    )


def interrupted_line(kept: int, total: int, chunk: int, out: Path, out_given: bool) -> str:
    """Ctrl-C's last line: what is kept, and the command that continues."""
    again = "the same command" if out_given else f"the same command plus --out {out}"
    if kept:
        return f"interrupted: {kept} of {total} tasks kept in {out}; continue with {again}"
    return (
        f"interrupted: no task could be kept (a stop keeps whole chunks of {chunk} tasks, --chunk, and none "
        f"was finished); {again} starts again"
    )
