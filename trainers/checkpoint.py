"""Checkpoints: a Hugging Face model directory (safetensors, loadable by `transformers` and vLLM)
plus `trainer_state.pt` (optimizer, scheduler, RNG states, step, value head), so `--resume`
continues exactly.

Crash safety: a checkpoint is written into `checkpoints/.tmp-step-N-PID`, every file is fsynced,
and only then is the directory renamed to `checkpoints/step-N` (a rename is atomic on POSIX).
A run killed at any moment leaves either the complete checkpoint or a `.tmp-*` directory, which
is ignored and removed at the next start. A write that fails (a full disk) removes its `.tmp-*`
directory itself and raises `CheckpointError`. Only the last `keep_last` checkpoints are kept; an
old one is renamed to `.tmp-*` before it is deleted, so that a stop in the middle of deleting it
never leaves a `step-N` directory that looks complete (its state file there) without its weights.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlvr.errors import RlvrError

STATE_FILE = "trainer_state.pt"
_NAME = re.compile(r"^step-(\d{8})$")


class CheckpointError(RlvrError, RuntimeError):
    """A checkpoint is missing or unreadable, or could not be written (disk full, read-only)."""


def checkpoint_dir(out_dir: str | Path) -> Path:
    return Path(out_dir) / "checkpoints"


def list_checkpoints(out_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints, oldest first."""
    root = checkpoint_dir(out_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _NAME.match(p.name)) and (p / STATE_FILE).is_file()]
    return sorted(found)


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    found = list_checkpoints(out_dir)
    return found[-1][1] if found else None


def remove_partial(out_dir: str | Path) -> list[Path]:
    """Remove the leftovers of a checkpoint write that was interrupted; returns what was removed."""
    root = checkpoint_dir(out_dir)
    stale = [p for p in root.iterdir() if p.name.startswith(".tmp-")] if root.is_dir() else []
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def resume_point(out_dir: str | Path) -> Path | None:
    """The checkpoint a resumed run continues from, once the partial ones a crash left are gone;
    None: nothing saved yet (the run starts fresh)."""
    remove_partial(out_dir)
    return latest_checkpoint(out_dir)


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch generator states, as plain types that `torch.load(weights_only=True)` accepts."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [kind, keys.tolist(), pos, has_gauss, gauss],
        "torch": torch.random.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(_tuples(state["python"]))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    torch.random.set_rng_state(state["torch"])


def _tuples(x: Any) -> Any:
    return tuple(_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x


def save_checkpoint(
    out_dir: str | Path,
    step: int,
    save_model: Callable[[Path], None],
    state: dict[str, Any],
    keep_last: int,
) -> Path:
    """Write checkpoint `step`: `save_model(dir)` writes the model files (e.g. `save_pretrained`),
    `state` goes to `trainer_state.pt`. Atomic (see the module docstring); prunes old ones.
    A write that fails for want of disk (full, read-only, quota) removes its temporary directory,
    leaves the previous checkpoints as they were and raises `CheckpointError`."""
    if keep_last < 1:
        raise ValueError(f"keep_last must be >= 1, got {keep_last}")
    root = checkpoint_dir(out_dir)
    final = root / f"step-{step:08d}"
    tmp = root / f".tmp-step-{step:08d}-{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        save_model(tmp)
        # Through a Python file: torch then reports a failed write as an opaque RuntimeError whose
        # context is the file's OSError (ENOSPC...), which `_os_error` finds; with a path it is not.
        with open(tmp / STATE_FILE, "wb") as f:
            torch.save({**state, "step": step}, f)
        _fsync_tree(tmp)
        _move_into_place(tmp, final)
        _fsync_dir(root)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        cause = _os_error(exc)
        if cause is None:  # not the disk: a bug or an interrupt, shown as it is
            raise
        previous = latest_checkpoint(out_dir)
        kept = f"the previous checkpoint {previous} is kept" if previous else "no earlier checkpoint exists"
        reason = os.strerror(cause.errno) if cause.errno else str(cause)
        raise CheckpointError(f"could not save checkpoint step {step} in {root}: {reason}; {kept}") from exc
    for _, path in list_checkpoints(out_dir)[:-keep_last]:
        doomed = path.with_name(f".tmp-pruned-{path.name}-{os.getpid()}")
        path.rename(doomed)  # atomic: gone as a checkpoint at once
        shutil.rmtree(doomed, ignore_errors=True)
    return final


def _move_into_place(tmp: Path, final: Path) -> None:
    if not final.exists():
        tmp.rename(final)
        return
    # Re-saving a step (after a resume): move the old one out of the way first, back if that fails.
    old = final.with_name(f".tmp-old-{final.name}-{os.getpid()}")
    final.rename(old)
    try:
        tmp.rename(final)
    except BaseException:
        old.rename(final)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _os_error(exc: BaseException | None) -> OSError | None:
    """The OSError behind a failed write: `exc` itself, one in its cause/context chain (torch wraps
    it in a RuntimeError), or the "(os error N)" that safetensors puts in its message."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError):
            return exc
        if m := re.search(r"\(os error (\d+)\)", str(exc)):
            return OSError(int(m.group(1)), os.strerror(int(m.group(1))))
        exc = exc.__cause__ or exc.__context__
    return None


def load_state(path: str | Path) -> dict[str, Any]:
    """`trainer_state.pt` of checkpoint directory `path`."""
    file = Path(path) / STATE_FILE
    if not file.is_file():
        raise CheckpointError(f"{path} is not a checkpoint: {STATE_FILE} is missing")
    try:
        return torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: say which
        raise CheckpointError(f"cannot read {file}: {type(exc).__name__}: {exc}") from exc


def _fsync_tree(path: Path) -> None:
    for dirpath, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
