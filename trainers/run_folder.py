"""A training run's folder where a model is taken (`rlvr eval --model runs/demo`, `rlvr train --model`
or `--teacher`, the Python API): the model is its last complete checkpoint. The natural next command
after `rlvr train --out runs/demo` is `rlvr eval --model runs/demo`; a run folder has no config.json
of its own, and refusing it for that sent users looking for `checkpoints/step-NNNNNNNN` by hand.

A folder is a run when it has a `checkpoints/` folder (`trainers.checkpoint`). One whose every
checkpoint is incomplete (a run stopped during its first save) is a `RunFolderError`, not a model."""

from __future__ import annotations

import os
from pathlib import Path

from rlvr.errors import RlvrError


class RunFolderError(RlvrError, ValueError):
    """A training run's folder that holds no complete checkpoint yet."""


def run_checkpoint(model: str | os.PathLike) -> Path | None:
    """The last complete checkpoint of the run in folder `model`; None when `model` is no run folder
    (a model directory, a name such as 'tiny', a served model's name)."""
    from rlvr.trainers import checkpoint

    path = Path(model).expanduser()
    if not checkpoint.checkpoint_dir(path).is_dir() or (path / "config.json").is_file():
        return None
    latest = checkpoint.latest_checkpoint(path)
    if latest is None:
        raise RunFolderError(
            f"{model} is a training run's folder with no complete checkpoint yet (a run saves every "
            "--save-every steps and at its end): pass a model directory, or train first"
        )
    return latest


def resolved(model: str | None, flag: str) -> tuple[str | None, str | None]:
    """(the model to load, the line saying so): a run folder becomes its last checkpoint, named in
    one line; anything else is returned as it is, with no line."""
    if model is None:
        return None, None
    latest = run_checkpoint(model)
    if latest is None:
        return model, None
    return str(latest), f"{flag} {model}: a training run; its last complete checkpoint, {latest}"
