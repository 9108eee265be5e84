"""`RlvrError`: the root of every error rlvr raises on purpose, so that a caller catches them all
with one clause (`except RlvrError`) and the CLI turns each into one line. It sits at the top of the
namespace with no imports of rlvr's, so that every package (rlvr.sandbox, the lowest, included) may import it
without importing another package; each package derives its own bases from it."""

import importlib.util
from collections.abc import Mapping


class RlvrError(Exception):
    """Base class of every error rlvr raises on purpose (bad input, a missing component)."""


class MissingExtraError(RlvrError):
    """A command or an environment needs an optional extra of rlvr (pyproject's optional-dependencies) that is not
    installed: `pip install rlvr` is the light core (environments, verifiers, sandbox), `rlvr[train]` adds training.
    Its message is the one line `missing_extra` writes, naming the extra and the command that installs it."""


def missing_extra(what: str, extra: str, package: str) -> str:
    """The one line: `rlvr train needs the `train` extra (torch is not installed): pip install 'rlvr[train]'`."""
    return f"{what} needs the `{extra}` extra ({package} is not installed): pip install 'rlvr[{extra}]'"


def installed(module: str) -> bool:
    """Whether a top-level module can be imported, found without importing it (an import may take seconds)."""
    return importlib.util.find_spec(module) is not None


def require_extra(what: str, extra: str, modules: Mapping[str, str]) -> None:
    """Raise `MissingExtraError` naming the first of `modules` (import name -> its distribution) not `installed`."""
    for module, package in modules.items():
        if not installed(module):
            raise MissingExtraError(missing_extra(what, extra, package))
