"""`check_env(env)`: Gymnasium's own checker plus rlvr's contract checks.

rlvr's checks: determinism per seed, group clones identical (`options={"task_id": ...}`),
rewards within the declared `reward_range`, the task's known-good answer scores full marks and
its known-bad one zero (multi-turn envs are played with `reference_action()` / `wrong_action()`
until done), and a pickle round trip that steps exactly like the original. Every check runs;
all failures are reported together in one `EnvCheckError`.
"""

from __future__ import annotations

import copy
import math
import pickle
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import gymnasium as gym
from gymnasium.utils.env_checker import check_env as gym_check_env
from gymnasium.utils.env_checker import data_equivalence

from rlvr.envs.core import EnvError, TextEnv
from rlvr.verifiers.verdict import Outcome, Verdict

# Gymnasium warnings that say nothing about the environment itself.
_BENIGN_WARNINGS = (
    "Not able to test alternative render modes",  # an env built without gymnasium.make has no spec
    "is different from the unwrapped version",  # we pass env.unwrapped ourselves
    "No render fps was declared",  # text rendering ("ansi") has no frame rate
)


_ERROR_RETRIES = 3


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    problems: tuple[str, ...] = ()

    def __str__(self) -> str:
        head = f"{'PASS' if self.ok else 'FAIL'}  {self.name}"
        return "\n".join([head, *(f"      - {p}" for p in self.problems)])


class EnvCheckError(EnvError, AssertionError):
    """The environment failed one or more checks; `results` holds every check's result."""

    def __init__(self, name: str, results: list[CheckResult]):
        self.results = results
        failed = [r for r in results if not r.ok]
        lines = [f"{name} failed {len(failed)} of {len(results)} checks:"] + [str(r) for r in failed]
        super().__init__("\n".join(lines))


@dataclass
class _Ctx:
    env: gym.Env
    seeds: Sequence[int]
    group_size: int
    max_steps: int
    rewards: list[float] = field(default_factory=list)  # every reward seen, for the range check

    @property
    def raw(self) -> TextEnv:
        return self.env.unwrapped  # type: ignore[return-value]


def _play(ctx: _Ctx, env: gym.Env, policy: Callable[[], str]) -> tuple[list[float], bool, bool, Verdict | None]:
    """Step `policy()` until the episode ends; the rewards, terminated, truncated, last verdict."""
    rewards: list[float] = []
    for _ in range(ctx.max_steps):
        _, reward, terminated, truncated, info = env.step(policy())
        rewards.append(reward)
        ctx.rewards.append(reward)
        verdict = info.get("verdict")
        if terminated or truncated:
            return rewards, terminated, truncated, verdict
    raise AssertionError(f"the episode did not end within {ctx.max_steps} steps")


def _fresh_copy(env: gym.Env) -> gym.Env:
    """A new env like `env`: made from its spec (as a trainer makes G copies), else deep-copied."""
    if env.spec is not None:
        return gym.make(env.spec)
    return copy.deepcopy(env)


def check_gymnasium(ctx: _Ctx) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gym_check_env(ctx.raw)
    return [
        f"gymnasium warned: {w.message}"
        for w in caught
        if "WARN" in str(w.message) and not any(b in str(w.message) for b in _BENIGN_WARNINGS)
    ]


def check_determinism(ctx: _Ctx) -> list[str]:
    problems = []
    for seed in ctx.seeds:
        obs_a, info_a = ctx.env.reset(seed=seed)
        obs_b, info_b = ctx.env.reset(seed=seed)
        if not data_equivalence(obs_a, obs_b) or info_a.get("task_id") != info_b.get("task_id"):
            problems.append(
                f"seed {seed}: two resets gave different tasks ({info_a.get('task_id')!r}, {info_b.get('task_id')!r})"
            )
        obs_c, info_c = ctx.env.reset(options={"task_id": info_a.get("task_id")})
        if not data_equivalence(obs_a, obs_c):
            problems.append(
                f"seed {seed}: options={{'task_id': {info_a.get('task_id')!r}}} did not rebuild the task the seed gave"
            )
    return problems


def check_group_clones(ctx: _Ctx) -> list[str]:
    obs0, info0 = ctx.env.reset(seed=ctx.seeds[0])
    task_id = info0.get("task_id")
    if task_id is None:
        return ["reset() info has no 'task_id'"]
    problems = []
    for i in range(ctx.group_size):
        clone = _fresh_copy(ctx.env)
        obs, info = clone.reset(seed=10_000 + i, options={"task_id": task_id})
        if not data_equivalence(obs, obs0) or info.get("task_id") != task_id:
            problems.append(f"copy {i} reset with task_id {task_id!r} gave a different observation or task id")
        clone.close()
    return problems


def _final(ctx: _Ctx, label: str, policy_name: str, want: float, want_correct: bool) -> list[str]:
    problems = []
    for seed in ctx.seeds:
        for _ in range(_ERROR_RETRIES):
            ctx.env.reset(seed=seed)
            rewards, terminated, truncated, verdict = _play(ctx, ctx.env, getattr(ctx.raw, policy_name))
            outcome = verdict.outcome if isinstance(verdict, Verdict) else None
            if outcome is not Outcome.ERROR:
                break  # a grader error (e.g. a time-out on a busy machine) is no verdict: play again
        if not math.isclose(rewards[-1], want, abs_tol=1e-9):
            detail = f" ({verdict.detail})" if isinstance(verdict, Verdict) and verdict.detail else ""
            problems.append(f"seed {seed}: {label} answer ended with reward {rewards[-1]}, expected {want}{detail}")
        if want_correct and (outcome is not Outcome.CORRECT or not terminated):
            problems.append(
                f"seed {seed}: {label} answer ended with outcome {outcome} "
                f"(terminated={terminated}, truncated={truncated}), expected correct"
            )
        if not want_correct and outcome is Outcome.CORRECT:
            problems.append(f"seed {seed}: {label} answer was judged correct")
    return problems


def check_known_good(ctx: _Ctx) -> list[str]:
    return _final(ctx, "known-good", "reference_action", ctx.raw.reward_range[1], True)


def check_known_bad(ctx: _Ctx) -> list[str]:
    return _final(ctx, "known-bad", "wrong_action", ctx.raw.reward_range[0], False)


def check_reward_range(ctx: _Ctx) -> list[str]:
    """Random and empty answers must give in-range rewards and a `Verdict`; then every reward seen
    during all the checks is tested against `reward_range`."""
    problems = []
    ctx.env.action_space.seed(0)
    for seed in ctx.seeds:
        for label, policy in (("random", ctx.env.action_space.sample), ("empty", lambda: "")):
            ctx.env.reset(seed=seed)
            for _ in range(ctx.max_steps):
                _, reward, terminated, truncated, info = ctx.env.step(policy())
                ctx.rewards.append(reward)
                if not isinstance(info.get("verdict"), Verdict):
                    problems.append(f"seed {seed}: step info has no Verdict under 'verdict' ({label} answer)")
                if not isinstance(reward, float):
                    problems.append(f"seed {seed}: reward is {type(reward).__name__}, not float")
                if terminated or truncated:
                    break
    lo, hi = ctx.raw.reward_range
    bad = sorted({r for r in ctx.rewards if not (lo - 1e-9 <= r <= hi + 1e-9)})
    if bad:
        problems.append(f"rewards {bad[:5]} are outside reward_range {ctx.raw.reward_range}")
    return problems


def check_pickle(ctx: _Ctx) -> list[str]:
    for _ in range(_ERROR_RETRIES):
        ctx.env.reset(seed=ctx.seeds[0])
        clone = pickle.loads(pickle.dumps(ctx.env))
        action = ctx.raw.reference_action()
        a, b = ctx.env.step(action), clone.step(action)
        va, vb = a[4].get("verdict"), b[4].get("verdict")
        if Outcome.ERROR not in (getattr(va, "outcome", None), getattr(vb, "outcome", None)):
            break  # else a grader error (a time-out on a busy machine) says nothing: step again
    pickle.dumps(a[4])  # the step info (verdict included) must be plain picklable data too
    same = (
        data_equivalence(a[:4], b[:4])
        and getattr(va, "score", None) == getattr(vb, "score", None)
        and getattr(va, "outcome", None) == getattr(vb, "outcome", None)
    )
    return [] if same else [f"the unpickled copy stepped differently: {a[:4]} vs {b[:4]}"]


CHECKS: list[tuple[str, Callable[[_Ctx], list[str]]]] = [
    ("gymnasium env_checker", check_gymnasium),
    ("determinism per seed", check_determinism),
    ("group clones identical", check_group_clones),
    ("known-good answer gets the max reward", check_known_good),
    ("known-bad answer gets the min reward", check_known_bad),
    ("rewards within reward_range", check_reward_range),
    ("picklable", check_pickle),
]


def _basic(env: gym.Env) -> list[str]:
    raw = env.unwrapped
    if not isinstance(raw, TextEnv):
        return [f"{type(raw).__name__} is not a TextEnv"]
    lo, hi = raw.reward_range
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        return [f"reward_range {raw.reward_range} must be finite with min < max"]
    return []


def check_env(
    env: gym.Env,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    group_size: int = 4,
    max_steps: int = 200,
    raise_on_failure: bool = True,
) -> list[CheckResult]:
    """Run every check on `env` (made with `gymnasium.make`/`envs.make`, or a bare `TextEnv`).
    Returns the results; raises `EnvCheckError` listing all failures when `raise_on_failure`."""
    if not seeds or group_size < 1 or max_steps < 1:
        raise ValueError("check_env needs at least one seed, group_size >= 1 and max_steps >= 1")
    name = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    basic = _basic(env)
    results = [CheckResult("is a TextEnv with a finite reward_range", not basic, tuple(basic))]
    if not basic:
        ctx = _Ctx(env, tuple(seeds), group_size, max_steps)
        for label, fn in CHECKS:
            try:
                with warnings.catch_warnings():
                    # The passive checker's advice repeats what check_gymnasium already reports.
                    warnings.filterwarnings("ignore", message=".*WARN:")
                    problems = fn(ctx)
            except Exception as e:  # noqa: BLE001 - a crash inside a check is that check's failure
                where = traceback.extract_tb(e.__traceback__)[-1]
                problems = [f"raised {type(e).__name__}: {e} (at {where.filename}:{where.lineno})"]
            results.append(CheckResult(label, not problems, tuple(problems)))
    if raise_on_failure and not all(r.ok for r in results):
        raise EnvCheckError(name, results)
    return results
