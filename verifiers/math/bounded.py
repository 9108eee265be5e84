"""A small pool of worker processes that gives a hard wall-clock bound to each call.

Threads cannot bound SymPy: one big-integer operation holds the GIL in C. So the work runs in
worker processes, and a worker that misses its deadline is killed and replaced. Workers are fresh
interpreters (`python -c ...` running `_worker_main`, spawn semantics, never fork: callers may hold
threads, torch or vLLM state) started with subprocess rather than multiprocessing, because
multiprocessing's spawn and forkserver re-run the caller's `__main__` in every worker, which breaks
any script without an `if __name__ == "__main__"` guard; subprocess also works from daemonic
processes (DataLoader workers), where multiprocessing refuses to start children.
Jobs travel as pickles over a socket pair (`multiprocessing.connection.Connection`).

Many threads may call `run` at once; each takes an idle worker for one job, and the deadline covers
waiting for a worker too. Start-up (an interpreter importing SymPy, about a second) is not counted
against the deadline while the pool has never been ready: `warm_up()` pays it up front.
Workers get an address-space limit, so a memory blow-up kills the worker, not the caller.
A job that runs past its deadline raises `JobTimeout` with how long it ran; a deadline that
passes while waiting for a worker raises plain `PoolTimeout`: a caller can tell a slow job (the
input's doing) from a busy pool (the grader's).
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from rlvr.errors import RlvrError


# Under the root: `warm_up()` (the public facade's) raises it; not a VerifierError (misuse, which `compose` re-raises).
class PoolError(RlvrError, RuntimeError):
    """The pool could not run the job (deadline missed, worker died, workers cannot start)."""


class PoolTimeout(PoolError):
    """The deadline passed before the job finished (or before a worker was free)."""


class JobTimeout(PoolTimeout):
    """The job itself ran past the deadline (its worker was killed); `ran_s` is how long it ran,
    so a caller can tell a slow job from one that spent its time waiting for a worker."""

    def __init__(self, message: str, ran_s: float):
        super().__init__(message)
        self.ran_s = ran_s


@dataclass
class _Worker:
    process: subprocess.Popen
    conn: Connection


def _worker_main(fd: int, memory_mb: int) -> None:
    """Worker loop: an init message, then (func, args) -> ("ok", result) | ("exc", text). Exits on EOF."""
    if memory_mb:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
    conn = Connection(fd)
    try:
        init = conn.recv()
        if init is not None:
            init[0](*init[1])
        conn.send(("ready", os.getpid()))
    except (EOFError, OSError):
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the parent went away
        if message is None:
            return
        func, args = message
        try:
            reply = ("ok", func(*args))
        except BaseException as exc:  # noqa: BLE001 - reported to the caller, the worker lives on
            reply = ("exc", f"{type(exc).__name__}: {exc}"[:300])
        try:
            conn.send(reply)
        except (OSError, ValueError, pickle.PicklingError):
            return


_WORKER_CMD = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "  # Ctrl-C: the parent stops the workers
    "from rlvr.verifiers.math.bounded import _worker_main; _worker_main(int(sys.argv[1]), int(sys.argv[2]))"
)


def _pythonpath() -> str:
    """The directory holding the `verifiers` package first, so the worker imports this same copy."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    extra = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join([here, extra]) if extra else here


class WorkerPool:
    """`size` worker processes; `run(func, args, timeout)` returns func(*args) or raises PoolError.

    `func` must be a module-level function (it is pickled by name) and its result picklable."""

    def __init__(
        self,
        size: int = 2,
        *,
        memory_mb: int | None = 2048,
        init: tuple[Callable, tuple] | None = None,
        startup_timeout_s: float = 60.0,
    ):
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.size = size
        self.pid = os.getpid()
        self._env = {**os.environ, "PYTHONPATH": _pythonpath()}
        self._memory_mb = memory_mb
        self._init = init
        self._startup_timeout_s = startup_timeout_s
        self._cond = threading.Condition()
        self._all: list[_Worker] = []
        self._idle: list[_Worker] = []
        self._starting: list[_Worker] = []
        self._reaping: list[Any] = []
        self._busy = 0
        self._failed_starts = 0
        self._ever_ready = False
        self.closed = False
        with self._cond:
            for _ in range(size):
                self._spawn()

    # -- lifecycle (callers hold self._cond)
    def _spawn(self) -> None:
        parent, child = socket.socketpair()
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CMD, str(child.fileno()), str(self._memory_mb or 0)],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                env=self._env,
                close_fds=True,
            )
        except OSError:  # no usable interpreter here: callers get PoolError("fail to start")
            parent.close()
            self._failed_starts += 1
            return
        finally:
            child.close()
        worker = _Worker(process, Connection(parent.detach()))
        self._starting.append(worker)
        self._all.append(worker)
        try:
            worker.conn.send(self._init)
        except OSError:  # died at once: _promote sees EOF and counts a failed start
            pass

    def _promote(self) -> None:
        """Move started workers that said "ready" to the idle list; replace ones that died."""
        for w in list(self._starting):
            try:
                if not w.conn.poll(0):
                    continue
                kind, _ = w.conn.recv()
                if kind != "ready":
                    raise EOFError(kind)
            except (EOFError, OSError):
                self._starting.remove(w)
                self._discard(w)
                self._failed_starts += 1
                continue
            self._starting.remove(w)
            self._idle.append(w)
            self._ever_ready = True
            self._failed_starts = 0
        while len(self._all) < self.size and self._failed_starts <= 3 * self.size and not self.closed:
            self._spawn()  # top up after failed starts
        self._reaping = [p for p in self._reaping if p.poll() is None]  # poll() reaps the dead

    def _discard(self, w: _Worker) -> None:
        if w in self._all:
            self._all.remove(w)
        w.process.kill()
        w.conn.close()
        self._reaping.append(w.process)

    # -- running jobs
    def run(self, func: Callable, args: tuple, timeout: float) -> Any:
        start = time.monotonic()
        deadline = start + timeout
        with self._cond:
            cold = not self._ever_ready
        worker = self._acquire(start + self._startup_timeout_s if cold else deadline)
        if cold:  # first use: the start-up wait does not count against this call's bound
            deadline = max(deadline, time.monotonic() + timeout)
        try:
            sent = time.monotonic()
            worker.conn.send((func, args))
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not worker.conn.poll(remaining):
                ran_s = time.monotonic() - sent  # before the replacement's start-up, which is the pool's time
                self._replace(worker)
                raise JobTimeout(f"no result within {timeout:.2f} s; worker killed and replaced", ran_s)
            kind, value = worker.conn.recv()
        except (EOFError, OSError) as exc:
            self._replace(worker)
            raise PoolError(f"worker died ({type(exc).__name__}); replaced") from None
        self._release(worker)
        if kind == "exc":
            raise PoolError(f"job raised {value}")
        return value

    def _acquire(self, deadline: float) -> _Worker:
        with self._cond:
            while True:
                if self.closed:
                    raise PoolError("pool is closed")
                if os.getpid() != self.pid:
                    raise PoolError("pool used from a forked child; create a new pool there")
                self._promote()
                if self._idle:
                    self._busy += 1
                    return self._idle.pop()
                if not self._starting and self._busy == 0:
                    raise PoolError("worker processes fail to start")
                now = time.monotonic()
                if now >= deadline:
                    raise PoolTimeout("no worker became free before the deadline")
                # Starting workers signal readiness through their pipe, not the condition: poll.
                self._cond.wait(min(deadline - now, 0.005) if self._starting else deadline - now)

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            self._busy -= 1
            if self.closed:
                self._discard(worker)
            else:
                self._idle.append(worker)
            self._cond.notify()

    def _replace(self, worker: _Worker) -> None:
        with self._cond:
            self._busy -= 1
            self._discard(worker)
            if not self.closed:
                self._spawn()
            self._cond.notify_all()

    def warm_up(self, timeout: float | None = None) -> None:
        """Block until every worker is started and ready (start-up cost paid here)."""
        deadline = time.monotonic() + (self._startup_timeout_s if timeout is None else timeout)
        with self._cond:
            while True:
                self._promote()
                if not self._starting:
                    if not self._idle and not self._busy:
                        raise PoolError("worker processes fail to start")
                    return
                now = time.monotonic()
                if now >= deadline:
                    raise PoolTimeout("workers not ready before the deadline")
                self._cond.wait(min(deadline - now, 0.01))

    def close(self) -> None:
        """Stop every worker (idle ones politely, busy ones by kill). Idempotent."""
        with self._cond:
            if self.closed:
                return
            self.closed = True
            idle, workers = list(self._idle), list(self._all)
            self._idle, self._starting, self._all = [], [], []
            for w in idle:
                try:
                    w.conn.send(None)
                except (OSError, ValueError):
                    pass
            self._cond.notify_all()
        for w in workers:
            try:
                w.process.wait(0.5)
            except subprocess.TimeoutExpired:
                w.process.kill()
                try:
                    w.process.wait(5)
                except subprocess.TimeoutExpired:  # a loaded machine: the kill lands later
                    pass
            w.conn.close()
        for p in self._reaping:
            try:
                p.wait(0.5)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
