"""Joining the Ray cluster, for every part of `rlvr train --ray` that starts actors: the rollout
workers (`trainers.samplers.ray_pool`) and the data-parallel trainer ranks (`trainers.ray_trainer`).
Imports Ray only when called."""

from __future__ import annotations


def start_ray(address: str | None) -> None:
    """Join the cluster at `address` ("auto": the one this machine belongs to), or start a local one
    sized to the machine; a cluster already joined by this process is kept."""
    import ray

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(include_dashboard=False, log_to_driver=False)
