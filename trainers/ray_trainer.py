"""Data-parallel trainer ranks on Ray (`rlvr train --ray --trainer-ranks N`).

The driver (the `Trainer`'s process) is rank 0; ranks 1 .. N-1 are Ray actors, each with its own
copy of the trainable models (policy, value head or critic: no reference model, whose logprobs
come with the step's tensors) and of the optimizer. At the start every rank takes rank 0's
weights (a value head's random start, a LoRA adapter's) and optimizer state (a resumed run's).
Each step the driver puts the step's tensors (`StepTensors`, plain data) into the object store
once; every rank runs `trainers.update.run_update` on them with the same shuffle seed and the
driver's learning rates, backwarding its share of each minibatch; the ranks sum their gradients
(`trainers.data_parallel`) and take the same optimizer step, so they stay copies of rank 0, whose
models the sampler sync and the checkpoints read as before.

What the ranks share is the update (forward and backward, over every epoch). The step's no-grad
passes (old and reference logprobs, values) stay on rank 0.

A rank that dies fails the step with `TrainerRankError` (the last checkpoint stands: `--resume`).
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any

import torch

from rlvr.sandbox.ray_pool import kill_actors
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.data_parallel import RankAddress, RankGroup, TrainerRankError, backend_for, rendezvous
from rlvr.trainers.device import model_device
from rlvr.trainers.interrupt import ignore_in_worker
from rlvr.trainers.model_set import Models, build_models
from rlvr.trainers.optimizer import build_optimizer
from rlvr.trainers.precision import MasterWeightAdamW
from rlvr.trainers.ray_cluster import start_ray
from rlvr.trainers.update import run_update, trainable_parameters


def start_trainer_ranks(
    config: TrainConfig, algo: Any, models: Models, optimizer: torch.optim.Optimizer, resume_from: Path | None
) -> RayTrainerRanks | None:
    """Data-parallel ranks 1 .. N-1 on Ray, holding this process's weights and optimizer state;
    None for one rank."""
    if config.trainer_ranks < 2:
        return None
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"--trainer-ranks needs Ray ({exc}): pip install 'rlvr[ray]'") from None
    return RayTrainerRanks(
        config.to_dict(), algo, models, optimizer, config.trainer_ranks, resume_from, address=config.ray_address
    )


class TrainerRank:
    """The actor: rank `rank`'s models and optimizer, built from the run's settings."""

    def __init__(self, settings: dict[str, Any], algo: Any, resume_from: str | None, device: str):
        # rank 0's settings and resolved algorithm, checked there (this rank may be on another machine)
        self.config = TrainConfig.from_dict({**settings, "device": device})
        self.algo = algo
        ignore_in_worker()  # a terminal's Ctrl-C: the driver saves and ends this rank (trainers.interrupt)
        if self.config.threads:
            torch.set_num_threads(self.config.threads)
        # no reference: its logprobs arrive with the step's tensors
        self.models = build_models(
            self.config, False, algo.needs_value_head, Path(resume_from) if resume_from else None
        )
        self.optimizer = build_optimizer(self.config, self.models)
        self.group: RankGroup | None = None

    def join(self, address: RankAddress, rank: int) -> None:
        self.group = RankGroup(address, rank)

    def start(self, optimizer_state: dict | None) -> None:
        self.group.broadcast_(trainable_parameters(self.models))
        if isinstance(self.optimizer, MasterWeightAdamW):  # its float32 copies were made before
            self.optimizer.reload_masters()
        if optimizer_state is not None:
            self.optimizer.load_state_dict(optimizer_state)

    def update(self, tensors: Any, shuffle_seed: int, lrs: list[float]) -> None:
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        try:
            run_update(self.models, self.optimizer, self.algo, self.config, tensors, shuffle_seed, self.group)
        except BaseException:
            # Leave the group, so the other ranks' collectives fail now instead of at their timeout;
            # this rank is out of step for good.
            self.group.close()
            raise

    def weights(self) -> list[torch.Tensor]:
        """The trainable parameters, for tests: they must equal rank 0's."""
        return [p.detach().cpu().clone() for p in trainable_parameters(self.models)]

    def pid(self) -> int:
        return os.getpid()


class RayTrainerRanks:
    """Rank 0's side: starts ranks 1 .. `ranks - 1` and keeps them in step with `update`."""

    def __init__(
        self,
        settings: dict[str, Any],
        algo: Any,
        models: Any,
        optimizer: torch.optim.Optimizer,
        ranks: int,
        resume_from: Path | None,
        *,
        address: str | None = None,
    ):
        import ray

        if ranks < 2:
            raise ValueError(f"data-parallel training needs >= 2 ranks, got {ranks}")
        start_ray(address)
        self._ray = ray
        device = model_device(models.policy)
        gpus = 1 if device.type == "cuda" else 0
        # num_cpus=0: ranks start on any cluster, even one with fewer cores than ranks (as rollout workers)
        actor = ray.remote(num_cpus=0, num_gpus=gpus, max_restarts=0)(TrainerRank)
        self.actors = [
            actor.remote(settings, algo, str(resume_from) if resume_from else None, device.type)
            for _ in range(ranks - 1)
        ]
        self._finalizer = weakref.finalize(self, kill_actors, ray, self.actors)
        self._get([a.pid.remote() for a in self.actors], "start")
        addr, store = rendezvous(ranks, backend_for(device), host=ray.util.get_node_ip_address())
        joins = [a.join.remote(addr, rank) for rank, a in enumerate(self.actors, start=1)]
        self.group = RankGroup(addr, 0, store)
        self._get(joins, "join the group")
        starts = [a.start.remote(optimizer.state_dict() if resume_from else None) for a in self.actors]
        self.group.broadcast_(trainable_parameters(models))
        self._get(starts, "take rank 0's weights")

    def launch(self, tensors: Any, shuffle_seed: int, lrs: list[float]) -> list:
        """Start the other ranks' update of this step (rank 0 runs its own meanwhile, then `finish`)."""
        ref = self._ray.put(tensors)
        return [a.update.remote(ref, shuffle_seed, lrs) for a in self.actors]

    def finish(self, pending: list) -> None:
        self._get(pending, "update")

    def failure(self, pending: list, failure: TrainerRankError) -> TrainerRankError:
        """Rank 0's collective failed: the error to raise, the failed rank's own when it has one."""
        from ray.exceptions import GetTimeoutError

        try:
            self._get(pending, "update", timeout=30)
        except TrainerRankError as own:
            failure = own
        except GetTimeoutError:
            pass
        self.close()
        return failure

    def weights(self) -> list[list[torch.Tensor]]:
        return self._get([a.weights.remote() for a in self.actors], "report weights")

    def close(self) -> None:
        self._finalizer()

    def _get(self, refs: list, what: str, timeout: float | None = None) -> Any:
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return self._ray.get(refs, timeout=timeout)
        except (RayActorError, RayTaskError) as exc:
            self.close()
            raise TrainerRankError(f"a trainer rank failed to {what}: {exc}") from None
