"""Loading a user's environment from the command line: every way it can fail ends in one line.

An environment id may name a module to import (`my_module:mine/Env-v0`), and installed plugins
are imported on demand; their top-level code is the user's. So that none of it ends the command
silently:
- `sys.exit(N)` at import (a script turned module) raises SystemExit, which the registry's
  `except Exception` does not catch: here it becomes an `EnvLoadError` naming the id and the code;
- `os._exit(N)` at import would end the process at once (exit 0: "checked nothing, all fine"), so
  while the import runs `os._exit` raises `ExitAtImport` instead, which the registry reports as a
  module that failed to import. Only for the import (no process is forked then, and a fork's child
  must keep the real `os._exit`), restored after;
- an environment argument naming a missing file or a directory (`path=...`) raises OSError from
  the constructor: an `EnvLoadError` with the environment and its arguments.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from rlvr.errors import RlvrError


class EnvLoadError(RlvrError, RuntimeError):
    """The environment (its module, a plugin, or its constructor) could not be loaded."""


class ExitAtImport(Exception):
    """Raised in place of `os._exit` while an environment's module is imported."""


def add_env_options(parser: Any) -> None:
    """`--env ID` (required) and `--env-arg KEY=VALUE`: the environment of a command that makes one by id."""
    parser.add_argument("--env", required=True, metavar="ID", help="a registered id, e.g. rlvr/Arithmetic-v0")
    add_env_arg(parser)


def add_env_arg(parser: Any) -> None:
    """The `--env-arg KEY=VALUE` flag of a command that makes an environment (parsed by
    `rlvr.envs.parse_env_args`)."""
    parser.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a keyword argument for the environment (value read as YAML: 2 is an int); repeatable",
    )


@contextlib.contextmanager
def exits_refused(what: str) -> Iterator[None]:
    """Run the block (imports of user code) with `sys.exit` and `os._exit` made errors about `what`."""
    real_exit = os._exit

    def refuse(code: int) -> None:
        raise ExitAtImport(f"os._exit({code}) called while importing")

    os._exit = refuse
    try:
        yield
    except SystemExit as exc:
        raise EnvLoadError(
            f"{what}: importing its module (or a plugin) called sys.exit({exc.code!r}); a module "
            "must not exit when imported"
        ) from None
    finally:
        os._exit = real_exit


def resolve_env(env_id: str) -> None:
    """Import what `env_id` needs (its `module:` part, or the plugins) with exits refused; a bad id
    raises the registry's typed error (`UnknownEnvError`), one line."""
    from rlvr.envs.registry import resolve

    with exits_refused(f"environment {env_id!r}"):
        resolve(env_id)


def list_envs() -> list:
    """`envs.list_envs()`, every plugin imported with exits refused."""
    from rlvr import envs

    with exits_refused("an environment plugin"):
        return envs.list_envs()


def make_env(env_id: str, env_args: dict[str, Any]):
    """`envs.make(env_id, **env_args)` after `resolve_env`, a missing or unreadable file one line."""
    from rlvr import envs

    resolve_env(env_id)
    try:
        return envs.make(env_id, **env_args)
    except OSError as exc:  # e.g. path= a missing file (FileNotFoundError) or a directory (IsADirectoryError)
        raise EnvLoadError(
            f"environment {env_id} with {env_args}: {exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}"
        ) from None
