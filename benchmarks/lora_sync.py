"""LoRA: how the trained adapter reaches the vLLM sampler after each step, two ways.

- merged: W + scale * B @ A per adapted module, loaded in place under the base names
  (`trainers.lora.merged_weights` through `VLLMSampler.update_weights`, what `rlvr train --lora-rank`
  does);
- vllm-lora: vLLM's own LoRA (`LLM(enable_lora=True)`, on CPU its punica wrapper): the adapter is
  saved to a directory and reloaded in place (`add_lora(LoRARequest(..., load_inplace=True))`),
  and every request carries the `LoRARequest`;
- and, for scale, full: a full-weight run's sync of every parameter (no LoRA).

For each: the median seconds of one sync (over `--syncs` syncs, the adapter changed before each),
the seconds of one generation (`--prompts` prompts x `--samples` samples x `--tokens` tokens) after
it, and the largest |sampler - trainer| logprob over every sampled token (the trainer: peft's
unmerged forward, as in training). A change to the adapter between syncs is a random step of
the size of a trained one.

    python benchmarks/lora_sync.py                      # tiny model, rank 8, all-linear
    python benchmarks/lora_sync.py --model small --rank 16
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

import torch  # noqa: E402

from rlvr.envs.sampler import SamplingSettings  # noqa: E402
from rlvr.trainers import lora  # noqa: E402
from rlvr.trainers.models import load_causal_lm, load_tokenizer, resolve_model  # noqa: E402
from rlvr.trainers.policy import token_logprobs  # noqa: E402
from rlvr.trainers.samplers import VLLMSampler  # noqa: E402


def perturb(policy: torch.nn.Module, gen: torch.Generator, size: float) -> None:
    """A random change of every adapter weight (B starts at 0: a trained adapter's is not)."""
    with torch.no_grad():
        for _name, p in policy.named_parameters():
            if p.requires_grad:
                p.add_(torch.randn(p.shape, generator=gen) * size)


def gap(policy: torch.nn.Module, prompts: list[list[int]], samples: list[list]) -> float:
    """Largest |sampler - trainer| logprob over the sampled tokens (temperature 1)."""
    worst = 0.0
    with torch.no_grad():
        for prompt, group in zip(prompts, samples):
            for s in group:
                ids = torch.tensor([prompt + list(s.token_ids)])
                logits = policy(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
                mine = token_logprobs(logits, torch.tensor(s.token_ids))
                worst = max(worst, float((mine - torch.tensor(s.logprobs)).abs().max()))
    return worst


def run(mode: str, args: argparse.Namespace) -> dict[str, float]:
    torch.manual_seed(0)
    path = resolve_model(args.model)
    tokenizer = load_tokenizer(path)
    policy = load_causal_lm(path)
    if mode != "full":
        policy = lora.wrap(policy, path, args.rank, None, args.targets)
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": f"What is {i} + {2 * i}?"}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        for i in range(args.prompts)
    ]
    prompts = [list(p["input_ids"]) if isinstance(p, dict) else list(p) for p in prompts]
    extra = {"enable_lora": True, "max_lora_rank": args.rank, "max_loras": 1} if mode == "vllm-lora" else {}
    sampler = VLLMSampler(str(path), seed=0, max_model_len=512, max_num_seqs=args.prompts * args.samples, **extra)
    sampling = SamplingSettings(temperature=1.0, top_p=1.0, max_tokens=args.tokens, seed=1)
    gen = torch.Generator().manual_seed(0)
    tmp = tempfile.TemporaryDirectory(prefix="rlvr-lora-sync-")
    request = None
    syncs, gens, gaps = [], [], []
    for _ in range(args.syncs):
        perturb(policy, gen, args.step_size)
        t0 = time.perf_counter()
        if mode == "full":
            sampler.update_weights((n, p.detach()) for n, p in policy.named_parameters())
        elif mode == "merged":
            sampler.update_weights(lora.merged_weights(policy))
        else:
            from vllm.lora.request import LoRARequest

            lora.save(policy, Path(tmp.name))
            request = LoRARequest("policy", 1, tmp.name, load_inplace=True)
            sampler.llm.llm_engine.add_lora(request)
            sampler.llm.reset_prefix_cache()
        syncs.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        if mode == "vllm-lora":
            from vllm.inputs import TokensPrompt

            from rlvr.trainers.samplers.vllm_sampler import _to_sample

            params = [
                sampler.sampling_params(args.samples, sampling, sampling.seed + j * args.samples)
                for j in range(len(prompts))
            ]
            outs = sampler.llm.generate(
                [TokensPrompt(prompt_token_ids=p) for p in prompts], params, lora_request=request, use_tqdm=False
            )
            samples = [[_to_sample(c, 0) for c in o.outputs] for o in outs]
        else:
            samples = sampler.generate(prompts, args.samples, sampling)
        gens.append(time.perf_counter() - t0)
        gaps.append(gap(policy, prompts, samples))
    sampler.close()
    tmp.cleanup()
    # the first sync and generation include one-off set-up (vLLM's LoRA manager): left out
    return {
        "sync_s": statistics.median(syncs[1:]),
        "first_sync_s": syncs[0],
        "generate_s": statistics.median(gens[1:]),
        "gap_max": max(gaps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--targets", default="all-linear")
    parser.add_argument("--syncs", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--step-size", type=float, default=2e-3)
    parser.add_argument("--modes", default="merged,vllm-lora,full")
    args = parser.parse_args()
    rows = [(mode, run(mode, args)) for mode in args.modes.split(",")]
    print(
        f"model {args.model}, rank {args.rank}, targets {args.targets}; {args.syncs} syncs, generation "
        f"{args.prompts} x {args.samples} x {args.tokens} tokens; threads {torch.get_num_threads()}"
    )
    print(f"{'sync':<10} {'sync s':>8} {'1st sync s':>10} {'generate s':>11} {'gap max':>9}")
    for mode, r in rows:
        print(
            f"{mode:<10} {r['sync_s']:>8.4f} {r['first_sync_s']:>10.4f} {r['generate_s']:>11.3f} {r['gap_max']:>9.1e}"
        )


if __name__ == "__main__":
    main()
