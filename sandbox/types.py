"""Plain data crossing the sandbox boundary: limits in, result out; and what a sandbox must offer.

`Status.UNAVAILABLE` is the sandbox's own failure (the grader's: a verifier makes it `error`). A run
that took its container down (the runner died or stopped answering) in a fresh container too, while
a new container still runs a trivial program, is the program's doing: it ends `killed` (or
`timeout`) with `Result.killed_container` set, so that callers charge the program instead of
calling it an error of theirs.

`Limits.supervise`: the command is a supervisor (a test harness) that runs untrusted programs as a
second user, `PROGRAM_UID`, which cannot signal, stop, `prlimit` or trace it. The command runs as
the sandbox user (10001) holding only CAP_SETUID, CAP_SETGID and CAP_KILL; a process it forks to
run a program must switch to `PROGRAM_UID`/`PROGRAM_GID` and clear its capabilities
(`capset`: the kernel keeps them across a switch between two non-root users), then run in
`PROGRAM_DIR`, a directory of the program user's (the environment names all three:
`SANDBOX_PROGRAM_UID`, `SANDBOX_PROGRAM_GID`, `SANDBOX_PROGRAM_DIR`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

MAX_OUTPUT_BYTES = 16 << 20  # the most output one run may ask for (the runner holds it in memory)
PROGRAM_UID = PROGRAM_GID = 10002  # a supervised run's programs (also in runner_child.py)
PROGRAM_DIR = "/work/program"  # their working directory (also in runner_child.py)


class Status(StrEnum):
    OK = "ok"  # the program ran to its end (any exit code)
    TIMEOUT = "timeout"  # wall-clock limit hit; the whole process group was killed
    MEMORY = "memory"  # memory limit hit (OOM kill or MemoryError)
    OUTPUT_LIMIT = "output_limit"  # stdout+stderr exceeded the cap; the program was killed
    KILLED = "killed"  # killed by a signal for another reason (pids limit, its container died, ...)
    UNAVAILABLE = "unavailable"  # the sandbox itself could not run it (no Docker, engine died)


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 5.0
    memory_mb: int = 256
    output_bytes: int = 64 * 1024
    pids: int = 64
    supervise: bool = False  # the command runs programs as a second user it can always stop (above)

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.memory_mb <= 0 or self.output_bytes <= 0 or self.pids <= 0:
            raise ValueError(f"all limits must be positive: {self}")


@dataclass(frozen=True)
class Result:
    status: Status
    exit_code: int | None
    stdout: str
    stderr: str
    wall_time: float
    detail: str = ""  # why, for anything but a plain `ok`
    killed_container: bool = False  # the run took down every container it ran in (no output came back)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.exit_code == 0


@runtime_checkable
class Sandbox(Protocol):
    """What environments and verifiers use of a sandbox: `DockerSandbox` and `RaySandbox` are ones.
    `run` never raises for sandbox trouble: it gives `Status.UNAVAILABLE` with the reason."""

    def run(
        self,
        files: Mapping[str, str | bytes],
        command: Sequence[str],
        stdin: str | bytes = "",
        limits: Limits | None = None,
    ) -> Result: ...

    @property
    def closed(self) -> bool: ...

    def close(self) -> None: ...


def valid_text(text: str) -> str:
    """`text` as valid Unicode: every string that leaves the sandbox goes through here. A program
    names files, and the runner reports names as the file system has them: a name in invalid
    UTF-8 arrives as lone surrogates, which no UTF-8 writer (a JSONL log, a tokenizer) accepts.
    Those become visible escapes (`\\udcff`); any other text is returned as it is."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
