"""Experiment trackers (`--report-to`): where a run's metrics, config and sample tables go besides its
JSONL files. `names` (a leaf: the names the setting takes), `opening` (the `Tracker` protocol, the
check that a tracker is installed, and opening them), one module per tracker (`tensorboard`, `wandb`,
`trackio`) and `run` (the tracker run a resumed run continues)."""
