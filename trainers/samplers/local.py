"""`LocalSampler`: a backend in this process as a `TrainerSampler` (the trainer's, or a Ray rollout
worker's). It rolls out with `envs.rollout.rollout` on the backend and its tokenizer, on threads of
its own kept for its life (starting them anew for each rollout costs more than a step's short
completions spend on their environments); counts the seconds spent in the engine (the rest of a
rollout is scoring); and loads staged weights (asynchronous RL) in whichever thread drives the
engine, just before its next call. `stop_requested()` true there ends a rollout early
(`ProducerStopped`): the run is closing."""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.envs.rollout import RolloutRequest
from rlvr.envs.sampler import RequestSampler, Sample, SamplingSettings
from rlvr.trainers.producer import ProducerStopped, StagedWeights
from rlvr.trainers.samplers.protocol import SamplerBackend

ENV_THREADS = 64  # many: an environment step mostly waits (a sandbox, a verifier's process, a tool)


def local_sampler(backend: SamplerBackend) -> LocalSampler:
    """`backend` wrapped, keeping its request-level methods if it has them (per-episode rollouts)."""
    return LocalRequestSampler(backend) if isinstance(backend, RequestSampler) else LocalSampler(backend)


class LocalSampler:
    """A `TrainerSampler` over one backend (`inner`) in this process."""

    def __init__(self, inner: SamplerBackend):
        self.inner = inner
        self.seconds = 0.0
        self.staged = StagedWeights()
        self.stop_requested: Callable[[], bool] = lambda: False
        self._env_pool = ThreadPoolExecutor(max_workers=ENV_THREADS, thread_name_prefix="rlvr-env")
        weakref.finalize(self, self._env_pool.shutdown, wait=False)

    @property
    def tokenizer(self) -> Any:
        return self.inner.tokenizer

    @property
    def max_model_len(self) -> int | None:
        """The rollout ends episodes before this (vLLM raises past it); None for no limit."""
        return self.inner.max_model_len

    @property
    def version(self) -> int | None:
        """The policy version of the weights the backend holds (None if it does not track it)."""
        return self.inner.version

    def rollout(self, request: RolloutRequest) -> list:
        from rlvr.envs.rollout import rollout

        return rollout(request, self, self.inner.tokenizer, executor=self._env_pool, progress=False)

    def reset_clock(self) -> None:
        self.seconds = 0.0

    def start_producing(self, stop_requested: Callable[[], bool]) -> None:
        """A producer thread drives the engine from now on: weights change between engine steps, in
        the middle of samples, so each token's version is streamed; `stop_requested` ends a rollout."""
        self.inner.track_versions = True
        self.stop_requested = stop_requested

    def stop_producing(self) -> None:
        """Nothing in flight to drop: `generate` returns whole (`LocalRequestSampler` cancels)."""

    def stage(self, named_tensors: Iterable[tuple[str, Any]], version: int) -> None:
        """Weights for the producer to load before its next engine step (asynchronous RL)."""
        self.staged.stage(named_tensors, version)

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]], version: int) -> None:
        """Load weights now as policy `version` (a backend on the live policy has nothing to load)."""
        self.inner.update_weights(named_tensors, version)

    def close(self) -> None:
        self._env_pool.shutdown(wait=False)
        self.inner.close()

    @contextlib.contextmanager
    def _clocked(self) -> Iterator[None]:
        """Counts the block's seconds as sampling."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - t0

    def _before_engine(self) -> None:
        if self.stop_requested():
            raise ProducerStopped()
        staged = self.staged.take()
        if staged is not None:
            self.update_weights(staged.tensors, staged.version)

    # ---- envs.sampler.Sampler, for `envs.rollout` ---------------------------------------------
    def generate(
        self, prompt_token_ids: Sequence[Sequence[int]], n: int, sampling: SamplingSettings
    ) -> list[list[Sample]]:
        self._before_engine()
        with self._clocked():
            return self.inner.generate(prompt_token_ids, n, sampling)


class LocalRequestSampler(LocalSampler):
    """A `LocalSampler` of a `RequestSampler`: the seconds of `submit` (the engine's processing of
    a request) and of `poll` (its steps) count as sampling; environment steps run in other threads."""

    def submit(self, prompt_token_ids: Sequence[int], n: int, sampling: SamplingSettings) -> str:
        with self._clocked():
            return self.inner.submit(prompt_token_ids, n, sampling)

    def poll(self) -> list[tuple[str, list[Sample]]]:
        self._before_engine()
        with self._clocked():
            return self.inner.poll()

    def unfinished(self) -> int:
        return self.inner.unfinished()

    def cancel(self) -> None:
        self.inner.cancel()

    def stop_producing(self) -> None:
        """A rollout stopped part-way leaves none of its requests in the engine."""
        self.cancel()
