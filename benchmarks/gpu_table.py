"""The memory and speed table of a ~300M model on a GPU (issue 30): one row per training setting,
grpo (ppo for the critic row) on `rlvr/Arithmetic-v0` with the Hugging Face sampler, at the
README's batch (16 tasks x 8 samples, 64 tokens):

    fp32 | bf16 | bf16 + LoRA r16 | bf16 + packing (--micro-batch-tokens 8192) |
    bf16 + gradient checkpointing | bf16 + PPO with a separate critic

    python benchmarks/gpu_table.py                        # the 300m model on CUDA, 3 steps a row
    python benchmarks/gpu_table.py --model tiny --steps 2 # the CPU smoke run (seconds a row)

The `300m` model is `trainers.tiny.small_model.build` with hidden 1024, MLP 2816, 24 layers, 16 heads,
8 KV heads (~285M parameters, random weights: it measures speed and memory, not learning), built
into the cache on first use. Each row runs in its own process (`--in-process`: all in this one,
which saves each row's start-up: `scripts/gpu_check.sh` and the smoke test use it), so a row's peak
is its own: on CUDA `torch.cuda.max_memory_allocated` (what the tensors took, not the allocator's
reserve) less what was allocated when the row started (in-process: what earlier rows left, 0 when
they freed everything; reported as `cuda_base_bytes`), on the CPU the process tree's peak resident
set (`_peak_memory.py`; none in-process). Seconds are medians over the steps after the first
(warm-up): sampling (`time_sampling`), training (`time_training`: old/reference logprobs, values,
the update). Tokens/s: generated tokens over the sampling seconds, and over the whole step. MFU
and TFLOP/s: `trainers.flops` (CUDA only). A row that fails is reported as such; the others run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _peak_memory import run_measured  # noqa: E402

GiB = 2**30
MODEL_300M = {"hidden_size": 1024, "intermediate_size": 2816, "num_layers": 24, "num_heads": 16, "num_kv_heads": 8}
ROWS = {
    "fp32": {},
    "bf16": {"dtype": "bfloat16"},
    "bf16+lora16": {"dtype": "bfloat16", "lora_rank": 16},
    "bf16+packing": {"dtype": "bfloat16", "micro_batch_tokens": 8192},
    "bf16+checkpointing": {"dtype": "bfloat16", "gradient_checkpointing": True},
    "bf16+ppo-critic": {"dtype": "bfloat16", "algo": "ppo", "value_model": "critic"},
}
PHASES = ("time_sampling", "time_training", "time_step", "tokens_generated", "mfu", "tflops")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="300m", help="300m (default), small, tiny, or a model directory")
    p.add_argument("--steps", type=int, default=3, help="steps a row (default 3: the first is warm-up)")
    p.add_argument("--tasks-per-step", type=int, default=16)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's; 1 on a busy CPU)")
    p.add_argument("--only", action="append", default=[], metavar="ROW", help="only these rows: " + ", ".join(ROWS))
    p.add_argument("--in-process", action="store_true", help="every row in this process (no per-row peak on CPU)")
    p.add_argument("--timeout", type=float, default=600, help="seconds allowed to each row (default 600)")
    p.add_argument("--out", default=None, help="output directory (default: a new temporary one)")
    p.add_argument("--child", nargs=2, metavar=("SETTINGS", "RESULT"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def model_dir(name: str) -> Path:
    from rlvr.trainers.models import resolve_model

    if name == "300m":
        from rlvr.trainers.tiny.small_model import SmallSpec, small_model_dir

        return small_model_dir(SmallSpec(**MODEL_300M))
    return resolve_model(name)


# ---- one row ---------------------------------------------------------------------------------------
def run_row(settings: dict) -> dict:
    """Train `settings` (a TrainConfig dict plus "steps") and return the row's numbers."""
    import torch

    from rlvr.trainers.config import TrainConfig
    from rlvr.trainers.device import use_threads
    from rlvr.trainers.loop import Trainer

    settings = dict(settings)
    steps = settings["steps"]
    cuda = torch.cuda.is_available() and settings.get("device", "auto") != "cpu"
    if cuda:
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()  # in-process: what earlier rows left (none in a row's own process)
    use_threads(settings.get("threads"))
    trainer = Trainer(TrainConfig.from_dict(settings))
    try:
        per_step = []
        while trainer.step < steps:
            metrics = trainer.train_step()
            trainer.step += 1
            per_step.append({k: float(metrics[k]) for k in PHASES if k in metrics})
        row = {
            "steps": per_step,
            "parameters": sum(p.numel() for p in trainer.policy.parameters()),
            "trainable": sum(p.numel() for p in trainer.policy.parameters() if p.requires_grad),
            "device": str(next(trainer.policy.parameters()).device),
        }
        if cuda:
            torch.cuda.synchronize()
            row["cuda_peak_bytes"] = torch.cuda.max_memory_allocated() - base
            row["cuda_base_bytes"] = base
            row["device_name"] = torch.cuda.get_device_name()
    finally:
        trainer.close()
        del trainer
    return row


def run_child(settings_path: str, result_path: str) -> int:
    row = run_row(json.loads(Path(settings_path).read_text()))
    Path(result_path).write_text(json.dumps(row))
    return 0


# ---- the table ------------------------------------------------------------------------------------
def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    return env


def row_settings(name: str, args: argparse.Namespace, model: Path, out: Path) -> dict:
    return {
        "model": str(model),
        "env": "rlvr/Arithmetic-v0",
        "algo": "grpo",
        "sampler": "hf",
        "device": args.device,
        "threads": args.threads,
        "steps": args.steps,
        "tasks_per_step": args.tasks_per_step,
        "group_size": args.group_size,
        "max_tokens": args.max_tokens,
        "progress": False,
        "seed": 0,
        "out": str(out / name / "run"),
        **ROWS[name],
    }


def measure(name: str, args: argparse.Namespace, model: Path, out: Path) -> dict:
    settings = row_settings(name, args, model, out)
    (out / name).mkdir(parents=True, exist_ok=True)
    print(f"--- {name} ...", file=sys.stderr, flush=True)
    row: dict = {"name": name}
    started = time.perf_counter()
    if args.in_process:
        try:
            row.update(run_row(settings))
        except Exception as exc:  # a failed row is reported; the others still run
            row["error"] = f"{type(exc).__name__}: {exc}"
    else:
        settings_path, result_path = out / name / "settings.json", out / name / "result.json"
        settings_path.write_text(json.dumps(settings))
        with open(out / name / "output.log", "wb") as log:
            measured = run_measured(
                [sys.executable, str(Path(__file__).resolve()), "--child", str(settings_path), str(result_path)],
                env=child_env(),
                cwd=str(HERE.parent),
                timeout=args.timeout,
                output=log,
            )
        row["peak_rss_bytes"] = measured.peak_rss_bytes
        if measured.returncode == 0 and result_path.is_file():
            row.update(json.loads(result_path.read_text()))
        else:
            tail = (out / name / "output.log").read_text(errors="replace").strip().splitlines()[-1:]
            row["error"] = f"exit {measured.returncode}: {tail[0] if tail else 'no output'}"
    row["seconds"] = time.perf_counter() - started
    if "error" in row:
        print(f"    {name} failed: {row['error']}", file=sys.stderr)
    return row


def after_warmup(steps: list[dict], key: str) -> float | None:
    values = [s[key] for s in (steps[1:] if len(steps) > 1 else steps) if key in s]
    return statistics.median(values) if values else None


def summary(row: dict) -> dict:
    """A row's table numbers (None where not measured)."""
    steps = row.get("steps") or []
    sampling, training, step = (after_warmup(steps, k) for k in ("time_sampling", "time_training", "time_step"))
    tokens = after_warmup(steps, "tokens_generated")
    peak = row.get("cuda_peak_bytes", row.get("peak_rss_bytes"))
    return {
        "peak_gib": peak / GiB if peak else None,
        "peak_kind": "cuda" if "cuda_peak_bytes" in row else ("rss" if "peak_rss_bytes" in row else None),
        "sampling_s": sampling,
        "training_s": training,
        "sample_tok_s": tokens / sampling if tokens and sampling else None,
        "step_tok_s": tokens / step if tokens and step else None,
        "mfu": after_warmup(steps, "mfu"),
        "tflops": after_warmup(steps, "tflops"),
    }


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(rows: list[dict]) -> str:
    """A Markdown table, ready for benchmarks/README.md."""
    lines = [
        "| setting | peak GiB | s/step sampling | s/step training | tokens/s sampling | tokens/s step "
        "| MFU | TFLOP/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | failed: {r['error'][:100]} |  |  |  |  |  |  |")
            continue
        s = summary(r)
        peak = _cell(s["peak_gib"], ".2f") + (" (RSS)" if s["peak_kind"] == "rss" else "")
        mfu = "-" if s["mfu"] is None else f"{100 * s['mfu']:.1f}%"
        lines.append(
            f"| {r['name']} | {peak} | {_cell(s['sampling_s'], '.2f')} | {_cell(s['training_s'], '.2f')} | "
            f"{_cell(s['sample_tok_s'], ',.0f')} | {_cell(s['step_tok_s'], ',.0f')} | {mfu} | "
            f"{_cell(s['tflops'], '.1f')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return run_child(*args.child)
    unknown = [n for n in args.only if n not in ROWS]
    if unknown or args.steps < 1 or min(args.tasks_per_step, args.max_tokens) < 1 or args.group_size < 2:
        print(
            f"gpu_table: error: need --steps >= 1, --tasks-per-step >= 1, --group-size >= 2, --max-tokens >= 1 "
            f"and --only among {', '.join(ROWS)} (got {unknown or 'bad numbers'})",
            file=sys.stderr,
        )
        return 2
    from rlvr.errors import RlvrError

    try:
        model = model_dir(args.model)  # the 300m model is built now, outside the measured rows
    except (RlvrError, ValueError) as exc:
        print(f"gpu_table: error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="gpu_table_"))
    out.mkdir(parents=True, exist_ok=True)
    rows = [measure(name, args, model, out) for name in ROWS if not args.only or name in args.only]
    (out / "results.json").write_text(json.dumps({"model": str(model), "rows": rows}, indent=2))
    device = next((r["device_name"] for r in rows if "device_name" in r), None) or next(
        (r["device"] for r in rows if "device" in r), "?"
    )
    text = (
        f"{args.model} ({model}), grpo (ppo for the critic row) on rlvr/Arithmetic-v0, HF sampler, "
        f"{args.tasks_per_step} tasks x {args.group_size} samples x {args.max_tokens} tokens, "
        f"{args.steps} steps a row (medians after the first), device {device}, "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}\n\n{table(rows)}"
    )
    (out / "table.md").write_text(text + "\n")
    print(text)
    print(f"(details in {out / 'results.json'})")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
