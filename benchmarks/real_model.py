"""Memory and step time of the memory-saving options at a real size: the ~30M-parameter `small`
model (`trainers/tiny/small_model.py`, built into the cache on first use), trained by the normal
`Trainer` with `grpo` on `rlvr/Arithmetic-v0`, one configuration per process:

    baseline fp32 | --gradient-checkpointing | --dtype bfloat16 | --lora-rank 16 |
    --micro-batch-tokens N | all four combined

    python benchmarks/real_model.py                          # 4 steps each, vLLM sampler
    python benchmarks/real_model.py --sampler hf --steps 6 --only baseline --only bf16

Peak memory is the process tree's (`_peak_memory.py`: the trainer plus, with vLLM, its engine,
whose weights and KV cache are the same in every row). Step seconds is the median of the steps
after the first (warm-up); "train s" is the median of the training phase alone (old and
reference logprobs, the update), which is what the options change; sampling is the rest. "gap
max" is the largest sampler/trainer logprob difference over the steps (float32: < 1e-4). The
random model rarely stops before `--max-tokens`, so every row trains on full-length completions.
A configuration that fails is reported as such and the others still run. Run on an idle
machine: times on a shared one measure the neighbours.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _peak_memory import MALLOC_CHOICES, allocator_env, run_measured  # noqa: E402

MiB = 2**20


def configurations(micro_batch_tokens: int) -> dict[str, dict]:
    """Name -> the TrainConfig settings that differ from the baseline's."""
    return {
        "baseline": {},
        "checkpointing": {"gradient_checkpointing": True},
        "bf16": {"dtype": "bfloat16"},
        "lora16": {"lora_rank": 16},
        "packed": {"micro_batch_tokens": micro_batch_tokens},
        "combined": {
            "gradient_checkpointing": True,
            "dtype": "bfloat16",
            "lora_rank": 16,
            "micro_batch_tokens": micro_batch_tokens,
        },
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="small", help="model directory, 'small' (default) or 'tiny'")
    p.add_argument("--steps", type=int, default=4, help="training steps per configuration (default 4)")
    p.add_argument("--tasks-per-step", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument(
        "--micro-batch-tokens", type=int, default=1024, help="N of the packed and combined rows (default 1024)"
    )
    p.add_argument("--sampler", choices=["vllm", "hf"], default="vllm")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run only these configurations (repeatable): " + ", ".join(configurations(0)),
    )
    p.add_argument(
        "--malloc",
        choices=MALLOC_CHOICES,
        default="fixed",
        help="fixed (default): large blocks return to the kernel when freed, so peaks measure tensors; "
        "glibc: glibc's adaptive default, whose retained heap adds to every peak (see _peak_memory)",
    )
    p.add_argument("--timeout", type=float, default=1800, help="seconds allowed to each configuration")
    p.add_argument("--out", default=None, help="output directory (default: a new temporary one)")
    p.add_argument("--child", nargs=2, metavar=("SETTINGS", "RESULT"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---- the child: one configuration ------------------------------------------------------------------
def run_child(settings_path: str, result_path: str) -> int:
    from rlvr.trainers.config import TrainConfig
    from rlvr.trainers.device import use_threads
    from rlvr.trainers.loop import Trainer

    settings = json.loads(Path(settings_path).read_text())
    steps = settings.pop("steps")
    use_threads(settings.get("threads"))
    trainer = Trainer(TrainConfig.from_dict({**settings, "steps": steps}))
    seconds, phases, gaps = [], [], []
    while trainer.step < steps:
        t0 = time.perf_counter()
        metrics = trainer.train_step()
        trainer.step += 1
        seconds.append(time.perf_counter() - t0)
        phases.append({k: float(metrics.get(k, 0.0)) for k in ("time_sampling", "time_training", "time_syncing")})
        gaps.append(float(metrics.get("logprob_gap_max", float("nan"))))
    trainable = sum(p.numel() for p in trainer.policy.parameters() if p.requires_grad)
    Path(result_path).write_text(
        json.dumps(
            {
                "step_seconds": seconds,
                "phases": phases,
                "trainable": trainable,
                "logprob_gap_max": gaps,
                "dtype": str(next(trainer.policy.parameters()).dtype),
            }
        )
    )
    trainer.close()
    return 0


# ---- the parent: every configuration, then the table ---------------------------------------------
def child_env(malloc: str) -> dict[str, str]:
    env = allocator_env(dict(os.environ), malloc)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    return env


def measure(name: str, overrides: dict, args: argparse.Namespace, model_dir: Path, out: Path) -> dict:
    settings = {
        "model": str(model_dir),
        "env": "rlvr/Arithmetic-v0",
        "algo": "grpo",
        "steps": args.steps,
        "tasks_per_step": args.tasks_per_step,
        "group_size": args.group_size,
        "max_tokens": args.max_tokens,
        "sampler": args.sampler,
        "threads": args.threads,
        "progress": False,
        "seed": 0,
        # The random model scores 0 everywhere: without this every step would take no optimizer step and
        # the rows would time no training (the table of 2026-11-25 predates that skip, so it trained)
        "skip_zero_signal": False,
        "out": str(out / name / "run"),
        **overrides,
    }
    (out / name).mkdir(parents=True, exist_ok=True)
    settings_path, result_path = out / name / "settings.json", out / name / "result.json"
    settings_path.write_text(json.dumps(settings))
    print(f"--- {name} ...", file=sys.stderr, flush=True)
    with open(out / name / "output.log", "wb") as log:
        measured = run_measured(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(settings_path), str(result_path)],
            env=child_env(args.malloc),
            cwd=str(HERE.parent),
            timeout=args.timeout,
            output=log,
        )
    row = {
        "name": name,
        "overrides": overrides,
        "returncode": measured.returncode,
        "peak_rss_bytes": measured.peak_rss_bytes,
    }
    if measured.returncode == 0 and result_path.is_file():
        row.update(json.loads(result_path.read_text()))
    else:
        tail = (out / name / "output.log").read_text(errors="replace").strip().splitlines()[-1:]
        row["error"] = tail[0] if tail else "no output"
        print(f"    {name} failed (exit {measured.returncode}): {row['error']}", file=sys.stderr)
    return row


def after_warmup(values: list[float]) -> float:
    return statistics.median(values[1:] if len(values) > 1 else values)


def table(rows: list[dict]) -> str:
    base = next((r for r in rows if r["name"] == "baseline" and "step_seconds" in r), None)
    lines = [
        f"{'configuration':<15} {'peak MiB':>9} {'x base':>7} {'step s':>7} {'train s':>8} {'x base':>7} "
        f"{'trainable':>11} {'gap max':>8}  dtype"
    ]
    for r in rows:
        if "step_seconds" not in r:
            lines.append(f"{r['name']:<15} failed (exit {r['returncode']}): {r.get('error', '')[:80]}")
            continue
        train = after_warmup([p["time_training"] for p in r["phases"]])
        mem_x = r["peak_rss_bytes"] / base["peak_rss_bytes"] if base else float("nan")
        train_x = train / after_warmup([p["time_training"] for p in base["phases"]]) if base else float("nan")
        lines.append(
            f"{r['name']:<15} {r['peak_rss_bytes'] / MiB:>9.0f} {mem_x:>7.2f} "
            f"{after_warmup(r['step_seconds']):>7.2f} {train:>8.2f} {train_x:>7.2f} "
            f"{r['trainable']:>11,} {max(r.get('logprob_gap_max') or [float('nan')]):>8.1e}  "
            f"{r['dtype'].removeprefix('torch.')}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return run_child(*args.child)
    from rlvr.trainers.models import ModelError, resolve_model

    configs = configurations(args.micro_batch_tokens)
    unknown = [name for name in args.only if name not in configs]
    if unknown or args.steps < 1 or args.micro_batch_tokens < 1:
        print(
            f"real_model: error: need --steps >= 1, --micro-batch-tokens >= 1 and --only among "
            f"{', '.join(configs)} (got {unknown or 'bad numbers'})",
            file=sys.stderr,
        )
        return 2
    try:
        model_dir = resolve_model(args.model)  # builds `small` now, outside the measured processes
    except ModelError as exc:
        print(f"real_model: error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="real_model_"))
    out.mkdir(parents=True, exist_ok=True)
    rows = [
        measure(name, overrides, args, model_dir, out)
        for name, overrides in configs.items()
        if not args.only or name in args.only
    ]
    (out / "results.json").write_text(json.dumps(rows, indent=2))
    print(
        f"{args.model} ({model_dir}), grpo on rlvr/Arithmetic-v0, {args.steps} steps of {args.tasks_per_step} "
        f"tasks x {args.group_size} samples, max {args.max_tokens} tokens, {args.sampler} sampler, torch threads "
        f"{args.threads or 'default'}, malloc {args.malloc}; medians after the first step"
    )
    print(table(rows))
    print(f"(details in {out / 'results.json'})")
    return 0 if all("step_seconds" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
