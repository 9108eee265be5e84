"""Padding-free micro-batches: one minibatch's forward+backward, padded against packed.

A batch of synthetic episodes whose completion lengths follow a skewed distribution (most short, a
few long: an exponential of mean `--mean-completion`, capped at `--max-completion`; prompts of 16-64
tokens; random token ids, every completion token in the loss) goes through the trainer's own update
(`trainers.phases.accumulate_gradients`, GRPO without KL, one minibatch = the whole batch) in three ways:
padded micro-batches of `--micro` episodes (`--micro-batch-size`); the same tokens packed into
forwards of at most `--tokens` tokens (`--micro-batch-tokens`; default: `--micro` x the mean
episode length, so both average the same real tokens per forward); and a "load" run that only loads
the model and builds the batch (the memory floor). Each runs in its own process: time is the median
of `--repeats` timed passes after one warm-up; peak memory is the process's peak resident set
(`_peak_memory`), and on CUDA also `torch.cuda.max_memory_allocated`. "computed" counts the token
positions the forwards ran, padding included. The packed gradient equals the padded one (to ~1e-6:
`tests/trainers/test_packing.py`); here it is only timed.

    python benchmarks/packing.py                           # tiny model, 64 episodes
    python benchmarks/packing.py --model DIR --episodes 32 --max-completion 1024
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peak_memory import MALLOC_CHOICES, allocator_env, run_measured  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODES = ("load", "padded", "packed")


def episodes(args, vocab: int):
    import torch

    from rlvr.envs.episode import Episode
    from rlvr.verifiers.verdict import Outcome

    g = torch.Generator().manual_seed(args.seed)
    out = []
    for i in range(args.episodes):
        p = int(torch.randint(16, 65, (1,), generator=g))
        c = min(args.max_completion, 1 + int(torch.empty(1).exponential_(1 / args.mean_completion, generator=g)))
        prompt = torch.randint(3, vocab, (p,), generator=g).tolist()
        completion = torch.randint(3, vocab, (c,), generator=g).tolist()
        out.append(
            Episode(
                "bench/Packing-v0",
                str(i // 8),
                i // 8,
                prompt,
                completion,
                [1] * c,
                [-1.0] * c,
                [float(i % 2)],
                Outcome.CORRECT if i % 2 else Outcome.INCORRECT,
                [],
                "stop",
            )
        )
    return out


def child(args) -> None:
    """One mode, in this process; writes its numbers as JSON to `args.result`."""
    import torch

    from rlvr.trainers.algorithms import get_algorithm
    from rlvr.trainers.batch import collate
    from rlvr.trainers.config import TrainConfig
    from rlvr.trainers.model_set import Models
    from rlvr.trainers.models import load_causal_lm
    from rlvr.trainers.packing import split_rows
    from rlvr.trainers.phases import StepTensors, UpdateSums, accumulate_gradients, compute_advantages

    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = load_causal_lm(args.model).to(device)
    batch = collate(episodes(args, model.config.vocab_size), pad_token_id=0).to(device)
    n = len(batch)
    result = {"episodes": n, "real": int(batch.attention_mask.sum())}
    if args.mode != "load":
        algo = get_algorithm("grpo", kl_coef=0.0)  # no reference model: the policy's own pass is what is timed
        sizes = dict(micro_batch_size=args.micro) if args.mode == "padded" else dict(micro_batch_tokens=args.tokens)
        cfg = TrainConfig(tasks_per_step=n, group_size=1, **sizes)
        models = Models(path=None, tokenizer=None, policy=model)
        t = StepTensors(batch=batch, old_logprobs_BT=None)  # on-policy: the update's forward gives them
        t = t.with_advantages(compute_advantages(algo, t))
        rows = torch.arange(n, device=device)
        micro = split_rows(batch, rows, cfg.micro_batch, cfg.micro_batch_tokens)
        result["forwards"] = len(micro)
        if args.mode == "packed":
            result["computed"] = result["real"]
        else:  # a padded micro-batch runs its rows at their trimmed width
            result["computed"] = sum(len(m) * batch.select(m).input_ids.shape[1] for m in micro)
        times = []
        for i in range(args.repeats + 1):  # the first is a warm-up
            model.zero_grad(set_to_none=True)
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            accumulate_gradients(models, algo, cfg, t, rows, UpdateSums())
            if device == "cuda":
                torch.cuda.synchronize()
            if i:
                times.append(time.perf_counter() - t0)
        result["seconds"] = statistics.median(times)
    if device == "cuda":
        result["cuda_peak"] = torch.cuda.max_memory_allocated()
    Path(args.result).write_text(json.dumps(result))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny", help="'tiny' or a local model directory")
    p.add_argument("--episodes", type=int, default=64)
    p.add_argument("--mean-completion", type=float, default=48.0, help="mean of the exponential completion length")
    p.add_argument("--max-completion", type=int, default=512)
    p.add_argument("--micro", type=int, default=8, help="episodes per padded micro-batch")
    p.add_argument("--tokens", type=int, default=None, help="tokens per packed forward; default: micro x mean length")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--malloc",
        choices=MALLOC_CHOICES,
        default="fixed",
        help="fixed (default): peaks measure tensors, not glibc's retained heap (see _peak_memory)",
    )
    p.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # a child process
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.mode:
        child(args)
        return 0
    if args.tokens is None:
        from rlvr.trainers.models import load_causal_lm

        vocab = load_causal_lm(args.model).config.vocab_size
        lengths = [len(e.prompt_ids) + len(e.completion_ids) for e in episodes(args, vocab)]
        args.tokens = round(args.micro * sum(lengths) / len(lengths))
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            result = Path(tmp) / f"{mode}.json"
            cmd = [sys.executable, __file__, "--mode", mode, "--result", str(result)] + (argv or sys.argv[1:])
            if "--tokens" not in cmd:
                cmd += ["--tokens", str(args.tokens)]
            env = allocator_env({**os.environ, "TOKENIZERS_PARALLELISM": "false"}, args.malloc)
            m = run_measured(cmd, cwd=str(ROOT), env=env)
            if m.returncode != 0:
                raise SystemExit(f"the {mode} run failed (exit {m.returncode})")
            rows[mode] = {**json.loads(result.read_text()), "rss": m.peak_rss_bytes}
    mib = 2**20
    floor = rows["load"]["rss"]
    print(
        f"model {args.model}; {rows['load']['episodes']} episodes, {rows['load']['real']} real tokens; "
        f"padded: {args.micro} episodes per forward; packed: <= {args.tokens} tokens per forward; "
        f"{args.threads} thread(s), malloc {args.malloc}; GRPO forward+backward of the whole batch"
    )
    print(
        f"{'mode':8} {'forwards':>8} {'computed':>9} {'padding':>8} {'s/pass':>8} {'peak MiB':>9} {'over load':>9}"
        + (f" {'CUDA MiB':>9}" if "cuda_peak" in rows["load"] else "")
    )
    print("-" * (66 + (10 if "cuda_peak" in rows["load"] else 0)))
    for mode in MODES:
        r = rows[mode]
        if mode == "load":
            line = f"{mode:8} {'':>8} {'':>9} {'':>8} {'':>8} {r['rss'] / mib:9.0f} {'':>9}"
        else:
            pad = 1 - r["real"] / r["computed"]
            line = (
                f"{mode:8} {r['forwards']:8d} {r['computed']:9d} {pad:8.0%} {r['seconds']:8.3f} "
                f"{r['rss'] / mib:9.0f} {(r['rss'] - floor) / mib:9.0f}"
            )
        if "cuda_peak" in r:
            line += f" {r['cuda_peak'] / mib:9.0f}"
        print(line)
    padded, packed = rows["padded"], rows["packed"]
    print(
        f"packed vs padded: {padded['seconds'] / packed['seconds']:.2f}x faster, "
        f"{(packed['rss'] - floor) / max(padded['rss'] - floor, 1):.2f}x the memory over load"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
