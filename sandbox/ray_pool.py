"""`RaySandbox`: warm sandbox pools in Ray actors, used like one `DockerSandbox`.

Each worker is a Ray actor (`SandboxWorker`) holding one `DockerSandbox(pool_size)` in its own
process, threaded so that it runs as many programs at once as it has warm containers. The driver
side (`RaySandbox`) has `DockerSandbox.run`'s contract: it hands each run to the worker with the
fewest runs in flight and returns its `Result`; sandbox trouble is `Status.UNAVAILABLE` with the
reason, never an exception, so a verifier reports a failure, never a wrong answer. Bad input
raises the same typed errors as `DockerSandbox.run`.

Why: verification is CPU work. Workers placed on other machines (or a node's spare cores) verify
for every process that holds the pool, e.g. Ray rollout workers whose environments call
`sandbox.shared_sandbox()` after `sandbox.use_shared_sandbox(pool)`.

Faults: a worker that dies (its process killed, its node lost: Ray's `RayActorError`) is replaced
by a new one in its slot, and the run it held is run again, on whichever worker is least busy
then: nothing is lost and nothing counted twice (a dead worker returns nothing). A run whose
workers die more than `max_replacements` times gives `Status.UNAVAILABLE`. The dead worker is
replaced either way, so the pool keeps its size. The dead worker's containers go with it (their
runners exit when their owner's connection closes).

Copies: a `RaySandbox` pickles (it travels in a Ray actor's or task's arguments); the copy holds
the same actor handles and runs on the same workers, but keeps its own bookkeeping: its own
in-flight and run counters, and its own list of workers, so a worker the copy replaces is in the
copy's list only (the original replaces it again when it finds it dead). Each object owns the
workers it started: `close()` (or the object's collection, or exit) kills those, so closing the
original ends its workers for every copy; a copy's `close()` ends only its replacements.

Ray is imported only by this module, and only when a `RaySandbox` is made or unpickled.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import SandboxError
from .types import Limits, Result, Status

if TYPE_CHECKING:
    from .container import Settings


class RayPoolError(SandboxError):
    """Ray is not installed or not initialized, or the pool's workers could not start."""


@dataclass(frozen=True)
class WorkerSpec:
    """What each worker's `DockerSandbox` is made with (replacements get the same)."""

    pool_size: int = 4
    image: str | None = None
    limits: Limits | None = None
    settings: Settings | None = None


class SandboxWorker:
    """The actor: one `DockerSandbox` in the worker's own process (its containers created on first
    use). Started threaded, `max_concurrency` = `pool_size`: one thread per warm container."""

    def __init__(self, spec: WorkerSpec):
        from .docker_sandbox import DockerSandbox

        self.sandbox = DockerSandbox(spec.image, spec.pool_size, limits=spec.limits, settings=spec.settings)

    def run(
        self,
        files: Mapping[str, str | bytes],
        command: Sequence[str],
        stdin: str | bytes = "",
        limits: Limits | None = None,
    ) -> Result:
        return self.sandbox.run(files, command, stdin, limits)

    def pid(self) -> int:
        return os.getpid()


class RaySandbox:
    """`workers` sandbox actors on the Ray cluster this process has joined, each with `pool_size`
    warm containers. Thread-safe; picklable (see the module's docstring for what a copy shares)."""

    def __init__(
        self,
        workers: int,
        *,
        pool_size: int = 4,
        max_replacements: int = 3,
        image: str | None = None,
        limits: Limits | None = None,
        settings: Settings | None = None,
    ):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, got {pool_size}")
        if max_replacements < 0:
            raise ValueError(f"max_replacements must be >= 0, got {max_replacements}")
        ray = _ray()
        self._setup(ray, WorkerSpec(pool_size, image, limits, settings), max_replacements, None, workers)
        from ray.exceptions import RayActorError

        try:
            ray.get([w.pid.remote() for w in self.workers])  # started now, or the start-up error now
        except RayActorError as exc:
            self.close()
            raise RayPoolError(f"a sandbox worker could not start: {exc}") from None

    def _setup(self, ray: Any, spec: WorkerSpec, max_replacements: int, handles: list | None, count: int) -> None:
        """The state of a new pool (`handles` None: start `count` workers) or of a copy (`handles`)."""
        self._ray = ray
        self.spec = spec
        self.max_replacements = max_replacements  # deaths during one run before it is `unavailable`
        self.replaced = 0  # workers this object replaced after they died
        # num_cpus=0: a worker holds no CPU reservation, so N workers start on any cluster, even one
        # smaller than N; the containers' CPU time is Docker's to share, not Ray's.
        self._actor = ray.remote(num_cpus=0, max_restarts=0, max_concurrency=spec.pool_size)(SandboxWorker)
        self._lock = threading.Lock()
        self._started: list = []  # the workers this object started: the finalizer ends whoever is in it then
        self._finalizer = weakref.finalize(self, kill_actors, ray, self._started)
        self.workers = list(handles) if handles is not None else [self._start() for _ in range(count)]
        self._in_flight = [0] * len(self.workers)
        self._runs = [0] * len(self.workers)  # per slot: a replacement carries on its predecessor's count

    # ---- DockerSandbox's interface ---------------------------------------------------------------
    def run(
        self,
        files: Mapping[str, str | bytes],
        command: Sequence[str],
        stdin: str | bytes = "",
        limits: Limits | None = None,
    ) -> Result:
        """Run `command` with `files` on the least busy worker (`DockerSandbox.run`'s contract).
        A worker dying under the run is replaced and the run done again elsewhere."""
        from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError

        start = time.monotonic()
        deaths = 0
        while True:
            if self.closed:
                return _unavailable("the Ray sandbox pool is closed", start)
            if not self._ray.is_initialized():
                return _unavailable("Ray is not running in this process (shut down?)", start)
            slot, worker, ahead = self._acquire()
            wait_s = self._wait_s(limits, ahead)
            done = False
            try:
                result = self._ray.get(worker.run.remote(files, command, stdin, limits), timeout=wait_s)
                done = True
                return result
            except RayActorError as exc:
                deaths += 1
                self._replace(slot, worker)
                if deaths > self.max_replacements:
                    return _unavailable(
                        f"the sandbox worker died under this run (deaths: {deaths}, "
                        f"max_replacements: {self.max_replacements}): {exc}",
                        start,
                    )
            except GetTimeoutError:  # the worker hangs without dying: no answer, not a wrong one
                return _unavailable(f"the sandbox worker did not answer within {wait_s:.0f} s", start)
            except RayTaskError as exc:  # DockerSandbox.run raised: bad input, the caller's typed error
                cause = getattr(exc, "cause", None)
                raise (cause if isinstance(cause, Exception) else exc) from None
            except RayError as exc:  # Ray itself failed (object lost, system error): not the program's doing
                return _unavailable(f"the Ray sandbox pool failed: {type(exc).__name__}: {exc}", start)
            finally:
                self._release(slot, done)

    def close(self) -> None:
        """Kill the workers this object started (a copy: only its replacements)."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __enter__(self) -> RaySandbox:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __reduce__(self):
        with self._lock:
            handles = list(self.workers)
        return _copy, (self.spec, self.max_replacements, handles)

    # ---- counters, for tests and benchmarks ------------------------------------------------------
    def runs_per_worker(self) -> list[int]:
        """Runs completed by each worker slot through this object (a replacement continues its slot)."""
        with self._lock:
            return list(self._runs)

    def in_flight(self) -> list[int]:
        """Runs each worker slot holds now, from this object."""
        with self._lock:
            return list(self._in_flight)

    def worker_pids(self) -> list[int]:
        """Each worker's process id (asks every worker; raises Ray's error for a dead one)."""
        with self._lock:
            handles = list(self.workers)
        return self._ray.get([w.pid.remote() for w in handles])

    # ---- internals -------------------------------------------------------------------------------
    def _wait_s(self, limits: Limits | None, ahead: int) -> float:
        """How long a run may take on its worker: its time limit and the sandbox's own grace for
        setup and clean-up, once for itself and once for each wave of the `ahead` runs queued
        before it on the worker's containers, and a margin for the trip."""
        from .docker_sandbox import REPLY_GRACE_S

        timeout_s = (limits or self.spec.limits or Limits()).timeout_s
        waves = 1 + ahead // self.spec.pool_size
        return waves * (timeout_s + REPLY_GRACE_S) + 60.0

    def _start(self) -> Any:
        worker = self._actor.remote(self.spec)
        self._started.append(worker)
        return worker

    def _acquire(self) -> tuple[int, Any, int]:
        """The slot with the fewest runs in flight (ties: the fewest done, so runs spread evenly),
        its worker, and the runs already in flight there."""
        with self._lock:
            slot = min(range(len(self.workers)), key=lambda i: (self._in_flight[i], self._runs[i]))
            ahead = self._in_flight[slot]
            self._in_flight[slot] += 1
            return slot, self.workers[slot], ahead

    def _release(self, slot: int, done: bool) -> None:
        with self._lock:
            self._in_flight[slot] -= 1
            self._runs[slot] += int(done)

    def _replace(self, slot: int, dead: Any) -> None:
        """A new worker in `dead`'s slot, once: the other runs that find it dead use the new one."""
        with self._lock:
            if self.workers[slot] is dead and not self.closed:
                self.workers[slot] = self._start()
                self.replaced += 1


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayPoolError("ray is not installed (pip install 'rlvr[ray]')") from None
    if not ray.is_initialized():
        raise RayPoolError("Ray is not initialized: call ray.init() (or join a cluster) before making a RaySandbox")
    return ray


def _copy(spec: WorkerSpec, max_replacements: int, handles: list) -> RaySandbox:
    """A `RaySandbox` on the same running workers (what unpickling makes)."""
    pool = RaySandbox.__new__(RaySandbox)
    pool._setup(_ray(), spec, max_replacements, handles, len(handles))
    return pool


def kill_actors(ray: Any, actors: list) -> None:
    """End these actors now, not when the driver exits: a test session or a notebook keeps its Ray
    cluster. (The rollout workers and trainer ranks end the same way.)"""
    if not ray.is_initialized():
        return
    for actor in actors:
        try:
            ray.kill(actor)
        except Exception:  # already dead
            pass


def _unavailable(reason: str, start: float) -> Result:
    return Result(
        status=Status.UNAVAILABLE,
        exit_code=None,
        stdout="",
        stderr="",
        wall_time=time.monotonic() - start,
        detail=reason,
    )
