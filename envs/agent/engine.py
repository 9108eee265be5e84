"""The agent gateway's engine driver: one thread calls the sampler, and concurrent calls share its batches.

Why a driver. Samplers are not thread-safe (one engine, one caller), and the gateway answers many
agents at once: a group's G agents, every group of the step. One `generate` per call, one after
another, would sample them one by one. The driver is the sampler's only caller; the gateway's
handlers hand it requests (`request` returns a future) and wait.

Which thread. A rollout drives the engine in its own thread (`run(until)`), the one that would
call the sampler for a turn-based rollout: a trainer's producer thread loads staged weights there,
and vLLM-CPU refuses to run its attention from a thread whose OpenMP thread count differs from
its creator's (a new thread starts with the default). A gateway used on its own (`start()`) drives
it from a thread of its own. Either way:
- a `RequestSampler` (vLLM's engine): each request is submitted as it comes and the engine is
  polled step by step; a request that arrives while the engine steps joins its next step
  (continuous batching, as the per-episode rollout does).
- any other `Sampler` (Hugging Face `generate`): one `generate` call for each distinct
  (n, settings) among the calls gathered; a call with a seed gets one of its own (a seeded call
  is reproducible only alone).
Gathering: when the engine is idle and a call comes, the driver waits for the others before it
starts (a group's agents call at about the same time, but over HTTP their calls trickle in; an
engine started on the first would run more, smaller steps): until every open episode has a call
waiting (`quiet()`, the gateway's count of open episodes with none, is 0), or none has come for
`GATHER_S`, and at most `GATHER_MAX_S`. Calls that come while the engine runs join its next step.
The policy version a call records is the sampler's `version` read right after the engine call or
step that finished it (a trainer's sampler loads staged weights at the start of its calls).

Failures. An engine call that raises (a broken engine, or a trainer's `ProducerStopped` when the
run is closing) fails every call waiting on the driver, and every later one, and is kept in
`failure`: the rollout re-raises it (`envs.agent.env`), so a broken engine ends the rollout as it
ends a turn-based one, rather than reading as the agents' own errors.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from rlvr.envs.core import EnvError
from rlvr.envs.rollout.sampler_calls import checked_generate
from rlvr.envs.sampler import RequestSampler, Sampler, SamplingSettings

GATHER_S = 0.02  # an idle engine starts when no call has come for this long...
GATHER_MAX_S = 0.1  # ...or this long after the first call waiting
UNTIL_POLL_S = 0.02  # how often an idle driver asks `until()`


class EngineClosedError(EnvError, RuntimeError):
    """The driver was closed, or its engine failed, before this call was answered."""


@dataclass
class _Request:
    prompt_ids: list[int]
    n: int
    sampling: SamplingSettings
    future: Future = field(default_factory=Future)  # -> (samples, version)


class EngineDriver:
    """The one caller of `sampler`, in a thread of its own. `start()`, then `request(...)`; `close()`."""

    def __init__(self, sampler: Sampler, quiet: Callable[[], int] | None = None):
        self.sampler = sampler
        self.quiet = quiet  # open episodes with no call waiting; None: unknown (gather by time only)
        self.failure: BaseException | None = None
        self._continuous = isinstance(sampler, RequestSampler)
        self._pending: list[_Request] = []
        self._arrivals = 0  # requests ever queued: the gather loop watches it grow
        self._in_engine: dict[str, _Request] = {}  # RequestSampler keys -> their requests
        self._closed = False
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> EngineDriver:
        """Drive the engine from a thread of its own until `close()`."""
        self._thread = threading.Thread(target=self.run, name="rlvr-agent-engine", daemon=True)
        self._thread.start()
        return self

    @property
    def own_thread(self) -> bool:
        return self._thread is not None

    def close(self) -> None:
        """Stop driving; calls not yet answered fail with `EngineClosedError`."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=30)

    def request(self, prompt_ids: list[int], n: int, sampling: SamplingSettings) -> Future:
        """A future of `(samples, version)`: `n` samples of `prompt_ids`, and the policy version."""
        req = _Request(list(prompt_ids), n, sampling)
        with self._cv:
            if self._closed or self.failure is not None:
                req.future.set_exception(self._refusal())
            else:
                self._pending.append(req)
                self._arrivals += 1
                self._cv.notify_all()
        return req.future

    # ---- the thread ----------------------------------------------------------------------------
    def _refusal(self) -> EngineClosedError:
        if self.failure is not None:
            return EngineClosedError(f"the sampler failed: {type(self.failure).__name__}: {self.failure}")
        return EngineClosedError("the agent gateway's engine is closed")

    def _take(self, until: Callable[[], bool]) -> list[_Request] | None:
        """The requests to start now (None: closed, or `until()`). Waits for work; gathers a generate batch."""
        with self._cv:
            while not self._closed and not self._pending and not self._in_engine and not until():
                self._cv.wait(UNTIL_POLL_S)
            if self._closed or (not self._pending and not self._in_engine):
                return None
            if not self._in_engine:  # idle: gather (module docstring)
                deadline = time.monotonic() + GATHER_MAX_S
                while not self._closed and time.monotonic() < deadline and (self.quiet is None or self.quiet() > 0):
                    seen = self._arrivals
                    self._cv.wait(min(GATHER_S, max(0.0, deadline - time.monotonic())))
                    if self._arrivals == seen:
                        break
            taken, self._pending = self._pending, []
            return taken

    def run(self, until: Callable[[], bool] = lambda: False) -> None:
        """Drive the engine in this thread until `close()`, or `until()` is true with nothing in flight.
        A failure is kept in `failure` (and fails the calls waiting), not raised."""
        taken: list[_Request] = []
        try:
            while (taken := self._take(until)) is not None:
                if self._continuous:
                    self._step(taken)
                else:
                    self._generate(taken)
        except BaseException as e:  # noqa: BLE001 - kept and re-raised by the rollout
            with self._cv:
                self.failure = e
            self._fail_waiting(taken)
        finally:
            if self._closed:
                self._fail_waiting([])

    def _fail_waiting(self, taken: list[_Request]) -> None:
        """Fail every call not answered (`taken` too: those the failed engine call held) with the
        refusal, and drop the engine's requests."""
        with self._cv:
            left = [*taken, *self._pending, *self._in_engine.values()]
            self._pending, self._in_engine = [], {}
        for req in left:
            if not req.future.done():
                req.future.set_exception(self._refusal())
        if self._continuous and left:
            with contextlib.suppress(Exception):  # an engine that just failed may fail again
                self.sampler.cancel()

    def _step(self, taken: list[_Request]) -> None:
        for req in taken:
            key = self.sampler.submit(req.prompt_ids, req.n, req.sampling)
            self._in_engine[key] = req
        if not self._in_engine:
            return
        finished = self.sampler.poll()
        version = getattr(self.sampler, "version", None)
        for key, samples in finished:
            req = self._in_engine.pop(key, None)
            if req is not None:
                if len(samples) != req.n:
                    raise RuntimeError(f"the sampler returned {len(samples)} samples for n={req.n}")
                req.future.set_result((samples, version))

    def _generate(self, taken: list[_Request]) -> None:
        shared: dict[tuple[int, SamplingSettings], list[_Request]] = defaultdict(list)
        alone = []  # a seeded call's samples must not depend on what else was in flight
        for req in taken:
            if req.sampling.seed is None:
                shared[(req.n, req.sampling)].append(req)
            else:
                alone.append([req])
        for reqs in [*shared.values(), *alone]:
            n, sampling = reqs[0].n, reqs[0].sampling
            out = checked_generate(self.sampler, [r.prompt_ids for r in reqs], n, sampling)
            version = getattr(self.sampler, "version", None)
            for req, samples in zip(reqs, out):
                req.future.set_result((list(samples), version))
