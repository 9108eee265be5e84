"""Rollout workers on Ray (`rlvr train --ray --rollout-workers N`).

Each worker is a Ray actor holding its own sampler, built by the one sampler factory from the run's
`SamplerSpec` (a vLLM engine; or with `--sampler hf` a `generate` sampler on its own copy of the
model), and its own environment copies: it rolls out the `RolloutRequest` it is handed
(`trainers.samplers.local.LocalSampler`) and returns the groups, plain picklable data. The driver
(`RayRolloutPool`, in the trainer's process, a `TrainerSampler` like the local one) cuts a
rollout's tasks into one contiguous chunk per worker and gathers the groups in task order.

Seeds: a chunk that starts at the k-th task samples with seed + k * G. `envs.rollout` gives the
j-th group's first turn seed + j * G and its later turns seed + turn stride + (j * G + copy), so
each task gets exactly the seeds the single-process rollout would give it.

Weights: after each optimizer step the driver puts the new weights into Ray's object store once;
every worker loads them in place (as the local sampler does) and tags what it samples with their
version. Evaluation runs on the workers too.

Asynchronous RL (`--max-staleness K`): the workers are the producer's sampler. The trainer's sync
does not wait for the loads: each worker loads the new weights after the chunk it is sampling, and
Ray runs one caller's calls to an actor in the order they were made, so the chunks of step s,
handed out once the trainer is at version s - K, sample with version s - K or newer. The pool is
thread-safe: the producer's thread rolls out while the trainer's thread syncs.

Faults: a worker that dies (its process killed, its node lost: Ray's `RayActorError`) is replaced
by a new one, which loads the current weights before it runs the dead worker's chunk again:
nothing is lost and nothing counted twice (a dead worker returns nothing). An exception raised
by an environment is not a death: it propagates, as in a single-process rollout.

Verifier workers (`--verifier-workers N`, `sandbox.RaySandbox`): a pool of sandbox actors that every
rollout worker's environments run their code on (the worker makes it its process's shared
sandbox), so verification scales apart from sampling; a verifier worker that dies is replaced and
its program run again (`sandbox.ray_pool`).

Ray is imported only inside the functions that start or drive the pool (and `trainers.ray_cluster`),
which only `rlvr train --ray` calls.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rlvr.envs.rollout import RolloutRequest
from rlvr.errors import RlvrError
from rlvr.sandbox.ray_pool import kill_actors
from rlvr.trainers.config import ConfigError
from rlvr.trainers.ray_cluster import start_ray
from rlvr.trainers.samplers.factory import build_sampler
from rlvr.trainers.samplers.local import local_sampler
from rlvr.trainers.samplers.protocol import SamplerSpec


class RolloutWorkerError(RlvrError):
    """Rollout workers kept dying on the same tasks, or none could be started."""


@dataclass(frozen=True)
class ChunkResult:
    groups: list  # envs.rollout.Group, in the chunk's task order
    seconds_sampling: float  # the worker's engine time


class RolloutWorker:
    """The actor: a sampler (vLLM, or `generate` on a model copy) and environment copies in one process."""

    def __init__(self, spec: SamplerSpec, threads: int | None, verifier: Any = None):
        import torch

        from rlvr.trainers.interrupt import ignore_in_worker

        ignore_in_worker()  # a terminal's Ctrl-C: the driver saves and ends this worker (trainers.interrupt)
        if threads:
            torch.set_num_threads(threads)  # before vLLM starts: it makes the call a no-op afterwards
        if verifier is not None:  # the environments here run their code on the verifier workers
            from rlvr import sandbox

            sandbox.use_shared_sandbox(verifier)
        self.sampler = local_sampler(build_sampler(spec))  # the pool loads the current weights before any rollout

    def load(self, weights: list, version: int) -> None:
        self.sampler.update_weights(weights, version)

    def rollout(self, chunk: RolloutRequest) -> ChunkResult:
        self.sampler.reset_clock()
        groups = self.sampler.rollout(chunk)
        return ChunkResult(groups, self.sampler.seconds)

    def pid(self) -> int:
        return os.getpid()


def chunks_of(n: int, parts: int) -> list[range]:
    """`range(n)` cut into at most `parts` contiguous, non-empty pieces whose sizes differ by at most one."""
    parts = max(1, min(parts, n))
    base, extra = divmod(n, parts)
    starts = [i * base + min(i, extra) for i in range(parts + 1)]
    return [range(starts[i], starts[i + 1]) for i in range(parts) if starts[i + 1] > starts[i]]


def start_rollout_pool(
    spec: SamplerSpec,
    weights: Iterable[tuple[str, Any]],
    version: int,
    *,
    workers: int,
    address: str | None,
    threads: int | None,
    verifier_workers: int,
) -> RayRolloutPool:
    """Rollout workers (`rlvr train --ray`) in place of the local sampler, each building `spec`,
    holding `weights` as `version` (a resumed run's, a LoRA adapter's merged in); with
    `verifier_workers`, the sandbox actors their environments verify on."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"--ray needs Ray ({exc}): pip install 'rlvr[ray]'") from None
    start_ray(address)  # before the verifier workers, which join it
    verifier = None
    if verifier_workers:
        from rlvr.sandbox import RaySandbox

        verifier = RaySandbox(verifier_workers)
    pool = RayRolloutPool(spec, workers, address=address, threads=threads, verifier=verifier)
    pool.update_weights(weights, version)
    return pool


class RayRolloutPool:
    """`workers` rollout actors, a `TrainerSampler` (`trainers.samplers.protocol`): `rollout` of a
    request cut among them, `update_weights(named_tensors, version)` after each step, and the
    `seconds` of sampling since `reset_clock` (the slowest worker's engine time of each rollout)."""

    def __init__(
        self,
        spec: SamplerSpec,
        workers: int,
        *,
        address: str | None = None,
        threads: int | None = None,
        max_replacements: int = 3,
        verifier: Any = None,
    ):
        import ray

        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        start_ray(address)
        self._ray = ray
        # num_cpus=0: a worker holds no CPU reservation, so N workers start on any cluster, even one
        # smaller than N; vLLM and the environments share the cores as threads in one process do.
        self._actor = ray.remote(num_cpus=0, max_restarts=0)(RolloutWorker)
        # `verifier`: a `sandbox.RaySandbox` (the verifier workers) for every worker's environments
        self._args = (spec, threads, verifier)
        self.verifier = verifier  # closed with the pool
        self._lock = threading.Lock()  # the workers and weights: the producer's thread and the trainer's
        self._weights: Any = None  # the object-store reference of the current weights
        self._loading: list[tuple[int, Any, Any]] = []  # (slot, worker, load) not waited for
        self.version: int | None = None
        self.seconds = 0.0
        self.replaced = 0  # workers replaced after dying, over the pool's life
        self.max_replacements = max_replacements  # deaths on one chunk before a rollout gives up
        self.workers = [self._actor.remote(*self._args) for _ in range(workers)]
        # the list itself, whose slots are refilled with replacements: the finalizer ends whoever holds them then
        self._finalizer = weakref.finalize(self, kill_actors, ray, self.workers)
        from ray.exceptions import RayActorError

        try:
            ray.get([w.pid.remote() for w in self.workers])  # started now, or the start-up error now
        except RayActorError as exc:
            self.close()
            raise RolloutWorkerError(f"a rollout worker could not start: {exc}") from None

    # ---- the sampler's side of the trainer ---------------------------------------------------
    def reset_clock(self) -> None:
        self.seconds = 0.0

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]], version: int, wait: bool = True) -> None:
        """Every worker loads these weights (CPU copies, put once into the object store) as `version`;
        a worker found dead is replaced by one that loads them. `wait=False` (asynchronous RL):
        return at once; a worker loads them after the chunk it is sampling."""
        weights = self._ray.put([(name, t.detach().cpu()) for name, t in named_tensors])
        with self._lock:
            self._weights, self.version = weights, int(version)
            loads = [(slot, w, w.load.remote(weights, int(version))) for slot, w in enumerate(self.workers)]
        if wait:
            self._check_loads(loads, wait=True)
        else:
            self._loading = self._check_loads(self._loading, wait=False) + loads

    def _check_loads(self, loads: list, wait: bool) -> list:
        """Replace the workers whose load failed because they died (of the loads finished, or of all
        of them when `wait`); returns the loads not finished."""
        from ray.exceptions import RayActorError

        if not loads:
            return []
        done, _ = self._ray.wait([load for _, _, load in loads], num_returns=len(loads), timeout=None if wait else 0)
        finished = set(done)
        for slot, worker, load in loads:
            if load in finished:
                try:
                    self._ray.get(load)
                except RayActorError:
                    self._replace(slot, worker)
        return [entry for entry in loads if entry[2] not in finished]

    # ---- as the asynchronous producer's sampler (`trainers.loop`) -------------------------------
    def start_producing(self, stop_requested: Callable[[], bool]) -> None:
        """Nothing to set up: a worker loads new weights between its chunks, never mid-sample, and
        a rollout in progress ends with its chunks."""

    def stop_producing(self) -> None:
        """Nothing left in flight: a rollout returns only when all its chunks have."""

    def stage(self, named_tensors: Iterable[tuple[str, Any]], version: int) -> None:
        """Send the weights without waiting: each worker loads them after the chunk it is sampling."""
        self.update_weights(named_tensors, version, wait=False)

    def close(self) -> None:
        self._finalizer()
        if self.verifier is not None:
            self.verifier.close()

    # ---- rollouts ------------------------------------------------------------------------------
    def rollout(self, request: RolloutRequest) -> list:
        """The groups of `envs.rollout.rollout` for these tasks, sampled by the workers: one
        request per worker, for a contiguous chunk of the seeds."""
        from ray.exceptions import RayActorError

        with self._lock:
            workers = list(self.workers)
        seeds, ids, sampling = request.seeds, request.task_ids, request.sampling

        def seed(start: int) -> int | None:  # the sampling seed of the chunk from the start-th task
            return None if sampling.seed is None else sampling.seed + start * request.group_size

        chunks = [
            dataclasses.replace(
                request,
                env_args=dict(request.env_args),
                seeds=tuple(int(seeds[i]) for i in part) if ids is None else (),
                task_ids=None if ids is None else tuple(ids[i] for i in part),
                sampling=dataclasses.replace(sampling, seed=seed(part.start)),
                model_info=dict(request.model_info),
                group_id_start=request.group_id_start + part.start,
            )
            for part in chunks_of(len(seeds if ids is None else ids), len(workers))
        ]
        pending = {workers[i].rollout.remote(c): (i, workers[i], c) for i, c in enumerate(chunks)}
        results: dict[int, ChunkResult] = {}
        deaths: dict[int, int] = {}
        while pending:
            (ready,), _ = self._ray.wait(list(pending), num_returns=1)
            slot, worker, chunk = pending.pop(ready)
            try:
                results[chunk.group_id_start] = self._ray.get(ready)
            except RayActorError as exc:
                deaths[chunk.group_id_start] = deaths.get(chunk.group_id_start, 0) + 1
                if deaths[chunk.group_id_start] > self.max_replacements:
                    raise RolloutWorkerError(
                        f"rollout workers died {deaths[chunk.group_id_start]} times on the "
                        f"tasks of groups from {chunk.group_id_start}: {exc}"
                    ) from None
                worker = self._replace(slot, worker)
                pending[worker.rollout.remote(chunk)] = (slot, worker, chunk)
        self.seconds += max((r.seconds_sampling for r in results.values()), default=0.0)
        return [g for start in sorted(results) for g in results[start].groups]

    def _replace(self, slot: int, dead: Any) -> Any:
        """The worker in `slot` now: a new one, holding the current weights, in place of `dead`
        (unless another thread has replaced it already)."""
        with self._lock:
            if self.workers[slot] is not dead:
                return self.workers[slot]
            worker = self._actor.remote(*self._args)
            if self._weights is not None:
                self._ray.get(worker.load.remote(self._weights, self.version))
            self.workers[slot] = worker
            self.replaced += 1
            return worker
