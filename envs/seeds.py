"""Reset seeds: the range tasks are drawn from, and where the held-out evaluation tasks start.

Rules, each defined here once because several modules must agree on it:
- `SEED_SPACE`: reset seeds (and so procedural task ids) are integers in [0, SEED_SPACE), the
  range a task source draws from when reset without a seed, and the range training draws from.
- `HELD_OUT_SEED_START`: held-out tasks are the seeds HELD_OUT_SEED_START, + 1, ...; training
  draws none of them (`rlvr train`'s `eval_seed_start` defaults to it), and the built-in tiny
  model was pretrained on seeds below it only, so its held-out accuracy measures generalisation.
"""

from __future__ import annotations

SEED_SPACE = 2**31 - 1
HELD_OUT_SEED_START = 1_000_000
