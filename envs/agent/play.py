"""Playing agent episodes through the gateway, and turning them into `Episode`s: what `AgentEnv` plays.

The user's agent is `async def run(client, task) -> float | Verdict | str`: `client` is an
`openai.AsyncOpenAI` whose `base_url` is the episode's route on the gateway (`envs.agent.gateway`),
`task` the `envs.core.Task` to solve. `play_agent` runs it to its end and judges it:
- a returned `Verdict` is the episode's; a float in [0, 1] is a `Verdict` with that score, outcome
  `correct` at 1.0 and `incorrect` below (the agent's own check, or any rlvr verifier it called);
  a string is the agent's final answer, graded by `grade` (`AgentEnv`: the task environment's
  verifier), if one is given;
- an exception in the agent, a return of anything else (a float outside [0, 1], None, text with
  no grader), a grader that raises, or an agent still running after `timeout_s` is an `error`
  outcome, NEVER a reward of 0: as with a
  crashed grader, the episode is left out of the batch and counted (ARCHITECTURE, Episode), since a
  bug in the harness is not the model's wrong answer;
- the episode's route is closed at the end either way: a hung agent's later calls get a 404, and
  its calls so far are kept (an `error` episode keeps its tokens, as rollouts keep them).
The agent runs on an event loop of its own in a thread of its own, so that an agent that blocks the
loop (a synchronous call inside it) is bounded by the timeout too; such a thread cannot be killed,
only abandoned (it is a daemon, and its calls are refused).

`agent_episodes` turns the calls into `Episode`s (`envs.agent.calls.segments`), every segment
credited with the episode's one reward; `Episode.segment` numbers them, so that statistics and
advantages count an agent episode once, however many segments it has (`Group`, `Batch.episode_ids`).

`agent_rollout` plays G agent episodes per task at once (each its own route, thread and loop; the
gateway batches their engine calls, driven from the caller's thread when the gateway was started
without an engine thread of its own) and returns `envs.rollout.Group`s, in task order, whose
`episodes` hold every segment. Episode k of the rollout (group i, copy j: k = i * G + j) is opened
with slot k, which seeds its calls (`envs.agent.gateway`). A sampler that failed while serving
(`gateway.engine_failure`) is raised once the agents are done: a broken engine fails the rollout.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rlvr.envs.agent.calls import ENV_VERSION, Call, segments
from rlvr.envs.agent.gateway import AgentGateway
from rlvr.envs.core import Task
from rlvr.envs.episode import Episode, TruncationReason
from rlvr.envs.rollout.group import Group
from rlvr.envs.sampler import FinishReason
from rlvr.verifiers.verdict import Outcome, Verdict

Agent = Callable[[Any, Task], Awaitable[Any]]  # async def run(client, task) -> float | Verdict | str
Grader = Callable[[str], Verdict]  # a final answer's verdict


HELPER_THREADS = 8


class HelperThreads(ThreadPoolExecutor):
    """Threads shared by every agent's event loop for its blocking helpers (`asyncio.to_thread`: the
    openai client computes its platform headers so, once per client): a loop's own pool would start a
    thread for each agent, 5 ms each on a busy machine. A loop shuts its default executor down when
    it ends; this one stays up until `close()`."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Kept up when an agent's loop ends (see the class docstring)."""

    def close(self) -> None:
        super().shutdown(wait=False)


@dataclass(frozen=True)
class AgentResult:
    """One played agent episode: its calls as the gateway recorded them, and the verdict."""

    calls: tuple[Call, ...]
    verdict: Verdict
    graded_text: bool = False  # the verdict is the task verifier's, on text the agent returned


def judge(returned: Any, grade: Grader | None = None) -> Verdict:
    """The verdict of what the agent returned (module docstring); an `error` verdict when unusable."""
    if isinstance(returned, Verdict):
        return returned
    if isinstance(returned, str) and grade is not None:
        try:
            verdict = grade(returned)
        except Exception as e:  # noqa: BLE001 - a grader's crash is this episode's error, counted
            return Verdict(0.0, Outcome.ERROR, f"grading the agent's answer raised {type(e).__name__}: {e}"[:300])
        if not isinstance(verdict, Verdict):
            return Verdict(0.0, Outcome.ERROR, f"the grader returned {type(verdict).__name__}, not a Verdict")
        return verdict
    if isinstance(returned, (int, float)) and not isinstance(returned, bool) and 0.0 <= float(returned) <= 1.0:
        score = float(returned)
        return Verdict(score, Outcome.CORRECT if score == 1.0 else Outcome.INCORRECT, "the agent's reward")
    return Verdict(0.0, Outcome.ERROR, f"the agent returned {returned!r:.80}, not a Verdict or a float in [0, 1]")


def play_agent(
    gateway: AgentGateway,
    agent: Agent,
    task: Task,
    *,
    timeout_s: float = 300.0,
    grade: Grader | None = None,
    slot: int = 0,
    helpers: Executor | None = None,
) -> AgentResult:
    """Run `agent` on `task` against a fresh episode of `gateway` (opened with `slot`), bounded by
    `timeout_s`; a string it returns is graded by `grade`. `helpers`: the threads the agent's event
    loop runs blocking helpers on (`HelperThreads`); None: a pool of the loop's own."""
    import openai  # the client the agent is given; only an agent episode needs it

    episode = gateway.open_episode(slot)
    box: dict[str, Any] = {}

    async def run() -> None:
        if helpers is not None:
            asyncio.get_running_loop().set_default_executor(helpers)
        # Plain HTTP on localhost: no TLS, so no certificate store to load (40-60 ms a client otherwise).
        http = openai.DefaultAsyncHttpxClient(verify=False)
        async with openai.AsyncOpenAI(
            base_url=gateway.base_url(episode), api_key="rlvr", max_retries=0, http_client=http
        ) as client:
            box["returned"] = await asyncio.wait_for(agent(client, task), timeout_s)

    def thread() -> None:
        try:
            asyncio.run(run())
        except BaseException as e:  # noqa: BLE001 - the agent's failure is this episode's error
            box["error"] = e

    worker = threading.Thread(target=thread, name=f"rlvr-agent-{episode[:8]}", daemon=True)
    worker.start()
    worker.join(timeout_s + 1.0)  # wait_for ends a cooperative agent; a blocking one is abandoned
    calls = tuple(gateway.close_episode(episode))
    if worker.is_alive() or isinstance(box.get("error"), (TimeoutError, asyncio.TimeoutError)):
        verdict = Verdict(0.0, Outcome.ERROR, f"the agent did not finish in {timeout_s:g} s")
    elif "error" in box:
        e = box["error"]
        verdict = Verdict(0.0, Outcome.ERROR, f"the agent raised {type(e).__name__}: {e}"[:300])
    else:
        verdict = judge(box.get("returned"), grade)
    return AgentResult(calls, verdict, isinstance(box.get("returned"), str) and grade is not None)


def agent_episodes(
    result: AgentResult,
    *,
    env_id: str,
    task_id: str,
    group_id: int,
    messages: list[dict[str, Any]],
    metadata: Mapping[str, Any] | None = None,
    grade_truncated: bool = False,
) -> list[Episode]:
    """The episode's segments as `Episode`s, each with the whole reward and the verdict's outcome (the
    agent's verdict is the episode's); an episode whose agent never called the gateway is one empty
    `error` episode, to be counted. Text the agent returned, graded by the task's verifier, is not
    paid when its last model call was cut at max_tokens: the episode is `truncated` with reward 0,
    as a cut turn is in every env, unless `grade_truncated` (a reward the agent computed stands)."""
    verdict = result.verdict
    segs = segments(result.calls)
    truncation = None
    if not segs:
        verdict = verdict if verdict.is_error else Verdict(0.0, Outcome.ERROR, "the agent made no call")
    elif result.graded_text and result.calls[-1].finish_reason is FinishReason.LENGTH and not grade_truncated:
        verdict = Verdict(0.0, Outcome.TRUNCATED, "the last model call was cut at max_tokens", verdict.info)
        truncation = TruncationReason.LENGTH
    out = []
    for k, seg in enumerate(segs or [None]):
        out.append(
            Episode(
                env_id=env_id,
                task_id=task_id,
                group_id=group_id,
                prompt_ids=list(seg.prompt_ids) if seg else [],
                completion_ids=list(seg.completion_ids) if seg else [],
                loss_mask=list(seg.loss_mask) if seg else [],
                logprobs=list(seg.logprobs) if seg else [],
                turn_rewards=[verdict.score],
                outcome=verdict.outcome,
                messages=list(messages),
                finish_reason=seg.finish_reason if seg else None,
                truncation=truncation,
                metadata={
                    **dict(metadata or {}),
                    "segment": k,
                    "segments": len(segs),
                    "calls": list(seg.calls) if seg else [],
                    "turns": len(seg.calls) if seg else 0,
                    "detail": verdict.detail,
                    **({"error": verdict.detail} if verdict.is_error else {}),
                },
                versions=list(seg.versions) if seg and any(v != ENV_VERSION for v in seg.versions) else [],
            )
        )
    return out


def agent_rollout(
    gateway: AgentGateway,
    agent: Agent,
    tasks: Sequence[Task],
    *,
    group_size: int,
    env_id: str = "agent",
    timeout_s: float = 300.0,
    group_id_start: int = 0,
    max_concurrency: int = 256,
    grade: Callable[[Task, str], Verdict] | None = None,
    metadata: Sequence[Mapping[str, Any]] | None = None,
    grade_truncated: bool = False,
) -> list[Group]:
    """`group_size` agent episodes of each task, all played at once (up to `max_concurrency`); a
    string an agent returns is graded by `grade(task, text)`; `metadata[i]` goes into task i's
    episodes."""
    if group_size < 1 or max_concurrency < 1:
        raise ValueError(f"group_size and max_concurrency must be >= 1, got {group_size}, {max_concurrency}")
    helpers = HelperThreads(HELPER_THREADS, thread_name_prefix="rlvr-agent-helpers")
    with ThreadPoolExecutor(max_concurrency, thread_name_prefix="rlvr-agents") as pool:
        futures = [
            [
                pool.submit(
                    play_agent,
                    gateway,
                    agent,
                    task,
                    timeout_s=timeout_s,
                    grade=None if grade is None else functools.partial(grade, task),
                    slot=i * group_size + j,
                    helpers=helpers,
                )
                for j in range(group_size)
            ]
            for i, task in enumerate(tasks)
        ]
        gateway.drive(lambda: all(f.done() for group in futures for f in group))
        results = [[f.result() for f in group] for group in futures]
    helpers.close()
    if gateway.engine_failure is not None:
        raise gateway.engine_failure
    return [
        Group(
            task.task_id,
            group_id_start + i,
            [
                ep
                for r in group
                for ep in agent_episodes(
                    r,
                    env_id=env_id,
                    task_id=task.task_id,
                    group_id=group_id_start + i,
                    messages=task.prompt,
                    metadata=None if metadata is None else metadata[i],
                    grade_truncated=grade_truncated,
                )
            ],
        )
        for i, (task, group) in enumerate(zip(tasks, results))
    ]
