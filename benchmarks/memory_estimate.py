"""The memory estimate (`trainers.memory_estimate`, `rlvr train ... --check`) against measured peaks.

Rows:
- CPU, measured here: a short GRPO run (HF sampler, `--device cpu`) of the tiny and the small
  model in a child process. Compared: each run's peak resident set (`VmHWM`, reset before the run; allocator
  "fixed" so that glibc's fragmentation is not counted) minus its resident set after its imports
  and checks, just before the models load, so that the interpreter and its libraries are not
  counted; a warm-up run of one 2-token episode pair comes before the baseline, so that what a run
  starts once (lazily imported modules, the autograd engine's thread, the reward plot) is not
  counted either. The estimate is given the step's real padded shapes (the longest prompt and completion
  its training forwards saw, read by a forward hook): it is an upper bound at the generation
  budget, and the tiny model answers in fewer tokens.
- CUDA, measured on an H100 (`/work/shared/FACTS-gpu.md`, 2026-11-26): the ~285M Qwen2 config,
  GRPO, 16 tasks x 8 samples x 64 tokens, HF sampler, prompts of the tiny tokenizer's Arithmetic
  tasks.
- The target: Qwen2-1.5B's shape (config only, nothing loaded) at the README's batch with the
  default settings on an 80 GB device, micro-batches bounded by the CUDA default.

    python benchmarks/memory_estimate.py            # estimates, and the CPU measurements (about a minute)
    python benchmarks/memory_estimate.py --models tiny,small,smollm2-135m   # the real 135M model too
    python benchmarks/memory_estimate.py --no-measure
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peak_memory import allocator_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30

# Measured on one H100 (FACTS-gpu.md): peak CUDA GiB of the ~285M config, by setting.
H100_PEAKS = {
    "fp32": ({}, 23.0),
    "bf16": ({"dtype": "bfloat16"}, 23.8),
    "bf16 + LoRA r16": ({"dtype": "bfloat16", "lora_rank": 16}, 13.9),
    "bf16 + micro_batch_tokens 8192": ({"dtype": "bfloat16", "micro_batch_tokens": 8192}, 20.1),
    "bf16 + gradient checkpointing": ({"dtype": "bfloat16", "gradient_checkpointing": True}, 7.0),
    "bf16 + PPO critic": ({"dtype": "bfloat16", "value_model": "critic", "entropy": False}, 49.7),
}
# Where the estimate does not model what was measured: LoRA's frozen linears keep fewer
# activations under autocast than the count of a trained layer (the estimate is above, safely).
NOT_MODELLED = {"bf16 + LoRA r16"}
QWEN2_1_5B = {  # Qwen2-1.5B's config.json shape
    "model_type": "qwen2",
    "hidden_size": 1536,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "intermediate_size": 8960,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
}
ARITHMETIC_PROMPT_TOKENS = 26  # the tiny tokenizer's longest Arithmetic-v0 opening prompt (of 64 tasks)


def shape_285m():
    from rlvr.trainers.memory_estimate import ModelShape

    return ModelShape(hidden=1024, layers=24, heads=16, kv_heads=8, intermediate=2816, vocab=1024)


def h100_rows() -> list[tuple[str, float, float]]:
    """(setting, estimated GiB, measured GiB) of the ~285M config on the H100."""
    from rlvr.trainers.memory_estimate import MemoryInputs, estimate

    base = MemoryInputs(
        shape=shape_285m(),
        device="cuda",
        reference=True,  # GRPO's KL
        episodes=128,
        group_size=8,
        prompt_tokens=ARITHMETIC_PROMPT_TOKENS,
        completion_tokens=64,
    )
    return [(name, estimate(replace(base, **kw)).total / GIB, peak) for name, (kw, peak) in H100_PEAKS.items()]


H100_BYTES = 81559 * 2**20  # an H100 80GB's total as CUDA reports it (79.6 GiB)


def qwen_1_5b(completion_tokens: int = 64, prompt_tokens: int = 128, device_bytes: int = H100_BYTES):
    """(inputs with the CUDA default bound, the estimate) of Qwen2-1.5B's shape at the README's batch
    and default settings (float32, GRPO with its KL reference, vLLM taking 0.3 of the device), the
    whole device free; prompts of 128 tokens (a chat template's system turn and a task)."""
    from rlvr.trainers.memory_estimate import MemoryInputs, ModelShape, cuda_micro_batch_tokens, estimate

    inputs = MemoryInputs(
        shape=ModelShape.from_config(QWEN2_1_5B),
        device="cuda",
        reference=True,
        episodes=16 * 8,
        group_size=8,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        sampler="vllm",
        vllm_gpu_memory=0.3,
        device_bytes=device_bytes,
    )
    bounded = replace(inputs, micro_batch_tokens=cuda_micro_batch_tokens(inputs, inputs.device_bytes))
    return bounded, estimate(bounded)


# ---- the CPU measurement --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    model: str
    measured: int  # bytes: peak resident set of the run minus the resident set before it
    estimate: dict[str, int]  # the estimate's terms and total, in bytes, for the run's real shapes
    widths: dict[str, int]  # the longest prompt and completion the training forwards saw


def measure(
    models: tuple[str, ...] = ("tiny", "small"),
    tasks: int = 4,
    group: int = 4,
    max_tokens: int = 32,
    steps: int = 2,
    malloc: str = "fixed",
) -> list[Measurement]:
    """Short runs of `models` in one child process (the imports are paid once). Each run's
    peak is the kernel's high-water mark of the child's resident set (`VmHWM`), reset just before
    the run (`/proc/self/clear_refs`), so no run's peak is hidden by an earlier one's."""
    with tempfile.TemporaryDirectory(prefix="rlvr-memory-") as tmp:
        argv = [sys.executable, __file__, "--child", tmp, str(tasks), str(group), str(max_tokens), str(steps), *models]
        env = allocator_env({**os.environ, "PYTHONPATH": str(ROOT)}, malloc)
        with open(Path(tmp) / "log.txt", "w") as log:  # the child measures itself: no polling from here
            done = subprocess.run(argv, env=env, cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT, timeout=1100)
        if done.returncode != 0:
            raise RuntimeError(f"the measured child failed: {(Path(tmp) / 'log.txt').read_text()[-3000:]}")
        records = json.loads((Path(tmp) / "child.json").read_text())
    return [Measurement(r["model"], r["peak"] - r["baseline"], r["estimate"], r["widths"]) for r in records]


def reset_high_water() -> None:
    """Linux >= 4.0: writing 5 to clear_refs resets this process's peak resident set (VmHWM)."""
    Path("/proc/self/clear_refs").write_text("5")


def high_water() -> int:
    """This process's peak resident set since the last reset, in bytes (VmHWM is in KiB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmHWM line")


def child(tmp: str, tasks: int, group: int, max_tokens: int, steps: int, models: list[str]) -> None:
    """In the measured process, per model: a warm-up run (the first model only), the checks, the
    baseline, the run, its peak."""
    import gc

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401  (the reward curve at the end imports it)
    import psutil
    import torch

    from rlvr.trainers.config import TrainConfig
    from rlvr.trainers.loop import Trainer
    from rlvr.trainers.memory_estimate import ModelShape, estimate, inputs_for
    from rlvr.trainers.models import resolve_model
    from rlvr.trainers.preflight import check_run

    def settings(model: str, **kw) -> TrainConfig:
        # skip_zero_signal off: the random `small` model scores 0 everywhere, and a step without reward
        # variance would otherwise take no optimizer step, leaving the gradients and AdamW state unmeasured
        common = dict(model=model, device="cpu", sampler="hf", progress=False, log_every=0, warmup_steps=0)
        common["skip_zero_signal"] = False
        return TrainConfig(**common, **kw)

    def run(trainer: Trainer) -> None:
        trainer.train()
        trainer.close()

    # A run of one episode pair of 2 tokens first: what a run imports, starts and caches on first use
    # (modules, the autograd engine, the reward plot) is then in the baseline, not in the measure.
    run(Trainer(settings(models[0], steps=1, tasks_per_step=1, group_size=2, max_tokens=2, out=f"{tmp}/warm")))
    records = []
    for model in models:
        gc.collect()
        config = settings(model, steps=steps, tasks_per_step=tasks, group_size=group, max_tokens=max_tokens)
        config = replace(config, out=f"{tmp}/{model}")
        algo = check_run(config)
        baseline = psutil.Process().memory_info().rss
        reset_high_water()
        trainer = Trainer(config, algo)
        widths = {"prompt": 0, "completion": 0}

        def observe(module, args, kwargs, widths=widths):  # the real padded widths of the training forwards
            ids = kwargs.get("input_ids")
            if torch.is_grad_enabled() and ids is not None:
                key = "completion" if kwargs.get("past_key_values") is not None else "prompt"
                widths[key] = max(widths[key], ids.shape[1])

        trainer.policy.register_forward_pre_hook(observe, with_kwargs=True)
        run(trainer)
        del trainer
        peak = high_water()
        # the estimate, computed after the run (a few numbers: nothing the peak could see)
        inputs = inputs_for(config, algo, ModelShape.read(resolve_model(model)), widths["prompt"], device="cpu")
        result = estimate(replace(inputs, completion_tokens=widths["completion"]))
        terms = {name: getattr(result, name) for name in result.TERMS}
        records.append(
            {
                "model": model,
                "baseline": baseline,
                "peak": peak,
                "widths": widths,
                "estimate": {**terms, "total": result.total},
            }
        )
    (Path(tmp) / "child.json").write_text(json.dumps(records))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-measure", action="store_true", help="estimates only (no training runs)")
    parser.add_argument(
        "--models", default="tiny,small", help="models measured on the CPU, comma-separated (tiny,small,smollm2-135m)"
    )
    args = parser.parse_args()
    print("| setting | estimated GiB | measured GiB | estimate / measured |")
    print("|---|---|---|---|")
    for name, est, peak in h100_rows():
        print(f"| ~285M on H100, {name} | {est:.1f} | {peak:.1f} | {est / peak:.2f} |")
    if not args.no_measure:
        for m in measure(tuple(args.models.split(","))):
            est = m.estimate["total"]
            print(
                f"| {m.model} on CPU, 4 x 4 x 32 tokens, 2 steps | {est / GIB:.3f} | {m.measured / GIB:.3f} | "
                f"{est / m.measured:.2f} |"
            )
    for tokens in (32, 64):
        inputs, est = qwen_1_5b(tokens)
        print(
            f"| Qwen2-1.5B shape, 16 x 8 x {tokens} tokens, defaults, H100 80GB, micro_batch_tokens "
            f"{inputs.micro_batch_tokens} | {est.total / GIB:.1f} | - | - |"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        d, t, g, mt, s, *ms = sys.argv[2:]
        child(d, int(t), int(g), int(mt), int(s), ms)
    else:
        main()
