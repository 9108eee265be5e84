"""The per-episode schedule (a `RequestSampler`, such as vLLM's): each episode advances on its own.

The first turn asks for `n=G` samples of each task's prompt (a group shares it), later turns `n=1`
per episode. When an episode's turn's tokens are done its environment steps in the thread pool (a
step may wait on a sandbox or a verifier), and its next turn is submitted as soon as that step
returns, while other episodes are still generating: a slow step holds only its own episode.

While steps are quick, the engine waits for the steps of the episodes it has just finished (up to
5 ms a step, 0.1 s a round) before its next step: an in-process engine already uses every core, and
threads stepping beside it slow it by more than they save (benchmarks/README.md, rollout overhead),
while their next turns join the engine's very next step. Quick means CPU work: a round not back in
time, or one whose wall time was mostly its steps waiting (over twice their CPU time), shows steps
that wait (a sandbox, a remote tool, another episode), and from then on in that rollout the engine
never waits for a step."""

from __future__ import annotations

import dataclasses
import queue
import time
from concurrent.futures import Executor
from typing import Any

from rlvr.envs.rollout.episode_run import EpisodeRun, take_turn
from rlvr.envs.rollout.opening import by_env, open_leaders
from rlvr.envs.rollout.plan import RolloutPlan
from rlvr.envs.rollout.sampler_calls import seeded
from rlvr.envs.sampler import RequestSampler, Sample

# The engine waits for a round of quick steps at most this long a step, and this long in all. A round
# whose wall time is over twice its steps' CPU time plus the slack was waiting on something; the slack
# covers the next turns' submission meanwhile and the GIL's 5 ms hand-over between threads (a
# tokenizer call lets it go).
QUICK_STEP_S = 0.005
QUICK_ROUND_MAX_S = 0.1
QUICK_SLACK_S = 0.01


class PerEpisodeSchedule:
    """One rollout played per episode: a finished turn's environment step goes to the pool at once,
    and its next turn to the sampler as soon as the step returns, while the sampler keeps
    generating for the others. While the steps are quick, the engine waits a little for them
    (`quick`; the module docstring says when and why)."""

    def __init__(self, plan: RolloutPlan, pool: Executor, bar: Any, sampler: RequestSampler):
        self.plan, self.pool, self.bar, self.sampler = plan, pool, bar, sampler
        self.leaders, self.pending = open_leaders(plan, pool)
        self.groups: list[list[EpisodeRun]] = [[r] for r in self.leaders]
        # request -> where its samples go: a group index (turn 1: the whole group) or one episode
        self.waiting: dict[str, int | EpisodeRun] = {}
        # Each batch's episodes with their errors, and its steps' CPU time, as the batch returns (one
        # hand-over per batch: the rollout's thread wakes for each, and takes the GIL from the pool).
        self.stepped: queue.SimpleQueue = queue.SimpleQueue()
        self.in_pool = 0  # episodes handed to the pool whose step has not been taken back yet
        self.quick = True  # so far this rollout's steps have been CPU work, and the engine waits for them

    def play(self) -> list[list[EpisodeRun]]:
        """Every episode played to its end: the groups, each leader first."""
        self._submit_first_turns()
        try:
            while self.waiting or self.in_pool:
                submitted = self._dispatch_finished_turns()
                self._take_steps(submitted)
        except BaseException:
            self.sampler.cancel()  # the engine must not keep requests that nobody will collect
            raise
        for i, copies in enumerate(self.pending):  # groups whose leader never sampled (its prompt did not fit)
            if len(self.groups[i]) == 1 and self.plan.group_size > 1:
                self.groups[i] += copies()
        self.bar.update(self.bar.total - self.bar.n)
        return self.groups

    def _submit_first_turns(self) -> None:
        """Turn 1: n = G on each group's shared prompt, seeded as one generate call would be."""
        first, g = seeded(self.plan.sampling, 0), self.plan.group_size
        live = [i for i, r in enumerate(self.leaders) if not r.done]
        for j, i in enumerate(live):
            seed = None if first.seed is None else first.seed + j * g
            self.waiting[self.sampler.submit(self.leaders[i].prompt_ids, g, dataclasses.replace(first, seed=seed))] = i

    def _runs_for(self, target: int | EpisodeRun) -> list[EpisodeRun]:
        """The episodes a request's samples go to: one episode, or (turn 1) a whole group, its
        copies joined to the leader now and numbered (their later turns' seed offsets)."""
        if isinstance(target, EpisodeRun):
            return [target]
        group = self.groups[target]
        group += self.pending[target]()
        for k, r in enumerate(group):
            r.slot = target * self.plan.group_size + k
        return group

    def _dispatch_finished_turns(self) -> int:
        """Hand the turns the sampler finished to the pool, to step; returns how many episodes."""
        submitted = 0
        if self.waiting:
            for key, samples in self.sampler.poll():
                runs = self._runs_for(self.waiting.pop(key))
                if len(samples) != len(runs):
                    raise RuntimeError(f"the sampler returned {len(samples)} samples for {len(runs)} episodes")
                for batch in by_env(list(zip(runs, samples))):
                    self.pool.submit(self._step_batch, batch)
                submitted += len(runs)
        self.in_pool += submitted
        return submitted

    def _step_batch(self, batch: list[tuple[EpisodeRun, Sample]]) -> None:  # in the pool
        t0, done = time.thread_time(), []  # CPU time: a step that waits (a sandbox, a tool) uses little
        for r, sample in batch:
            try:
                take_turn(r, sample, self.plan.tokenizer, self.plan.limit)
                done.append((r, None))
            except BaseException as e:  # noqa: BLE001 - re-raised in the rollout's thread
                done.append((r, e))
        self.stepped.put((done, time.thread_time() - t0))

    def _take_steps(self, submitted: int) -> None:
        """Take the steps that have returned. Nothing generating: wait for one. While steps are
        quick, wait for the `submitted` ones just handed over, up to a deadline (module docstring)."""
        start, cpu = time.perf_counter(), 0.0
        deadline = start + min(QUICK_STEP_S * submitted, QUICK_ROUND_MAX_S) if self.quick and submitted else None
        block = not self.waiting
        while self.in_pool:
            timeout = None if block else 0.0 if deadline is None else max(0.0, deadline - time.perf_counter())
            try:
                done, seconds = self.stepped.get(timeout=timeout)
            except queue.Empty:
                if deadline is not None:  # late: the engine goes on, and waits no more
                    self.quick = False
                break
            block, self.in_pool, cpu = False, self.in_pool - len(done), cpu + seconds
            for r, error in done:
                if error is not None:
                    raise error  # a TemplateError (a setup problem) ends the rollout here
                self._next_turn(r)
        if deadline is not None and self.quick and time.perf_counter() - start > 2 * cpu + QUICK_SLACK_S:
            self.quick = False  # the round's steps spent most of their time waiting, not computing

    def _next_turn(self, r: EpisodeRun) -> None:
        """A stepped episode: done, or its next turn to the sampler."""
        if r.done:
            self.bar.update(1)
            return
        turn = seeded(self.plan.sampling, r.turns)
        seed = None if turn.seed is None else turn.seed + r.slot
        self.waiting[self.sampler.submit(r.context_ids(), 1, dataclasses.replace(turn, seed=seed))] = r
