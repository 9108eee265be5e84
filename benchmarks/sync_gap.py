"""The sampler/trainer logprob gap that `trainers/weight_sync.py` bounds, measured: per step in sync,
and at the step after a sync lost on purpose (the weights' iterator consumed before the load, the
version still bumped; for `--sampler hf`, the sampler bound to a copy of the policy from then on).

    python -m benchmarks.sync_gap --sampler vllm --dtype float32 --steps 5
    python -m benchmarks.sync_gap --sampler vllm --dtype bfloat16 --steps 25 --lose 0
    python -m benchmarks.sync_gap --sampler hf --dtype float32 --steps 10 --lose 0

Prints one row per step (mean and worst |trainer - sampler| logprob over the step's tokens) and a
summary row. The run itself does not stop (`sync_gap_bound=0`), so the lost sync's gap is seen.
Tiny model, GRPO, 8 tasks x 4 samples x 12 tokens, no warm-up.
"""

from __future__ import annotations

import argparse
import copy
import tempfile

from rlvr.trainers.config import TrainConfig
from rlvr.trainers.device import use_threads
from rlvr.trainers.loop import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sampler", default="vllm", choices=("vllm", "hf"))
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--warmup-steps", type=int, default=0)
    parser.add_argument("--lose", type=int, default=2, help="the version whose sync is lost; 0: none")
    args = parser.parse_args()
    config = TrainConfig.from_dict(
        dict(
            model="tiny",
            device="cpu",  # vLLM-CPU samples on the CPU; the trainer beside it
            sampler=args.sampler,
            dtype=args.dtype,
            tasks_per_step=8,
            group_size=4,
            max_tokens=12,
            lr=args.lr,
            warmup_steps=args.warmup_steps,
            steps=args.steps,
            threads=1,
            progress=False,
            sync_gap_bound=0,  # measure, do not stop
            out=tempfile.mkdtemp(prefix="rlvr-sync-gap-"),
        )
    )
    use_threads(config.threads)
    trainer = Trainer(config)
    sync = trainer.sampler.update_weights

    def losing(named, version):
        if version != args.lose:
            return sync(named, version)
        if args.sampler == "hf":  # it shares the live policy: from now on it holds a copy instead
            trainer.sampler.inner.model = copy.deepcopy(trainer.policy)
            return sync(named, version)
        list(named)  # consumed: nothing reaches the engine, the version is bumped all the same
        return sync(iter(()), version)

    trainer.sampler.update_weights = losing
    rows = []
    print(f"{args.sampler} {args.dtype}, lr {args.lr:g}, warm-up {args.warmup_steps}, sync of version {args.lose} lost")
    print("| step | gap mean | gap worst token | tokens |")
    try:
        for _ in range(args.steps):
            m = trainer.train_step()
            trainer.step += 1
            # sampled by old weights: vLLM's step right after the lost load (the next load puts it
            # right); the hf copy holds version `lose` itself, and falls behind from a step later
            behind = trainer.step == args.lose + 1 if args.sampler == "vllm" else trainer.step >= args.lose + 2
            stale = args.lose > 0 and behind
            rows.append((m["logprob_gap_mean"], m["logprob_gap_max"], stale))
            note = " (after the lost sync)" if stale else ""
            print(
                f"| {trainer.step}{note} | {m['logprob_gap_mean']:.3g} | "
                f"{m['logprob_gap_max']:.3g} | {m['tokens_generated']} |",
                flush=True,
            )
    finally:
        trainer.close()
    fresh = [r for r in rows if not r[2]]
    if fresh:
        means = [r[0] for r in fresh]
        print(
            f"in sync over {len(fresh)} steps: gap mean {min(means):.3g} - {max(means):.3g}, "
            f"worst token {max(r[1] for r in fresh):.3g}"
        )


if __name__ == "__main__":
    main()
