"""rlvr's environments and rewards in trainers people already use: TRL and verl.

Each row handed to another trainer names its task by a `TaskKey` (the environment's id, arguments and
version, the task's id, and a digest of its prompt), and the reward rebuilds that environment, resets it
onto that task and lets the environment's own verifier judge the completion: any single-step environment
works, not only those whose answer is a short string. Multi-turn and agent environments are not served
here (one completion per prompt is all TRL's reward functions and verl's `compute_score` see): they raise
an `AdapterError` saying so.

- `keys`: `TaskKey`, `AdapterError`, and `open_env` (an environment the adapters can serve);
- `rows`: `task_rows`, the tasks of an environment as `TaskRow`s (a training set: reset seeds from 0, or
  every problem of a listed environment);
- `scoring`: `TaskScorer`, a completion on a `TaskKey` scored into a typed `Score`;
- `trl`: `trl_dataset` and `EnvReward`, what `trl.GRPOTrainer` takes as `train_dataset` and `reward_funcs`;
- `verl`: `verl_record` (verl's RL data format) and `compute_score`, verl's custom reward function;
- `export`: rows written to a Parquet file in either format (`rlvr export`).

Nothing here imports torch, TRL or verl: `datasets` and `pyarrow` are imported when used. Nothing is
imported here either: `rlvr.envs.adapters.verl` is loaded by verl from its file path."""
