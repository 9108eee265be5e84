"""Datasets the way users hold them: a Hugging Face `datasets` name, or a `datasets.Dataset` object.

`rlvr/MathDataset-v0` and `rlvr/CodeDataset-v0` take, instead of `path=` (a local file), `dataset=`:
- a name `datasets.load_dataset` takes (a hub id such as `openai/gsm8k`, or a local folder in a hub
  layout), with `config` (the hub's subset, e.g. `main`) and `split`; loaded with
  `datasets.load_dataset(name, config, split=split)`, so the hub cache and `HF_HUB_OFFLINE` work as
  users know them;
- a `datasets.Dataset` (one split already: `split` must be left out) or a `datasets.DatasetDict`
  (`split` picks one), passed from Python.
Without `split`, a name or a `DatasetDict` with a single split uses it; with several, `split` is
required (silently training on `train` when `test` was meant is the mistake this prevents).

Every failure is one typed line (`DatasetSourceError`): a name that cannot be loaded (offline, not on
the hub, a bad config: the loader's own reason follows), a split that does not exist (the splits that
do are named), a column that does not exist (the columns that do are named).

`datasets` is imported only here, and only when one of these is used: importing it costs seconds, and
most runs never need it. It never imports torch. It is the extra `datasets` (`pip install 'rlvr[datasets]'`), not
in the light core: without it, a `dataset=` is one line saying so (`MissingEnvExtraError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlvr.envs.core import EnvError, MissingEnvExtraError
from rlvr.errors import missing_extra


class DatasetSourceError(EnvError, ValueError):
    """A `dataset=` could not be loaded, has no such split, or lacks a column; the message names what exists."""


def _datasets():
    try:
        import datasets
    except ModuleNotFoundError as exc:  # its own extra, not in the light core (pyproject.toml)
        if exc.name != "datasets":
            raise  # installed, but one of its own imports is not
        raise MissingEnvExtraError(missing_extra("dataset=", "datasets", "datasets") + " (or pass path=)") from None
    return datasets


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _pick_split(splits: dict[str, Any], split: str | None, origin: str):
    """The split `split` names (or the only one), else a typed error naming the splits."""
    if split is None:
        if len(splits) == 1:
            return next(iter(splits.values()))
        raise DatasetSourceError(f"{origin} has splits {list(splits)}: pass split= to pick one")
    if split not in splits:
        raise DatasetSourceError(f"{origin}: no split {split!r}; splits are {list(splits)}")
    return splits[split]


def load_named(name: str, config: str | None, split: str | None):
    """`datasets.load_dataset(name, config, split=split)` as a `Dataset`, every failure one typed line."""
    datasets = _datasets()
    origin = f"dataset {name!r}" + (f" (config {config!r})" if config else "")
    try:
        loaded = datasets.load_dataset(name, config, split=split)
    except ValueError as exc:
        if split is None or "split" not in str(exc).lower():
            raise DatasetSourceError(f"{origin} cannot be loaded: {_first_line(exc)}") from None
        try:  # the loader's own message names the splits, but not in one stable form
            names = datasets.get_dataset_split_names(name, config)
        except Exception:
            raise DatasetSourceError(f"{origin}: no split {split!r} ({_first_line(exc)})") from None
        if split in names:  # the split exists: the loader failed for another reason
            raise DatasetSourceError(f"{origin} cannot be loaded: {_first_line(exc)}") from None
        raise DatasetSourceError(f"{origin}: no split {split!r}; splits are {names}") from None
    except Exception as exc:  # offline, not on the hub, unreadable files: whatever the loader raises
        raise DatasetSourceError(f"{origin} cannot be loaded: {_first_line(exc)}") from None
    if isinstance(loaded, datasets.DatasetDict):
        return _pick_split(dict(loaded), split, origin)
    return loaded


def resolve(dataset: Any, config: str | None, split: str | None) -> tuple[Any, str]:
    """(`datasets.Dataset`, a name for messages) from a name, a `Dataset` or a `DatasetDict`."""
    if isinstance(dataset, str):
        if not dataset.strip():
            raise DatasetSourceError("dataset= must name a dataset, got ''")
        where = dataset + (f" ({config})" if config else "") + (f"[{split}]" if split else "")
        return load_named(dataset, config, split), where
    datasets = _datasets()
    if config is not None:
        raise DatasetSourceError("config= applies to a dataset name; a Dataset object is loaded already")
    if isinstance(dataset, datasets.DatasetDict):
        return _pick_split(dict(dataset), split, "the DatasetDict"), f"DatasetDict[{split or next(iter(dataset))}]"
    if isinstance(dataset, datasets.Dataset):
        if split is not None:
            raise DatasetSourceError(
                f"split={split!r} picks from a DatasetDict or a named dataset; a Dataset is one split already"
            )
        return dataset, f"Dataset({dataset.split or 'no split'})"
    raise DatasetSourceError(
        f"dataset= must be a name, a datasets.Dataset or a datasets.DatasetDict, got {type(dataset).__name__}"
    )


def rows(dataset: Any, origin: str, columns: Sequence[str] | None = None, limit: int | None = None) -> list[dict]:
    """The first `limit` rows (all when None) as dicts, only `columns` when given (each must exist)."""
    if columns is not None:
        missing = [c for c in columns if c not in dataset.column_names]
        if missing:
            raise DatasetSourceError(f"{origin}: no column(s) {missing}; columns are {dataset.column_names}")
        dataset = dataset.select_columns(list(dict.fromkeys(columns)))
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    return dataset.to_list()
