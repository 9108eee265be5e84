"""Sample completions of a training run: what the model writes, shown on the console every
`sample_every` steps (issue 32), appended to `OUT/samples.jsonl` and logged to the trackers as a
table (issue 31).

Which episodes: from one group of the step, the first (lowest group id) whose rewards differ,
else the first group; its best episode (highest reward, the first on a tie) and its worst (lowest
reward, the last on a tie). A group with a reward spread is the one the update learns from, and
its best and worst show what the step pushes toward and away from. Error episodes are left out
while any episode is valid (an error is no answer of the model's); a step of errors alone shows
its first error. An agent episode of several segments (`Episode.segment`) is shown by its last,
the conversation that gave its answer. Chosen by group id, never by chance: a resumed run shows
the same samples.

A sample's text is the tokenizer's decoding of the exact token ids (special tokens kept, as
`rlvr eval`'s episode lines): the file holds what the model saw and wrote. The console line
shortens it: the prompt's last characters and the completion's first, special tokens dropped,
line breaks written `\\n`, so each sample is one line of plain text.

`policy_version` is the policy that sampled the completion: the oldest version among its model
tokens when the sampler tracks versions (asynchronous training), else the version the trainer gave
(the sampler's weights when the step sampled)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

PROMPT_TAIL = 60  # characters of the prompt's end shown on the console
COMPLETION_HEAD = 160  # characters of the completion's start shown on the console
COLUMNS = ("step", "policy_version", "rank", "reward", "outcome", "task_id", "prompt", "completion")


@dataclass(frozen=True)
class Sample:
    step: int
    policy_version: int
    rank: str  # "best" or "worst" of its group
    reward: float
    outcome: str
    task_id: str
    group_id: int
    prompt: str
    completion: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def row(self) -> list[Any]:
        """Its values in `COLUMNS` order (a tracker's table row)."""
        return [getattr(self, c) for c in COLUMNS]


def pick(episodes: Sequence[Any]) -> list[tuple[str, Any]]:
    """(rank, episode) pairs to show: the best and the worst of the chosen group (see the module
    docstring); one pair when the group has one episode; none when there are no episodes."""
    last = [ep for ep in episodes if ep.segment == int(ep.metadata.get("segments", 1)) - 1]
    valid = [ep for ep in last if not ep.is_error]
    pool = valid or list(episodes)[:1]
    if not pool:
        return []
    groups: dict[int, list[Any]] = {}
    for ep in pool:
        groups.setdefault(ep.group_id, []).append(ep)
    ordered = [groups[g] for g in sorted(groups)]
    group = next((g for g in ordered if len({ep.reward for ep in g}) > 1), ordered[0])
    best = max(group, key=lambda ep: ep.reward)  # max/min keep the first of equals
    worst = min(reversed(group), key=lambda ep: ep.reward)  # the last of equals
    return [("best", best)] if best is worst else [("best", best), ("worst", worst)]


def policy_version(episode: Any, fallback: int) -> int:
    """The oldest policy version among the episode's model tokens, or `fallback` untracked."""
    tracked = [v for v, m in zip(episode.versions, episode.loss_mask) if m and v >= 0]
    return min(tracked) if tracked else fallback


def samples_of(step: int, episodes: Sequence[Any], decode, version: int) -> list[Sample]:
    """The step's samples; `decode(ids) -> str` is the tokenizer's, `version` the policy version
    the sampler held when the step sampled (for a sampler that does not track versions)."""
    return [
        Sample(
            step=step,
            policy_version=policy_version(ep, version),
            rank=rank,
            reward=float(ep.reward),
            outcome=str(ep.outcome),
            task_id=str(ep.task_id),
            group_id=int(ep.group_id),
            prompt=decode(list(ep.prompt_ids)),
            completion=decode(list(ep.completion_ids)),
        )
        for rank, ep in pick(episodes)
    ]


def console_lines(samples: Sequence[Sample], strip=lambda text: text) -> list[str]:
    """Plain lines for the console: a header naming the step, the policy version and the task,
    then one line per sample. `strip(text)` drops special tokens (the tokenizer's)."""
    if not samples:
        return []
    first = samples[0]
    header = f"samples at step {first.step} (policy version {first.policy_version}, task {first.task_id})"
    if len(samples) > 1 and len({s.reward for s in samples}) == 1:  # the chosen group is the first with a spread
        header += ", all rewards equal in every group (nothing to learn from this step)"
    lines = [header + ":"]
    for s in samples:
        prompt = _one_line(strip(s.prompt).strip())
        completion = _one_line(strip(s.completion).strip())
        if len(prompt) > PROMPT_TAIL:
            prompt = "..." + prompt[-PROMPT_TAIL:]
        if len(completion) > COMPLETION_HEAD:
            completion = completion[:COMPLETION_HEAD] + "..."
        lines.append(f"  {s.rank:<5} reward {s.reward:.3f} {s.outcome}: {prompt} => {completion}")
    return lines


def special_token_stripper(tokenizer: Any) -> Callable[[str], str]:
    """A function dropping the tokenizer's special tokens (`<|im_start|>`, `<|im_end|>`, ...)
    from a text: those marked special among its added tokens, and its named ones."""
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    special = {t.content for t in added.values() if getattr(t, "special", False)}
    special |= set(getattr(tokenizer, "all_special_tokens", []) or [])
    if not special:
        return lambda text: text
    pattern = re.compile("|".join(re.escape(t) for t in sorted(special, key=len, reverse=True)))
    return lambda text: pattern.sub("", text)


def _one_line(text: str) -> str:
    return text.replace("\r", "").replace("\n", "\\n")
