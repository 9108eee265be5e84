"""What the commands share with `rlvr.cli` about errors, in a module of its own: `rlvr.cli` imports
every command (`rlvr.commands.*`), so a command that imported `rlvr.cli` back would close an import
circle. `UsageError`: a bad command-line argument; `one_line`: any error as the one line the CLI prints."""

from __future__ import annotations

from rlvr.errors import RlvrError


class UsageError(RlvrError, ValueError):
    """Bad command-line arguments, or an --out that holds another run."""


def one_line(exc: BaseException) -> str:
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return "; ".join(line.strip() for line in text.splitlines() if line.strip()) or type(exc).__name__
