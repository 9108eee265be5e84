"""The tracker names `--report-to` takes, and how a value is split. A leaf (imports nothing of
rlvr's, nor any tracker): `trainers.config` validates the setting with it."""

from __future__ import annotations

TRACKERS = ("tensorboard", "wandb", "trackio")
NONE = "none"  # no tracker: metrics.jsonl and samples.jsonl only
# The package each tracker imports, for the "not installed" line (`trackers.opening.check_installed`).
PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}
# The pyproject.toml extra that installs each (tests/trainers/trackers/test_trackers.py checks them against it).
EXTRAS = {"tensorboard": "train", "wandb": "wandb", "trackio": "trackio"}


def split(value: str) -> tuple[str, ...]:
    """The names of a comma-separated `report_to` value, stripped, in order, each once;
    `none` gives ()."""
    names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    return () if names == (NONE,) else names


def problem(value: object) -> str | None:
    """Why `value` is not a valid `report_to` setting, or None."""
    if not isinstance(value, str):
        return f"report_to must be a comma-separated string of {', '.join(TRACKERS)} or {NONE}, got {value!r}"
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    if not names:
        return f"report_to must name {', '.join(TRACKERS)} or {NONE}, got {value!r}"
    unknown = [n for n in names if n not in (*TRACKERS, NONE)]
    if unknown:
        return f"report_to: unknown tracker(s) {', '.join(unknown)}; known: {', '.join(TRACKERS)}, {NONE}"
    if NONE in names and len(set(names)) > 1:
        return f"report_to: {NONE} cannot be combined with a tracker, got {value!r}"
    return None
