"""Experiment trackers (`--report-to`, as TRL names it): where a run's per-step metrics, its config
(once) and its sample tables go besides `metrics.jsonl` and `samples.jsonl`.

One class per tracker, each with one job: `tensorboard_tracker` (the default; torch's
SummaryWriter), `wandb_tracker` and `trackio_tracker` (optional packages). They meet the `Tracker`
protocol (`protocol`); `registry` names them, checks that the chosen ones are installed before
anything loads, and opens them. This package's `__init__` imports nothing: `trainers.config` reads
the names from `names` without loading torch or a tracker."""
