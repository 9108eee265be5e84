"""An environment's tasks written to a Parquet file in another trainer's format (`rlvr export`).

`verl`: verl's RL data format (`verl.verl_record`), for `data.train_files` / `data.val_files`;
`trl`: the columns of `trl.trl_dataset` (`datasets.Dataset.from_parquet(FILE)` reads it back).
The file is checked before any task is made, and written whole or not at all: to a temporary file
beside it, renamed over it at the end, so that a failure midway leaves what was there before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.envs.adapters.rows import TaskRow, task_rows
from rlvr.envs.adapters.trl import trl_record
from rlvr.envs.adapters.verl import verl_record
from rlvr.envs.core import EnvError

FORMATS: dict[str, Callable[[TaskRow], dict[str, Any]]] = {"verl": verl_record, "trl": trl_record}


class ExportError(EnvError, ValueError):
    """An unknown format, or an output file that cannot be written."""


@dataclass(frozen=True)
class Exported:
    """What `export` wrote: `rows` tasks of `env_id` to `path`, in `format`."""

    path: Path
    format: str
    env_id: str
    rows: int


def check_out(out: str | os.PathLike) -> Path:
    """`out` names a .parquet file that can be written: not a directory, and under a folder that exists
    or can be made (its nearest existing ancestor a writable directory). Checked without writing."""
    path = Path(out).expanduser()
    if path.suffix != ".parquet":
        raise ExportError(f"--out {out} must name a .parquet file")
    if path.is_dir():
        raise ExportError(f"--out {out} is a directory, not a file")
    existing = next(p for p in path.absolute().parents if p.exists())
    if not existing.is_dir():
        raise ExportError(f"--out {out} is under {existing}, which is a file, not a directory")
    # access() reports a read-only file system (EROFS) also to root, whom permission bits don't stop
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ExportError(f"--out {out} cannot be written: {existing} is read-only")
    return path


def export(
    env_id: str,
    out: str | os.PathLike,
    format: str,
    tasks: int | None = None,
    env_args: Mapping[str, Any] | None = None,
    start: int = 0,
) -> Exported:
    """Write `tasks` tasks of `env_id` from `start` (`rows.task_rows`) to the Parquet file `out` in
    `format` ("verl" or "trl"). `ExportError` for a bad format or file, `AdapterError` for the tasks."""
    if format not in FORMATS:
        raise ExportError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    path = check_out(out)
    records = [FORMATS[format](row) for row in task_rows(env_id, tasks, env_args, start)]
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(records)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, temporary)
        os.replace(temporary, path)
    except OSError as exc:
        raise ExportError(
            f"could not write {out}: {exc.strerror or exc} ({getattr(exc, 'filename', None) or out}); nothing was "
            "written in its place"
        ) from None
    finally:
        temporary.unlink(missing_ok=True)
    return Exported(path, format, env_id, len(records))
