"""The two ways a run drives its sampler around the shared step (`Trainer.step_with_episodes`):
where a step's rollout comes from, and where the new weights go.

- `SyncDriver`: each step samples when the trainer asks, with the weights it just trained, and the
  new weights are loaded into the sampler at once.
- `OverlapDriver` (asynchronous RL, `max_staleness` K > 0): a producer thread (`trainers.producer`)
  samples up to K steps ahead; the trainer takes each step's rollout from it, stages the new weights
  for it to load between two engine steps, and borrows the engine (the producer paused) to evaluate.
  At K = 0 the producer waits for each update, so it gives the synchronous numbers (a test checks)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import torch

from rlvr.trainers.producer import RolloutProducer
from rlvr.trainers.samplers.protocol import TrainerSampler
from rlvr.trainers.step_rollout import Rollout


class SyncDriver:
    def __init__(self, sampler: TrainerSampler, sample: Callable[[int], Rollout]):
        self.sampler, self.sample = sampler, sample

    def start(self, step: int) -> None:
        pass

    def rollout(self, step: int) -> tuple[Rollout, dict[str, float]]:
        return self.sample(step), {}

    def push(self, params: Any, version: int) -> None:
        self.sampler.update_weights(params, version)

    def engine(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def advance(self, step: int) -> None:
        pass

    def stop(self) -> None:
        pass


class OverlapDriver:
    def __init__(self, sampler: TrainerSampler, sample: Callable[[int], Rollout], steps: int, max_staleness: int):
        self.sampler, self.sample = sampler, sample
        self.steps, self.max_staleness = steps, max_staleness
        self.producer: RolloutProducer | None = None

    def start(self, step: int) -> None:
        threads = torch.get_num_threads()

        def produce(s: int) -> Rollout:
            # A new thread starts with OpenMP's default thread count, and vLLM-CPU's attention
            # refuses to run with another count than the one its engine was built with.
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)
            return self.sample(s)

        self.producer = RolloutProducer(produce, step, self.steps, self.max_staleness, version=step)
        self.sampler.start_producing(self.producer.in_own_thread_and_stopping)

    def rollout(self, step: int) -> tuple[Rollout, dict[str, float]]:
        started = time.perf_counter()
        rollout = self.producer.get(step)
        return rollout, {"time_waiting": time.perf_counter() - started}  # how far sampling is behind training

    def push(self, params: Any, version: int) -> None:
        if self.producer is None:  # stopped: the engine is the trainer's again
            self.sampler.update_weights(params, version)
        else:
            self.sampler.stage(params, version)

    def engine(self) -> contextlib.AbstractContextManager:
        """A context in which this thread may drive the engine (the producer is paused)."""
        return self.producer.paused() if self.producer is not None else contextlib.nullcontext()

    def advance(self, step: int) -> None:
        if self.producer is not None:
            self.producer.advance(step)  # the producer may now sample step + max_staleness

    def stop(self) -> None:
        """Stop the producer (a rollout in progress ends at its next engine step) and drop what it
        sampled ahead: the engine is the trainer's again."""
        if self.producer is not None:
            self.producer.close()
            self.producer = None
            self.sampler.stop_producing()  # a rollout stopped part-way leaves none of its requests
