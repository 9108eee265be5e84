"""Data-parallel training: a group of ranks, each holding a copy of the trainable models, that
backward their shares of every minibatch and sum their gradients before each optimizer step.

Why not `DistributedDataParallel`'s wrapper: it averages gradients (a mean over ranks), needs
every rank to run the same number of backward passes, and wraps the model (its parameters get
new names). Here the loss denominators are already the whole minibatch's (`trainers.kernels.aggregation`),
so the gradients must be summed, not averaged; ranks' shares are packed into different numbers of
micro-batches, or none at all; and the models stay what the sampler sync and the checkpoints
expect. So each rank accumulates its share's gradient, then one coalesced all-reduce (one buffer,
as DDP's buckets are) sums them: the same sums DDP would make, without the wrapper.

The group is a torch.distributed process group object (gloo on CPU, nccl on CUDA) made from a
TCP store, not the process-wide default group: a process may make several in turn (tests,
notebooks) and nothing global is left behind.
"""

from __future__ import annotations

import datetime
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist

from rlvr.errors import RlvrError


class TrainerRankError(RlvrError):
    """A data-parallel trainer rank failed or could not be reached (the run can `--resume`)."""


@dataclass(frozen=True)
class RankAddress:
    """Where the ranks meet: rank 0's TCP store, and the group's size and backend."""

    host: str
    port: int
    world_size: int
    backend: str  # gloo | nccl


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def rendezvous(
    world_size: int, backend: str, host: str | None = None, timeout_s: float = 600.0
) -> tuple[RankAddress, dist.TCPStore]:
    """Rank 0's store, on a free port of this machine; the other ranks join it at the address."""
    host = host or socket.gethostbyname(socket.gethostname())
    store = dist.TCPStore(
        host, 0, world_size, True, timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False
    )
    return RankAddress(host, store.port, world_size, backend), store


class RankGroup:
    """This process's membership of the ranks' group: rank `rank` of `address.world_size`.
    Rank 0 passes the store it made (`rendezvous`); the others connect to it. Making the group
    blocks until every rank has joined."""

    def __init__(self, address: RankAddress, rank: int, store: dist.Store | None = None, timeout_s: float = 600.0):
        if not 0 <= rank < address.world_size:
            raise ValueError(f"rank {rank} is not in a group of {address.world_size}")
        timeout = datetime.timedelta(seconds=timeout_s)
        if store is None:
            store = dist.TCPStore(address.host, address.port, address.world_size, False, timeout=timeout)
        self._store = store  # the group holds no reference of its own
        self.rank, self.world_size = rank, address.world_size
        prefixed = dist.PrefixStore("rlvr-trainer", store)
        try:
            if address.backend == "nccl":
                self._pg = dist.ProcessGroupNCCL(prefixed, rank, address.world_size)
            else:
                self._pg = dist.ProcessGroupGloo(prefixed, rank, address.world_size, timeout)
        except RuntimeError as exc:
            raise TrainerRankError(f"trainer rank {rank} could not join its group: {exc}") from None

    def close(self) -> None:
        """Leave the group: its connections close, and the other ranks' collectives fail at once."""
        self._pg = None
        self._store = None

    # ---- the shares of a minibatch -------------------------------------------------------------
    def share(self, rows: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a minibatch: contiguous slices whose sizes differ by at most one."""
        return torch.tensor_split(rows, self.world_size)[self.rank]

    # ---- collectives -------------------------------------------------------------------------
    def sum_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """Sum every parameter's gradient over the ranks, in one all-reduce. A rank without a
        gradient for a parameter (no rows) adds zeros; a parameter no rank has a gradient for
        keeps None, as it would in one process (the optimizer then skips it)."""
        if not params:
            return
        device = params[0].device
        has = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=device)
        flat = torch.cat(
            [
                p.grad.reshape(-1).float() if p.grad is not None else torch.zeros(p.numel(), device=device)
                for p in params
            ]
            + [has]
        )
        self._all_reduce(flat, dist.ReduceOp.SUM)
        grads, seen = flat[: -len(params)], flat[-len(params) :]
        offset = 0
        for p, any_rank in zip(params, seen.tolist()):
            n = p.numel()
            p.grad = grads[offset : offset + n].view_as(p).to(p.dtype).clone() if any_rank else None
            offset += n

    def sum_update_sums(self, sums) -> None:
        """The update's metric sums (`trainers.phases.UpdateSums`) over every rank's share, in place."""
        pre = sums.pre
        kl = pre.kl_sum
        totals = torch.tensor(
            [
                sums.tokens,
                sums.clipped,
                sums.approx_kl,
                sums.policy_loss,
                sums.value_loss,
                sums.value_clipped,
                pre.batches,
                pre.tokens,
                pre.gap_sum,
                pre.entropy_sum,
                kl or 0.0,
                kl is not None,
            ],
            dtype=torch.float64,
        )
        self._all_reduce(totals, dist.ReduceOp.SUM)
        largest = torch.tensor([pre.gap_max], dtype=torch.float64)
        self._all_reduce(largest, dist.ReduceOp.MAX)
        (
            sums.tokens,
            sums.clipped,
            sums.approx_kl,
            sums.policy_loss,
            sums.value_loss,
            sums.value_clipped,
            batches,
            pre.tokens,
            pre.gap_sum,
            pre.entropy_sum,
            kl_sum,
            has_kl,
        ) = totals.tolist()
        pre.batches = int(batches)
        pre.kl_sum = kl_sum if has_kl else None
        pre.gap_max = float(largest)

    def broadcast_(self, tensors: list[torch.Tensor]) -> None:
        """Overwrite these tensors (on every rank) with rank 0's, e.g. the starting weights."""
        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        for x in tensors:
            data = x.data if x.is_contiguous() else x.data.contiguous()
            self._wait(self._pg.broadcast([data], opts))
            if data is not x.data:
                x.data.copy_(data)

    def _all_reduce(self, x: torch.Tensor, op: dist.ReduceOp) -> None:
        moved = x.to(self._device()) if self._needs_device(x) else x
        opts = dist.AllreduceOptions()
        opts.reduceOp = op
        self._wait(self._pg.allreduce([moved], opts))
        if moved is not x:
            x.copy_(moved)

    def _needs_device(self, x: torch.Tensor) -> bool:
        return isinstance(self._pg, getattr(dist, "ProcessGroupNCCL", ())) and x.device.type != "cuda"

    @staticmethod
    def _device() -> torch.device:
        return torch.device("cuda", torch.cuda.current_device())

    def _wait(self, work) -> None:
        try:
            work.wait()
        except RuntimeError as exc:  # a rank gone (closed connection) or the timeout
            raise TrainerRankError(f"trainer rank {self.rank}: a collective failed: {exc}") from None
