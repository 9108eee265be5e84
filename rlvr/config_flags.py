"""Command-line flags generated from a settings dataclass (`TrainConfig`): its fields, their one-line
descriptions (`field.metadata["help"]`) and their defaults are written once, in the dataclass.

Each field becomes `--field-name`, read by its annotation:
  int, float, str          one value; `X | None` also takes `none`
  bool                     `--name` / `--no-name`
  tuple[float, float]      as many values as the tuple has
  dict[str, Any]           repeatable KEY=VALUE, the value read as YAML (like --env-arg)
  metadata["choices"]      shown in the usage, checked by the dataclass (as a YAML value is)

argparse keeps the raw strings, with SUPPRESS as the default, so a flag that is not given leaves
nothing in the namespace and cannot override a YAML file; --help shows the dataclass default in
its place. A command without a settings file (`rlvr eval`) passes `defaults=True`: a flag not given
then holds the dataclass default itself. `given_values` converts what was given (the raw strings
argparse kept) and raises `UsageError` (an RlvrError) on a bad value: one line on stderr and exit
code 2 from `rlvr.cli`, like every other bad setting, where argparse's own type errors would print
the usage too. `help_extra` adds a command's own sentence to a shared field's description."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

NONE_WORDS = ("none", "null")  # what an `X | None` flag takes for None (YAML's null too)


@dataclasses.dataclass(frozen=True)
class Flag:
    field: str
    options: tuple[str, ...]  # the option strings, `--field-name` last
    kind: str  # "value", "bool", "tuple" or "mapping"
    convert: tuple[Callable[[str], Any], ...] = ()  # per value: one, or one per tuple item
    optional: bool = False  # `X | None`: also takes "none"


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def flags_of(cls: type, aliases: Mapping[str, Sequence[str]] | None = None) -> list[Flag]:
    """One `Flag` per field of the dataclass `cls`; `aliases` adds older option strings (e.g.
    `--env-arg` for `env_args`). An annotation it cannot read is a TypeError: a new field needs
    a type the command line can give."""
    hints = typing.get_type_hints(cls)
    flags = []
    for f in dataclasses.fields(cls):
        options = (*(aliases or {}).get(f.name, ()), flag_name(f.name))
        kind, convert, optional = _read_type(f.name, hints[f.name])
        flags.append(Flag(f.name, options, kind, convert, optional))
    return flags


def add_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    aliases: Mapping[str, Sequence[str]] | None = None,
    *,
    defaults: bool = False,
    help_extra: Mapping[str, str] | None = None,
) -> None:
    """Add one option per field of `cls` to `parser`, each with its description and default.
    `defaults`: a flag not given holds the field's default (else nothing: SUPPRESS)."""
    values = {
        f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        for f in dataclasses.fields(cls)
    }
    metadata = {f.name: f.metadata for f in dataclasses.fields(cls)}
    for flag in flags_of(cls, aliases):
        text = metadata[flag.field].get("help")
        if not text:
            raise TypeError(f"{cls.__name__}.{flag.field} has no description (metadata 'help')")
        if (help_extra or {}).get(flag.field):
            text = f"{text}; {help_extra[flag.field]}"
        # argparse %-formats help texts: a literal % must be doubled
        help_text = f"{text} (default: {shown(values[flag.field])})".replace("%", "%%")
        default = argparse.SUPPRESS
        if defaults:  # a mapping's KEY=VALUE strings are appended to a list, read like given ones
            default = [] if flag.kind == "mapping" else values[flag.field]
        kwargs: dict[str, Any] = {"dest": flag.field, "default": default, "help": help_text}
        if flag.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif flag.kind == "mapping":
            kwargs.update(action="append", metavar="KEY=VALUE")
        elif flag.kind == "tuple":
            kwargs.update(nargs=len(flag.convert), metavar=tuple(c.__name__.upper() for c in flag.convert))
        elif "choices" in metadata[flag.field]:
            kwargs["metavar"] = "{" + ",".join(metadata[flag.field]["choices"]) + "}"
        parser.add_argument(*flag.options, **kwargs)


def given_values(args: argparse.Namespace, cls: type, aliases: Mapping[str, Sequence[str]] | None = None) -> dict:
    """{field: value} for the flags given on the command line only, converted to the field's type.
    (With `add_flags(defaults=True)`, a default left in the namespace is not raw text: skipped.)"""
    from rlvr.envs import parse_env_args  # KEY=VALUE with YAML values, as --env-arg always read them
    from rlvr.usage import UsageError

    present = vars(args)
    values: dict[str, Any] = {}
    for flag in flags_of(cls, aliases):
        if flag.field not in present or not _is_raw(flag, present[flag.field]):
            continue
        raw, name = present[flag.field], flag.options[-1]
        if flag.kind == "bool":
            values[flag.field] = raw
        elif flag.kind == "mapping":
            values[flag.field] = parse_env_args(raw)
        elif flag.kind == "tuple":
            values[flag.field] = tuple(
                _convert(name, convert, text, False, UsageError) for convert, text in zip(flag.convert, raw)
            )
        else:
            values[flag.field] = _convert(name, flag.convert[0], raw, flag.optional, UsageError)
    return values


def shown(value: Any) -> str:
    """A default as one would type it on the command line."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return " ".join(map(str, value))
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "none"
    return str(value)


TYPE_WORDS = {int: "an integer", float: "a number", str: "a string"}


def _is_raw(flag: Flag, value: Any) -> bool:
    """What argparse keeps for a given flag: a string, a list of them (tuple, KEY=VALUE), a bool."""
    if flag.kind == "bool":
        return isinstance(value, bool)
    if flag.kind in ("tuple", "mapping"):
        return isinstance(value, list)
    return isinstance(value, str)


def _convert(name: str, convert: Callable[[str], Any], text: str, optional: bool, error: type[Exception]) -> Any:
    if optional and text.strip().lower() in NONE_WORDS:
        return None
    try:
        return convert(text)
    except ValueError:
        expected = TYPE_WORDS.get(convert, convert.__name__) + (" or none" if optional else "")
        raise error(f"{name} must be {expected}, got {text!r}") from None


def _read_type(field: str, hint: Any) -> tuple[str, tuple[Callable[[str], Any], ...], bool]:
    """(kind, converters, optional) of an annotation."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    optional = False
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            hint, optional = rest[0], True
            origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is bool and not optional:
        return "bool", (), False
    if hint in (int, float, str):
        return "value", (hint,), optional
    if origin is tuple and not optional and args and all(a in (int, float, str) for a in args):  # not tuple[X, ...]
        return "tuple", tuple(args), False
    if origin is dict and not optional:
        return "mapping", (), False
    raise TypeError(f"setting {field}: no command-line flag for the type {hint!r}")
