"""Evaluation maths and the summary of an evaluation run: pure functions over episodes.

pass@k is the unbiased estimator of Chen et al. (2021), computed per task from its n valid
samples of which c are correct, `1 - C(n-c, k) / C(n, k)`, then averaged over tasks. Its 95%
confidence interval (and the mean reward's) is a percentile bootstrap over tasks: tasks are
resampled with replacement (`resamples` times, a fixed seed, so the interval is reproducible);
it reflects the spread across tasks, the dominant source of error, and stays inside [0, 1],
unlike a normal approximation on few tasks. `error` episodes are no samples at all: they are
counted, and a task's n is its number of valid episodes; tasks with fewer than k valid samples
are left out of pass@k (their number is reported).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from rlvr.envs.episode import Episode, TruncationReason
from rlvr.envs.eval_sampling import describe
from rlvr.verifiers.verdict import Outcome

CONFIDENCE = 0.95
CONTEXT_CUT_WARN_RATE = 0.2  # warn when more than this share of episodes is cut by the context


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n, c of them
    correct, is correct: `1 - C(n-c, k) / C(n, k)`, as a stable product."""
    for name, v in (("n", n), ("c", c), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def bootstrap_ci(
    values: Sequence[float], *, confidence: float = CONFIDENCE, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, low, high): the mean of per-task `values` and its percentile-bootstrap interval."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or len(x) == 0:
        raise ValueError("need a non-empty 1-d sequence of per-task values")
    if not 0 < confidence < 1 or resamples < 1:
        raise ValueError(f"bad confidence {confidence} or resamples {resamples}")
    means = x[np.random.default_rng(seed).integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(x.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def _by_task(episodes: Iterable[Episode]) -> dict[int, list[Episode]]:
    tasks: dict[int, list[Episode]] = defaultdict(list)
    for ep in episodes:
        if ep.segment == 0:  # an agent episode once, whatever its segments
            tasks[ep.group_id].append(ep)
    return dict(tasks)


def pass_at_k_summary(episodes: Iterable[Episode], ks: Sequence[int], *, seed: int = 0) -> dict[str, dict[str, Any]]:
    """For each k: the task-averaged estimate, its bootstrap interval and how many tasks count."""
    counts = [
        (len(valid), sum(ep.outcome is Outcome.CORRECT for ep in valid))
        for valid in ([ep for ep in g if not ep.is_error] for g in _by_task(episodes).values())
    ]
    out = {}
    for k in ks:
        per_task = [pass_at_k(n, c, k) for n, c in counts if n >= k]
        if not per_task:
            out[str(k)] = {"estimate": None, "ci_low": None, "ci_high": None, "tasks": 0}
            continue
        est, lo, hi = bootstrap_ci(per_task, seed=seed)
        out[str(k)] = {"estimate": est, "ci_low": lo, "ci_high": hi, "tasks": len(per_task)}
    return out


def summarize(
    episodes: Sequence[Episode],
    ks: Sequence[int],
    *,
    env_id: str,
    env_args: dict[str, Any],
    model: str,
    seconds: float | None = None,
    tokens: int | None = None,
    seed: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    """The `summary.json` of an evaluation. `tokens` and `seconds` are the model tokens generated
    and the time spent in this run (a resumed run only times what it generated itself). An agent
    episode of several segments counts once (`Episode.segment`)."""
    episodes = [ep for ep in episodes if ep.segment == 0]
    tasks = _by_task(episodes)
    valid = [ep for ep in episodes if not ep.is_error]
    outcomes = Counter(ep.outcome for ep in episodes)
    task_rewards = [
        np.mean([ep.reward for ep in g if not ep.is_error]) for g in tasks.values() if any(not ep.is_error for ep in g)
    ]
    reward = (
        dict(zip(("estimate", "ci_low", "ci_high"), bootstrap_ci(task_rewards, seed=seed))) if task_rewards else None
    )
    return {
        "env": env_id,
        "env_args": env_args,
        "model": model,
        **extra,
        "tasks": len(tasks),
        "episodes": len(episodes),
        "valid_episodes": len(valid),
        "pass_at_k": pass_at_k_summary(episodes, ks, seed=seed),
        "mean_reward": reward,
        "outcomes": {str(o): outcomes[o] for o in Outcome},  # str keys: plain JSON data
        "truncation": truncation_counts(episodes),
        "warnings": [w for w in [context_cut_warning(episodes)] if w],
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_second": tokens / seconds if tokens is not None and seconds else None,
        "confidence_interval": f"{CONFIDENCE:.0%} percentile bootstrap over tasks, 2000 resamples, seed {seed}",
    }


def format_table(summary: dict[str, Any]) -> str:
    """The summary as a plain-text table."""

    def fmt(stat: dict[str, Any] | None) -> str:
        if not stat or stat.get("estimate") is None:
            return "n/a"
        return f"{stat['estimate']:.3f}  [{stat['ci_low']:.3f}, {stat['ci_high']:.3f}]"

    # an environment with a list (`problems`: how many it lists) is evaluated once per problem: say how many of them
    tasks = f"{summary['tasks']} of {summary['problems']} problems" if summary.get("problems") else summary["tasks"]
    rows = [
        ("env", summary["env"] + (f" {summary['env_args']}" if summary["env_args"] else "")),
        ("model", str(summary["model"])),
        ("tasks / episodes", f"{tasks} / {summary['episodes']} ({summary['valid_episodes']} valid)"),
    ]
    if summary.get("sampling"):  # what produced the score: greedy and sampled pass@1 differ (envs.eval_sampling)
        rows.append(("sampling", describe(summary["sampling"])))
    rows += [
        (f"pass@{k}", fmt(stat) + (f"  ({stat['tasks']} tasks)" if stat["tasks"] != summary["tasks"] else ""))
        for k, stat in summary["pass_at_k"].items()
    ]
    rows.append(("mean reward", fmt(summary["mean_reward"])))
    rows.append(("outcomes", ", ".join(f"{name} {count}" for name, count in summary["outcomes"].items())))
    cuts = summary.get("truncation")  # absent from summaries written before it existed
    if cuts and any(cuts.values()):
        rows.append(("truncated by", ", ".join(f"{name} {count}" for name, count in cuts.items())))
    tps = summary.get("tokens_per_second")
    rows.append(
        (
            "tokens/s",
            "n/a" if tps is None else f"{tps:,.0f} ({summary['tokens']:,} tokens in {summary['seconds']:.1f} s)",
        )
    )
    width = max(len(name) for name, _ in rows)
    return "\n".join([f"{name:<{width}}  {value}" for name, value in rows] + list(summary.get("warnings") or []))


def truncation_counts(episodes: Iterable[Episode]) -> dict[str, int]:
    """How many episodes were cut, by reason (`turns`, `context`, `length`), every reason listed."""
    counts = Counter(ep.truncation for ep in episodes if ep.outcome is Outcome.TRUNCATED)
    return {str(r): counts[r] for r in TruncationReason}


def context_cut_warning(
    episodes: Sequence[Episode],
    context_length: int | None = None,
    max_tokens: int | None = None,
    threshold: float = CONTEXT_CUT_WARN_RATE,
) -> str | None:
    """A warning when more than `threshold` of the (non-error) episodes were cut because the
    context was full, naming the prompt lengths, the context length and what to change; else None.
    `context_length` and `max_tokens` default to what the episodes recorded (`metadata`)."""
    valid = [ep for ep in episodes if not ep.is_error]
    cut = [ep for ep in valid if ep.truncation is TruncationReason.CONTEXT]
    if not valid or len(cut) <= threshold * len(valid):
        return None
    if context_length is None:
        context_length = next((ep.metadata["max_length"] for ep in cut if ep.metadata.get("max_length")), None)
    if max_tokens is None:
        max_tokens = next(
            (
                ep.metadata["sampling"]["max_tokens"]
                for ep in cut
                if (ep.metadata.get("sampling") or {}).get("max_tokens")
            ),
            None,
        )
    prompts = [len(ep.prompt_ids) for ep in valid]
    reached = [len(ep.prompt_ids) + len(ep.completion_ids) for ep in cut]
    budget = f" plus max_tokens {max_tokens} per turn" if max_tokens else ""
    context = f"{context_length} tokens" if context_length else "unknown"
    return (
        f"warning: {len(cut)} of {len(valid)} episodes ({len(cut) / len(valid):.0%}) were cut because they did "
        f"not fit in the context: prompts have {int(np.median(prompts))} tokens (median; max {max(prompts)}), "
        f"cut episodes reached {int(np.median(reached))} (median){budget}, and the model's context length "
        f"is {context}. Use shorter prompts (or fewer turns), a model with a longer context, or a smaller "
        f"max_tokens."
    )
