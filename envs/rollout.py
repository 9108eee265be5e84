"""Run a sampler in environments: G episodes per task, token-exact, returned as groups.

Environments: a single-step rlvr env (a contextual bandit) is one env per group, reset onto the
group's `Task` object before each copy's step, the copies stepped one after another; any other
env is one env per episode, its copies reset onto the first's task. Either way each episode sees
exactly the env a fresh reset gives.

Two schedules, the same episodes. The first turn asks for `n=G` samples of each task's prompt
(a group shares it), later turns `n=1` per episode; the environment steps (decode, `env.step`,
reply tokens) run in a thread pool, since a step may wait on a sandbox or a verifier.
- Per episode (a `RequestSampler`, such as vLLM's): each episode advances on its own. When its
  turn's tokens are done its environment steps in the pool, and its next turn is submitted as
  soon as that step returns, while other episodes are still generating: a slow step holds only
  its own episode. While steps are quick, the engine waits for the steps of the episodes it has
  just finished (up to 5 ms a step, 0.1 s a round) before its next step: an in-process engine
  already uses every core, and threads stepping beside it slow it by more than they save (on
  2 cores, rlvr/raw 0.86 without waiting against 0.90 with, `benchmarks/rollout.py`), while
  their next turns join the engine's very next step. Quick means CPU work: a round not back in
  time, or one whose wall time was mostly its steps waiting (over twice their CPU time), shows
  steps that wait (a sandbox, a remote tool, another episode), and from then on in that rollout
  the engine never waits for a step.
- Lockstep (any other `Sampler`): each turn is ONE `sampler.generate` call for every active
  episode, then every episode's environment steps; the next turn waits for the slowest.
Both read the call's settings from one frozen `RolloutPlan`; the per-episode schedule keeps its
state (requests in flight, steps in the pool, whether steps are still quick) in `_PerEpisodeSchedule`.

Token exactness. `prompt_ids` is the chat template of the opening messages with the generation
prompt. After it, the model's tokens are stored exactly as sampled (loss mask 1, sampler
logprobs); the environment's reply goes in as the template's tokens for the new messages only:
template(conversation + reply, generation prompt) minus the template(conversation) prefix
(`envs.chat_template`; the prefix property is checked, `TemplateError` otherwise), with the
model's turn rendered from its decoded text only to find that boundary, never stored. The
model's text is never re-tokenized. An env whose `chat_tools` is set (a `ToolEnv`) has the
template list those tools (`tools=`) in the prompt and in every reply's rendering alike.

A model turn that ends without eos (the `max_tokens` limit or a stop string) in a multi-turn
episode: the environment still steps on the decoded text, and the rollout closes the turn with
the template's end-of-turn tokens (eos and what follows it), masked 0, so the next turn starts
exactly as the template would start it.

Outcomes: the final turn's verdict, except that a last turn cut by `max_tokens` makes it
`truncated` unless the verifier found it correct, and a verdict of `error` (or an env or grader
that raises) makes the episode `error` at once: counted, tokens kept, excluded from `Group`
statistics. An episode whose next prompt plus `max_tokens` would not fit in `max_length` ends
`truncated` there, without the reply tokens (prompt plus completion never exceed `max_length`).
A `truncated` episode says why in `Episode.truncation`: `length` (the last turn's `max_tokens`),
`context` (the opening prompt or the next turn did not fit in `max_length`), or `turns` (the
environment's own limit, its verdict `truncated`).

Agent environments (`kind == "agent"`, `envs.agent.env.AgentEnv`): the agent program drives the
calls, not this turn loop; `rollout` hands the whole call to the env's `play`, which serves the
same sampler to the agents through an OpenAI-compatible gateway and returns groups alike.

Seeds: with `sampling.seed` set, turn t samples with seed `sampling.seed + t * 1_000_003`, spaced
per prompt as the sampler spaces them: turn 0's i-th group gets that plus i*G in both schedules;
a later turn's request gets that plus the episode's index (per episode) or its index among the
turn's active episodes (lockstep).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import queue
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from tqdm.auto import tqdm

from rlvr.envs.chat_template import TemplateError, reply_ids, template_ids
from rlvr.envs.core import EnvError, Message, SingleTurnEnv, Task, TextEnv, copy_messages
from rlvr.envs.episode import Episode, TruncationReason
from rlvr.envs.registry import make
from rlvr.envs.sampler import FinishReason, RequestSampler, Sample, Sampler, SamplingSettings, Tokenizer
from rlvr.verifiers.verdict import Outcome, Verdict

TURN_SEED_STRIDE = 1_000_003
# Per-episode schedule (module docstring): the engine waits for a round of quick steps at most
# this long a step, and this long in all. A round whose wall time is over twice its steps' CPU
# time plus the slack was waiting on something; the slack covers the next turns' submission
# meanwhile and the GIL's 5 ms hand-over between threads (a tokenizer call lets it go).
QUICK_STEP_S = 0.005
QUICK_ROUND_MAX_S = 0.1
QUICK_SLACK_S = 0.01


@dataclass
class Group:
    """The G episodes of one task. Statistics leave `error` episodes out, and count an agent
    episode of several segments once (`Episode.segment`); `valid` holds every segment to train on."""

    task_id: str
    group_id: int
    episodes: list[Episode]

    @property
    def valid(self) -> list[Episode]:
        return [ep for ep in self.episodes if not ep.is_error]

    @property
    def rewards(self) -> list[float]:
        return [ep.reward for ep in self.valid if ep.segment == 0]

    @property
    def num_errors(self) -> int:
        return sum(ep.is_error for ep in self.episodes if ep.segment == 0)

    @property
    def mean_reward(self) -> float | None:
        rewards = self.rewards
        return sum(rewards) / len(rewards) if rewards else None


@dataclass(frozen=True)
class RolloutPlan:
    """One `rollout` call's settings, fixed for the call: what the schedules and their helpers
    read (one value passed down, instead of the same seven arguments threaded through each)."""

    make_env: Callable[[], Any]  # a fresh env of the call's id and kwargs (the call closes it at its end)
    starts: tuple[tuple[str | None, int | None], ...]  # per group: (task id, None) or (None, reset seed)
    tokenizer: Tokenizer
    group_size: int  # G
    sampling: SamplingSettings  # turn 0's; later turns' seeds follow from it (`_seeded`)
    limit: int | None  # the longest prompt a turn may start from: max_length - max_tokens; None: no limit
    group_id_start: int


@dataclass
class _Run:
    """One episode in progress."""

    env: Any
    group: int
    task_id: str
    seed: int | None
    messages: list[Message]
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # -1: an environment token, or not tracked
    turn_rewards: list[float] = field(default_factory=list)
    verdict: Verdict | None = None
    outcome: Outcome | None = None
    finish_reason: FinishReason | None = None  # of the last model turn; None until one is sampled
    turns: int = 0
    error: str | None = None
    note: str = ""
    truncation: TruncationReason | None = None
    slot: int = 0  # the episode's index in the rollout (group * G + copy): its later turns' seed offset
    tools: list[dict[str, Any]] | None = None  # the env's `chat_tools`: the template lists them
    reset_first: bool = False  # a copy sharing its group's single-step env: reset it onto the task, then step

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def context_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


def _step(run: _Run, sample: Sample, tokenizer: Tokenizer, context_limit: int | None) -> None:
    """Append the model's turn, step the environment on its text, append the reply tokens
    unless the next turn would then start past `context_limit` (the episode ends there)."""
    if run.reset_first:  # the group's env, last stepped for another copy: reset it as this copy's own
        task = run.env.unwrapped.task
        run.env.reset(seed=run.seed, options={"task": task})
        if run.env.unwrapped.task is not task:
            raise EnvError(
                f"a copy of task {run.task_id} reset to another task: the env ignores options={{'task': ...}}"
            )
    run.completion_ids += sample.token_ids
    run.loss_mask += [1] * len(sample.token_ids)
    run.logprobs += sample.logprobs
    run.versions += sample.versions or [-1] * len(sample.token_ids)
    run.finish_reason = FinishReason(sample.finish_reason)  # a duck-typed sample may carry a str
    run.turns += 1
    try:
        text = tokenizer.decode(list(sample.token_ids), skip_special_tokens=True)
        run.messages.append({"role": "assistant", "content": text})
        reply, reward, terminated, truncated, info = run.env.step(text)
        # a turn cut at max_tokens is never paid (a policy would learn to ramble until cut, on numbers
        # restated from the question); an env that grades cut text says so (`TextEnv.grade_truncated`)
        cut = run.finish_reason is FinishReason.LENGTH and not getattr(run.env.unwrapped, "grade_truncated", False)
        run.turn_rewards.append(0.0 if cut else float(reward))
        verdict = info.get("verdict")
        if not isinstance(verdict, Verdict):
            raise EnvError(f"env.step returned no Verdict in info['verdict'] (got {type(verdict).__name__})")
        run.verdict = verdict
        if verdict.is_error:
            run.error, run.outcome = verdict.detail or "the verifier failed", Outcome.ERROR
        elif terminated or truncated:
            run.outcome = verdict.outcome
            if cut or run.finish_reason is FinishReason.LENGTH and verdict.outcome is not Outcome.CORRECT:
                run.outcome, run.truncation = Outcome.TRUNCATED, TruncationReason.LENGTH
            elif run.outcome is Outcome.TRUNCATED:  # the env's verdict: out of turns
                run.truncation = TruncationReason.TURNS
        else:
            ended = bool(sample.token_ids) and sample.token_ids[-1] == tokenizer.eos_token_id
            extra = reply_ids(tokenizer, run.messages, list(reply), ended, run.tools)
            if context_limit is not None and len(run.context_ids()) + len(extra) > context_limit:
                run.outcome, run.note = Outcome.TRUNCATED, "the next turn would not fit in the context"
                run.truncation = TruncationReason.CONTEXT
                return
            run.messages.extend(copy_messages(reply))
            run.completion_ids += extra
            run.loss_mask += [0] * len(extra)
            run.logprobs += [0.0] * len(extra)
            run.versions += [-1] * len(extra)
    except TemplateError:
        raise  # a setup problem, not an episode's: every episode would hit it
    except Exception as e:  # noqa: BLE001 - an env or verifier crash is this episode's error, counted
        run.error, run.outcome = f"{type(e).__name__}: {e}", Outcome.ERROR


def _seeded(sampling: SamplingSettings, turn: int) -> SamplingSettings:
    if sampling.seed is None:
        return sampling
    return dataclasses.replace(sampling, seed=sampling.seed + turn * TURN_SEED_STRIDE)


def checked_generate(
    sampler: Sampler, prompts: list[list[int]], n: int, sampling: SamplingSettings
) -> list[list[Sample]]:
    """`sampler.generate`, refusing an answer of another shape than `len(prompts)` x `n` samples."""
    out = sampler.generate(prompts, n, sampling)
    if len(out) != len(prompts) or any(len(s) != n for s in out):
        raise RuntimeError(f"the sampler returned {[len(s) for s in out]} samples for {len(prompts)} prompts x {n}")
    return out


def _open(
    make_env: Callable[[], Any],
    group: int,
    task_id: str | None,
    seed: int | None,
    prompt_ids: list[int],
    task: Task | None = None,
) -> _Run:
    """A fresh env reset onto a task (the `Task` itself, by id, or drawn by `seed`), with the
    group's prompt (a leader's is rendered after the reset, by `_open_leaders`)."""
    env = make_env()
    options = {"task": task} if task is not None else None if task_id is None else {"task_id": task_id}
    messages, info = env.reset(seed=seed, options=options)
    task_id = str(info["task_id"] if "task_id" in info else env.unwrapped.task.task_id)
    tools = getattr(env.unwrapped, "chat_tools", None)
    return _Run(
        env=env, group=group, task_id=task_id, seed=seed, messages=list(messages), prompt_ids=prompt_ids, tools=tools
    )


def _single_step(run: _Run) -> bool:
    env = run.env.unwrapped
    return isinstance(env, TextEnv) and env.kind == SingleTurnEnv.kind


def _followers(plan: RolloutPlan, leader: _Run) -> list[_Run]:
    """The other G-1 copies of a group, with the leader's seed and task. A single-step rlvr env
    is one env for the whole group: each copy resets it onto the leader's `Task` just before its
    step (`reset_first`), so the copies step one after another (`_by_env`). Any other env is one
    env per copy, reset now: an rlvr `TextEnv` onto the leader's `Task` object (nothing rebuilt),
    any other env onto its task id."""
    if _single_step(leader):
        return [
            _Run(
                env=leader.env,
                group=leader.group,
                task_id=leader.task_id,
                seed=leader.seed,
                messages=list(leader.messages),
                prompt_ids=leader.prompt_ids,
                outcome=leader.outcome,
                note=leader.note,
                truncation=leader.truncation,
                reset_first=True,
            )
            for _ in range(plan.group_size - 1)
        ]
    env = leader.env.unwrapped
    task = env.task if isinstance(env, TextEnv) else None
    runs = [
        _open(plan.make_env, leader.group, leader.task_id, leader.seed, leader.prompt_ids, task)
        for _ in range(plan.group_size - 1)
    ]
    if any(r.messages != leader.messages for r in runs):
        raise EnvError(f"copies of task {leader.task_id} reset to different prompts: the env is not deterministic")
    for r in runs:
        r.outcome, r.note, r.truncation = leader.outcome, leader.note, leader.truncation
    return runs


def _by_env(pairs: list[tuple[_Run, Sample]]) -> list[list[tuple[_Run, Sample]]]:
    """Episodes to step, in batches that may run at once: the copies of a group that share one
    env step one after another, in one batch; every other episode is a batch of its own."""
    batches: dict[int, list[tuple[_Run, Sample]]] = {}
    for r, sample in pairs:
        batches.setdefault(id(r.env), []).append((r, sample))
    return list(batches.values())


def _verifier_version(verdict: Verdict | None) -> str | None:
    info = verdict.info if verdict is not None else {}
    return info.get("verifier_version") or info.get("verifier")


def episode_metadata(
    env_version: Any,
    env_kwargs: Mapping[str, Any],
    seed: int | None,
    verifier: str | None,
    model_info: Mapping[str, Any],
    sampling: Mapping[str, Any],
    max_length: int | None,
) -> dict[str, Any]:
    """How an episode was made, as every rollout's episodes record it (turn-based ones here, agent
    episodes in `envs.agent.env`): the env and its arguments, the reset seed, the verifier, the model
    and its step, the sampling settings, and the context the episode had to fit in."""
    return {
        "env_version": env_version,
        "env_kwargs": dict(env_kwargs),
        "seed": seed,
        "verifier": verifier,
        **{k: v for k, v in model_info.items() if k != "step"},
        "model": model_info.get("model"),
        "model_step": model_info.get("model_step", model_info.get("step")),
        "sampling": dict(sampling),
        "max_length": max_length,
    }


def _episode(
    run: _Run,
    env_id: str,
    env_kwargs: dict[str, Any],
    sampling: dict[str, Any],
    model_info: Mapping[str, Any],
    max_length: int | None,
) -> Episode:
    env = run.env.unwrapped
    verdict = run.verdict
    verifier = _verifier_version(verdict) or getattr(env, "verifier_version", None)
    version = getattr(env, "version", None)
    metadata = {
        **episode_metadata(version, env_kwargs, run.seed, verifier, model_info, sampling, max_length),
        "turns": run.turns,
        "detail": run.note or (verdict.detail if verdict else ""),
    }
    if run.error is not None:
        metadata["error"] = run.error
    return Episode(
        env_id=env_id,
        task_id=run.task_id,
        group_id=run.group,
        prompt_ids=list(run.prompt_ids),
        completion_ids=run.completion_ids,
        loss_mask=run.loss_mask,
        logprobs=[float(x) for x in run.logprobs],
        turn_rewards=run.turn_rewards,
        outcome=run.outcome or Outcome.ERROR,
        messages=run.messages,
        finish_reason=run.finish_reason,
        metadata=metadata,
        truncation=run.truncation if run.outcome is Outcome.TRUNCATED else None,
        versions=run.versions if any(v >= 0 for v in run.versions) else [],
    )


def rollout(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None,
    sampler: Sampler,
    tokenizer: Tokenizer,
    *,
    task_ids: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    group_size: int,
    sampling: SamplingSettings,
    model_info: Mapping[str, Any] | None = None,
    progress: bool = True,
    max_workers: int = 64,
    max_length: int | None = None,
    group_id_start: int = 0,
    per_episode: bool | None = None,
    executor: Executor | None = None,
) -> list[Group]:
    """G = `group_size` episodes for each task (given by id, or drawn by reset seed), one group
    per task in the order given; group ids count from `group_id_start`. `max_length` (prompt plus
    completion tokens; default the sampler's `max_model_len` if it has one) bounds an episode.
    `per_episode`: advance each episode on its own (needs a `RequestSampler`) or all in lockstep;
    None: per episode whenever the sampler can. `max_workers` threads run the environment steps:
    many, since a step mostly waits (on a sandbox, a verifier's process, a remote tool). A caller
    that rolls out again and again passes its own `executor` instead: starting threads on every
    call costs more than a rollout of short completions spends on its environments."""
    if (task_ids is None) == (seeds is None):
        raise ValueError("pass exactly one of task_ids and seeds")
    if group_size < 1 or max_workers < 1:
        raise ValueError(f"group_size and max_workers must be >= 1, got {group_size}, {max_workers}")
    env_kwargs, model_info = dict(env_kwargs or {}), dict(model_info or {})
    if max_length is None:  # a sampler that knows its context limit (VLLMSampler) sets it
        max_length = getattr(sampler, "max_model_len", None)
    starts = [(str(t), None) for t in task_ids] if task_ids is not None else [(None, int(s)) for s in seeds]
    probe = make(env_id, disable_env_checker=True, **env_kwargs)  # a bad id or argument fails here, typed
    spec_id = probe.spec.id
    if getattr(probe.unwrapped, "kind", None) == "agent":  # an agent program plays it (envs.agent.env)
        try:
            return probe.unwrapped.play(
                sampler,
                tokenizer,
                starts=starts,
                group_size=group_size,
                sampling=sampling,
                env_id=env_id,
                env_kwargs=env_kwargs,
                model_info=model_info,
                max_length=max_length,
                group_id_start=group_id_start,
            )
        finally:
            probe.close()
    probe.close()

    opened: list[Any] = []

    def make_env():
        env = gym.make(spec_id, disable_env_checker=True, **env_kwargs)
        opened.append(env)
        return env

    if per_episode is None:
        per_episode = isinstance(sampler, RequestSampler)
    elif per_episode and not isinstance(sampler, RequestSampler):
        raise TypeError(
            f"per-episode rollouts need a RequestSampler (submit, poll, unfinished); "
            f"{type(sampler).__name__} has only generate"
        )
    plan = RolloutPlan(
        make_env=make_env,
        starts=tuple(starts),
        tokenizer=tokenizer,
        group_size=group_size,
        sampling=sampling,
        limit=None if max_length is None else max_length - sampling.max_tokens,
        group_id_start=group_id_start,
    )
    try:
        with (
            contextlib.nullcontext(executor) if executor is not None else ThreadPoolExecutor(max_workers) as pool,
            tqdm(total=len(starts) * group_size, disable=not progress, desc=env_id, unit="ep") as bar,
        ):
            if per_episode:
                groups = _PerEpisodeSchedule(plan, pool, bar, sampler).play()
            else:
                groups = _play_lockstep(plan, pool, bar, sampler)
        settings = dataclasses.asdict(sampling)  # once: asdict is slow, and every episode records it
        return [
            Group(
                g[0].task_id,
                group_id_start + i,
                [_episode(r, env_id, env_kwargs, settings, model_info, max_length) for r in g],
            )
            for i, g in enumerate(groups)
        ]
    finally:
        for env in opened:
            env.close()


def _open_leaders(plan: RolloutPlan, pool: Executor) -> tuple[list[_Run], list[Callable[[], list[_Run]]]]:
    """Reset each group's first episode (its leader); return the leaders, and for each group a
    call that gives its other G-1 copies. Only the leader is needed to sample the first turn:
    copies that need envs of their own are reset in the pool meanwhile; those that share the
    leader's single-step env (nothing to reset yet) are made when called. The leaders are reset
    here, one after another: a reset is short Python work, which threads would only slow (the
    GIL). Their prompts are rendered after every reset: alternating resets and templates took a
    third longer (64 of each: 16 ms against 11; the two evict each other from the CPU's caches)."""
    leaders = [
        _open(plan.make_env, plan.group_id_start + i, *start, prompt_ids=[]) for i, start in enumerate(plan.starts)
    ]
    for r in leaders:
        r.prompt_ids = template_ids(plan.tokenizer, r.messages, True, r.tools)
    for r in leaders:
        if plan.limit is not None and len(r.prompt_ids) > plan.limit:
            r.outcome, r.note = Outcome.TRUNCATED, "the prompt does not fit in the context"
            r.truncation = TruncationReason.CONTEXT

    def copies(r: _Run) -> Callable[[], list[_Run]]:
        if _single_step(r):
            return functools.partial(_followers, plan, r)
        return pool.submit(_followers, plan, r).result

    return leaders, [copies(r) for r in leaders]


class _PerEpisodeSchedule:
    """One rollout played per episode: a finished turn's environment step goes to the pool at once,
    and its next turn to the sampler as soon as the step returns, while the sampler keeps
    generating for the others. While the steps are quick, the engine waits a little for them
    (`quick`; the module docstring says when and why)."""

    def __init__(self, plan: RolloutPlan, pool: Executor, bar: Any, sampler: RequestSampler):
        self.plan, self.pool, self.bar, self.sampler = plan, pool, bar, sampler
        self.leaders, self.pending = _open_leaders(plan, pool)
        self.groups: list[list[_Run]] = [[r] for r in self.leaders]
        # request -> where its samples go: a group index (turn 1: the whole group) or one episode
        self.waiting: dict[str, int | _Run] = {}
        # Each batch's episodes with their errors, and its steps' CPU time, as the batch returns (one
        # hand-over per batch: the rollout's thread wakes for each, and takes the GIL from the pool).
        self.stepped: queue.SimpleQueue = queue.SimpleQueue()
        self.in_pool = 0  # episodes handed to the pool whose step has not been taken back yet
        self.quick = True  # so far this rollout's steps have been CPU work, and the engine waits for them

    def play(self) -> list[list[_Run]]:
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
        first, g = _seeded(self.plan.sampling, 0), self.plan.group_size
        live = [i for i, r in enumerate(self.leaders) if not r.done]
        for j, i in enumerate(live):
            seed = None if first.seed is None else first.seed + j * g
            self.waiting[self.sampler.submit(self.leaders[i].prompt_ids, g, dataclasses.replace(first, seed=seed))] = i

    def _runs_for(self, target: int | _Run) -> list[_Run]:
        """The episodes a request's samples go to: one episode, or (turn 1) a whole group, its
        copies joined to the leader now and numbered (their later turns' seed offsets)."""
        if isinstance(target, _Run):
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
                for batch in _by_env(list(zip(runs, samples))):
                    self.pool.submit(self._step_batch, batch)
                submitted += len(runs)
        self.in_pool += submitted
        return submitted

    def _step_batch(self, batch: list[tuple[_Run, Sample]]) -> None:  # in the pool
        t0, done = time.thread_time(), []  # CPU time: a step that waits (a sandbox, a tool) uses little
        for r, sample in batch:
            try:
                _step(r, sample, self.plan.tokenizer, self.plan.limit)
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

    def _next_turn(self, r: _Run) -> None:
        """A stepped episode: done, or its next turn to the sampler."""
        if r.done:
            self.bar.update(1)
            return
        turn = _seeded(self.plan.sampling, r.turns)
        seed = None if turn.seed is None else turn.seed + r.slot
        self.waiting[self.sampler.submit(r.context_ids(), 1, dataclasses.replace(turn, seed=seed))] = r


def _play_lockstep(plan: RolloutPlan, pool: Executor, bar: Any, sampler: Sampler) -> list[list[_Run]]:
    """Reset the groups and play every episode to its end, one sampler call per turn."""
    leaders, pending = _open_leaders(plan, pool)
    # Turn 1: one call on the groups' shared prompts, n = G each.
    live = [r for r in leaders if not r.done]
    first = _seeded(plan.sampling, 0)
    samples = checked_generate(sampler, [r.prompt_ids for r in live], plan.group_size, first) if live else []
    groups = [[leader] + copies() for leader, copies in zip(leaders, pending)]
    pairs = [(r, s) for g, ss in zip([g for g in groups if not g[0].done], samples) for r, s in zip(g, ss)]
    turn = 0
    while pairs:
        list(pool.map(lambda batch: [_step(r, s, plan.tokenizer, plan.limit) for r, s in batch], _by_env(pairs)))
        turn += 1
        bar.update(sum(r.done for r, _ in pairs))
        bar.set_postfix(turn=turn)
        # Later turns: one call on every active episode's context, n = 1 each.
        active = [r for g in groups for r in g if not r.done]
        contexts = [r.context_ids() for r in active]
        samples = checked_generate(sampler, contexts, 1, _seeded(plan.sampling, turn)) if active else []
        pairs = [(r, ss[0]) for r, ss in zip(active, samples)]
    bar.update(bar.total - bar.n)
    return groups
