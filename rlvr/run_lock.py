"""One `--out`, one run: an exclusive lock on the output directory for the life of a run.

Two runs writing one directory interleave their logs (every step twice in metrics.jsonl, episodes
twice in episodes.jsonl) and overwrite each other's checkpoints. So `rlvr train` and `rlvr eval`
hold `OUT/rlvr.lock` while they run; a second run on the same `--out` ends at once with one line
naming the holder (its pid, host and command).

The lock is `fcntl.flock` on that file, taken without waiting (atomic in the kernel), and the file
holds the holder's pid, host, command and start time for the message. The kernel drops a flock
when its process ends, however it ends (an error, Ctrl-C, SIGKILL), so a lock file left behind by
a dead process is simply taken over; the file is removed on a clean exit. Removing it is safe: a
taker checks, after locking, that the file it locked is still the one at the path (else it locked
a removed file and tries again). flock is per host: on a network file system shared by several
hosts, runs on different hosts are not excluded unless the file system forwards flock (NFSv4 does).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from rlvr.errors import RlvrError

LOCK_NAME = "rlvr.lock"


class LockError(RlvrError, OSError):
    """The lock file cannot be made (a read-only or full file system)."""


class OutInUse(RlvrError, RuntimeError):
    """Another live run holds the lock on this --out."""


def describe(holder: dict) -> str:
    """'pid 123 on host h (rlvr train, since 2026-01-01 12:00:00)' from a lock file's content."""
    since = holder.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    pid, host, command = (holder.get(k, "?") for k in ("pid", "host", "command"))
    return f"pid {pid} on host {host} ({command}, since {when})"


def _read(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 4096).decode("utf-8") or "{}")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino)


@contextlib.contextmanager
def run_lock(out: str | os.PathLike, command: str) -> Iterator[Path]:
    """Hold the lock on directory `out` (created if needed) for the block; `OutInUse` naming the
    holder if another process holds it. Yields the lock file's path."""
    path = Path(out) / LOCK_NAME
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise LockError(f"cannot create the lock file {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise OutInUse(
                f"--out {out} is in use by another run: {describe(holder)}; wait for it to end, or choose another --out"
            ) from None
        if _same_file(fd, path):
            break
        os.close(fd)  # we locked a file its holder removed as it ended: lock the one now at the path
    previous = _read(fd)
    if previous.get("pid") not in (None, os.getpid()):  # a run that ended without removing it (killed)
        print(f"note: took over the lock left by {describe(previous)}, which is no longer running", file=sys.stderr)
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "since": time.time()}
    with contextlib.suppress(OSError):  # a full disk: the lock holds all the same, only unnamed
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode("utf-8"), 0)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):  # remove it while still holding it: no one else owns it yet
            if _same_file(fd, path):
                path.unlink()
        os.close(fd)
