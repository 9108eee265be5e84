"""Run a sampler in environments: G episodes per task, token-exact, returned as groups.

`rollout(request, sampler, tokenizer)` is the one entry: a `RolloutRequest` (the environment, its tasks
by reset seed or by id, G, the sampling settings) played by a sampler, as one `Group` of `Episode`s per
task. The modules, each with its part of the rules in its docstring:
- `request`, `group`: what a rollout is asked (`RolloutRequest`) and what it returns (`Group`);
- `entry`: `rollout` itself: the request checked, an agent env handed the whole call, a schedule picked;
- `plan`: one call's settings as the schedules read them (`RolloutPlan`);
- `opening`: each group's environments, reset onto its task;
- `episode_run`: one episode in progress and one turn of it (token exactness, outcomes);
- `per_episode`, `lockstep`: the two schedules, the same episodes;
- `sampler_calls`: each turn's seed, and a `generate` checked for its shape;
- `episodes`: finished runs as `Episode`s, with the metadata every rollout records.
How fast, against the raw sampler: benchmarks/README.md (rollout overhead, per-episode multi-turn
rollouts)."""

from rlvr.envs.rollout.entry import rollout
from rlvr.envs.rollout.group import Group
from rlvr.envs.rollout.request import RolloutRequest

__all__ = ["Group", "RolloutRequest", "rollout"]
