"""Environments for tests/test_ray_rollout.py, made inside Ray rollout workers by module name
(`ray_test_envs:test/DiesOnce-v0`)."""
from __future__ import annotations

import os
from pathlib import Path

import gymnasium

from envs.arithmetic import ArithmeticEnv


class DiesOnce(ArithmeticEnv):
    """Arithmetic, except that the first reset onto `seed` anywhere ends its whole process at once,
    as a worker killed mid-rollout would: `marker` (a file) records that it happened. A `marker`
    that is a directory means every such reset ends its process."""

    def __init__(self, marker: str = "", seed: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.marker, self.fatal_seed = Path(marker), seed

    def reset(self, *, seed=None, options=None):
        if seed == self.fatal_seed and self.marker.is_dir():
            os._exit(1)
        if seed == self.fatal_seed and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os._exit(1)
        return super().reset(seed=seed, options=options)


gymnasium.register(id="test/DiesOnce-v0", entry_point=DiesOnce)
