"""`AgentEnv` (`rlvr/Agent-v0`): an agent program people already run, as a Gymnasium environment.

The user writes the agent they would write anyway, against the plain `openai` client:

    async def run(client, task):  # client: openai.AsyncOpenAI; task: envs.Task (task.prompt: messages)
        ...                        # any number of calls, any loop, its own tools
        return answer_text         # or a float in [0, 1], or a Verdict

and trains it with `rlvr train --env rlvr/Agent-v0 --env-arg agent=my_agent.py:run`. The tasks come
from any single-step rlvr environment (`tasks`, default `rlvr/Arithmetic-v0`, with `task_args`):
its seeds and task ids select tasks, and its verifier grades an answer the agent returns as text.

How it plays. Every caller of `envs.rollout.rollout` (`rlvr train` on any algorithm, `rlvr eval`,
a Ray rollout worker) finds `kind == EnvKind.AGENT` and hands the call to `AgentEnv.play`: it starts an
agent gateway (`envs.agent.gateway`) over the rollout's own sampler, with the rollout's sampling
settings as the defaults of every call, runs G agents per task at once, each with a client whose
`base_url` is its episode's route, and returns each episode's token-exact segments
(`envs.agent.play`). So `--max-staleness K` works (the gateway serves whatever version the sampler
holds, and every token records it), and each Ray rollout worker serves its own gateway beside its
sampler.

As a Gymnasium env (`gymnasium.make`, `check_env`): `reset` gives a task's opening messages, and
`step(text)` grades `text` as the agent's final answer with the task environment's verifier (what
a one-call agent returning the model's answer scores): the contract every rlvr env meets, so
`rlvr check` works. It is not how the agent plays: a program, not a turn loop, drives the calls.

`agent` is an async function, or where to find one: "package.module:name", or "path/to/file.py:name"
(a file, so that a script beside the command needs no package). The default, `one_call`, asks
once and returns the answer. Ids a user registers may fix it: `gymnasium.register("me/Plan-v0",
entry_point="rlvr.envs.agent.env:AgentEnv", kwargs={"agent": "me.agents:plan"})`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from rlvr.envs.agent.gateway import AgentGateway
from rlvr.envs.agent.play import Agent, agent_rollout
from rlvr.envs.core import EnvKind, SingleTurnEnv, Task
from rlvr.envs.registry import EnvArgumentError, make
from rlvr.envs.rollout.episodes import episode_metadata
from rlvr.envs.rollout.group import Group
from rlvr.envs.rollout.request import RolloutRequest
from rlvr.envs.sampler import Sampler, Tokenizer
from rlvr.envs.tools import get_parser
from rlvr.verifiers.verdict import Verdict


async def one_call(client: Any, task: Task) -> str:
    """The plainest agent: the task's messages, one answer (graded by the task's verifier)."""
    answer = await client.chat.completions.create(model="policy", messages=list(task.prompt))
    return answer.choices[0].message.content or ""


def load_agent(agent: Agent | str | None) -> Agent:
    """`agent` itself, or the async function "module:name" / "file.py:name" names; EnvArgumentError if none."""
    if agent is None:
        return one_call
    if isinstance(agent, str):
        where, sep, name = agent.rpartition(":")
        if not sep or not where or not name.isidentifier():
            raise EnvArgumentError(f"agent must be 'module:function' or 'file.py:function', got {agent!r}")
        try:
            if where.endswith(".py"):
                module = _load_file(Path(where))
            else:
                module = importlib.import_module(where)
            agent = getattr(module, name)
        except Exception as e:  # noqa: BLE001 - any failure to load is one line about this argument
            raise EnvArgumentError(f"agent {agent!r} could not be loaded: {type(e).__name__}: {e}") from None
    if not inspect.iscoroutinefunction(agent):
        raise EnvArgumentError(f"agent must be an async function, async def run(client, task); got {agent!r:.80}")
    return agent


def _load_file(path: Path) -> Any:
    """The module of a file, loaded once (a rollout makes its env anew each call, and a module's
    top level should not run each time): kept in `sys.modules` under a name made from its path."""
    if not path.is_file():
        raise FileNotFoundError(f"no file {path}")
    path = path.resolve()
    name = f"rlvr_agent_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def _plain(value: Any) -> Any:
    """`value` if it is JSON data (episodes are logged), else its repr (an agent passed as a function)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


class AgentEnv(SingleTurnEnv):
    """An agent program (`async def run(client, task)`, the plain `openai` client) trained on a task
    environment's tasks; `rollout` plays it through an OpenAI-compatible gateway."""

    kind: ClassVar[EnvKind] = EnvKind.AGENT
    version = "0"

    def __init__(
        self,
        agent: Agent | str | None = None,
        tasks: str = "rlvr/Arithmetic-v0",
        task_args: Mapping[str, Any] | None = None,
        timeout_s: float = 300.0,
        max_concurrency: int = 256,
        tool_format: str = "hermes",
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if not timeout_s > 0 or max_concurrency < 1:
            raise ValueError(f"timeout_s must be > 0 and max_concurrency >= 1, got {timeout_s}, {max_concurrency}")
        self.agent = load_agent(agent)
        self.timeout_s, self.max_concurrency = float(timeout_s), int(max_concurrency)
        self.tool_format = get_parser(tool_format).name  # how the model writes tool calls (envs.tools)
        self.task_env = make(tasks, disable_env_checker=True, **dict(task_args or {}))
        inner = self.task_env.unwrapped
        if not isinstance(inner, SingleTurnEnv) or inner.kind != EnvKind.SINGLE_STEP:
            self.task_env.close()
            raise EnvArgumentError(f"tasks must be a single-step rlvr environment (its verifier grades), got {tasks!r}")
        self.reward_range = inner.reward_range
        self.verifier_version = getattr(inner, "verifier_version", None)

    # ---- the Gymnasium contract: the task environment's tasks, its verifier on a final answer --------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.task_env.reset(seed=seed, options=options)
        out = super().reset(seed=seed, options={"task": self.task_env.unwrapped.task})
        self._seed_if_pending()  # a seeded reset makes the generator, as Gymnasium's checker expects
        return out

    def task_ids(self):
        return self.task_env.unwrapped.task_ids()  # the task environment's list, if it has one

    def verify(self, task: Task, response: str) -> Verdict:
        return self.task_env.unwrapped.verify(task, response)

    def close(self) -> None:
        self.task_env.close()
        super().close()

    # ---- what `envs.rollout.rollout` calls ----------------------------------------------------------
    def play(self, request: RolloutRequest, sampler: Sampler, tokenizer: Tokenizer) -> list[Group]:
        """The request's groups (its `max_length` resolved by the rollout): G agent episodes for each of
        its tasks, in order; calls sampled by `sampler`, their settings defaulting to the request's."""
        tasks, metadata = [], []
        sampling, max_length = request.sampling, request.max_length
        settings = dataclasses.asdict(sampling)
        kwargs = {k: _plain(v) for k, v in request.env_args.items()}
        for task_id, seed in request.starts():
            self.reset(seed=seed, options=None if task_id is None else {"task_id": task_id})
            tasks.append(self.task)
            metadata.append(
                episode_metadata(
                    self.version, kwargs, seed, self.verifier_version, request.model_info, settings, max_length
                )
            )
        gateway = AgentGateway(
            sampler, tokenizer, defaults=sampling, max_length=max_length, tool_format=self.tool_format
        )
        gateway.start(engine_thread=False)  # the engine runs in this thread (envs.agent.engine)
        try:
            return agent_rollout(
                gateway,
                self.agent,
                tasks,
                group_size=request.group_size,
                env_id=request.env,
                timeout_s=self.timeout_s,
                group_id_start=request.group_id_start,
                max_concurrency=self.max_concurrency,
                grade=self.verify,
                metadata=metadata,
                grade_truncated=self.grade_truncated,
            )
        finally:
            gateway.close()
