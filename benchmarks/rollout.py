"""Rollout throughput: rlvr's `rollout` with the vLLM sampler beside raw `LLM.generate`.

Both sample the same prompts (rlvr/Arithmetic-v0 tasks, chat-templated) with the same settings
(G samples per prompt, the same per-request seeds, logprobs) on the same engine, alternating,
after a warm-up of each. rlvr's time includes everything a rollout does: making and resetting
G environments per task, sampling, decoding, the environment steps (verification) and
building the episodes. Its environments' threads are kept from call to call, as the trainer
keeps them. Throughput is generated tokens per second; the target is rlvr >= 0.9x raw (0.95x on
the real model, issue 39: `--model smollm2-135m --tasks 8 --group-size 8 --repeats 5 --target 0.95`).

    python benchmarks/rollout.py [--model tiny] [--tasks 64] [--group-size 8] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

TARGET = 0.9


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--tasks", type=int, default=64)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each (the median is reported)")
    p.add_argument("--target", type=float, default=TARGET, help=f"the least rlvr/raw ratio that passes ({TARGET})")
    args = p.parse_args(argv)

    from rlvr import envs
    from rlvr.envs.chat_template import template_ids
    from rlvr.envs.rollout import RolloutRequest, rollout
    from rlvr.envs.sampler import SamplingSettings
    from rlvr.trainers.models import load_tokenizer, resolve_model
    from rlvr.trainers.samplers import VLLMSampler
    from rlvr.trainers.samplers.local import local_sampler

    env_id, env_args = "rlvr/Arithmetic-v0", envs.parse_env_args(args.env_arg)
    model = resolve_model(args.model)
    tokenizer = load_tokenizer(model)
    sampler = VLLMSampler(str(model))
    seeds = list(range(1_000_000, 1_000_000 + args.tasks))
    env = envs.make(env_id, **env_args)
    prompts = [template_ids(tokenizer, env.reset(seed=s)[0], add_generation_prompt=True) for s in seeds]
    sampling = SamplingSettings(temperature=args.temperature, max_tokens=args.max_tokens, seed=0)
    G = args.group_size

    def raw() -> tuple[int, float]:
        from vllm.inputs import TokensPrompt

        # Exactly what VLLMSampler sends: one request per prompt, n=G, seeds spaced G apart.
        params = [sampler.sampling_params(G, sampling, sampling.seed + i * G) for i in range(len(prompts))]
        t0 = time.perf_counter()
        outputs = sampler.llm.generate([TokensPrompt(prompt_token_ids=q) for q in prompts], params, use_tqdm=False)
        seconds = time.perf_counter() - t0
        return sum(len(c.token_ids) for o in outputs for c in o.outputs), seconds

    sampling_seconds: list[float] = []
    timed_sampler = local_sampler(sampler)  # as the trainer wraps it: the engine's time counted, the rest is overhead

    def rlvr() -> tuple[int, float]:
        timed_sampler.reset_clock()
        t0 = time.perf_counter()
        groups = rollout(
            RolloutRequest(env_id, env_args, seeds=seeds, group_size=G, sampling=sampling),
            timed_sampler,
            tokenizer,
            progress=False,
            executor=env_pool,
        )
        seconds = time.perf_counter() - t0
        sampling_seconds.append(timed_sampler.seconds)
        return sum(sum(ep.loss_mask) for g in groups for ep in g.episodes), seconds

    with sampler, ThreadPoolExecutor(max_workers=64) as env_pool:
        raw(), rlvr()  # warm-up: the first generate at a new batch shape is slow
        sampling_seconds.clear()
        runs: dict[str, list[tuple[int, float]]] = {"raw LLM.generate": [], "rlvr rollout": []}
        for _ in range(args.repeats):
            runs["raw LLM.generate"].append(raw())
            runs["rlvr rollout"].append(rlvr())

    rates = {name: statistics.median(t / s for t, s in r) for name, r in runs.items()}
    ratio = rates["rlvr rollout"] / rates["raw LLM.generate"]
    print(
        f"\n{env_id} {env_args or ''}: {args.tasks} tasks x G={G}, max_tokens {args.max_tokens}, "
        f"T={args.temperature}, model {model}"
    )
    print(f"{'':<18} {'tokens':>8} {'seconds':>8} {'tokens/s':>9} {'sampling s':>10} {'other s':>8}")
    for name, r in runs.items():
        tokens, seconds = statistics.median(t for t, _ in r), statistics.median(s for _, s in r)
        if name == "rlvr rollout":  # time outside generate: envs, verification, bookkeeping
            inside = statistics.median(sampling_seconds)
            split = f"{inside:>10.3f} {statistics.median(s - i for (_, s), i in zip(r, sampling_seconds)):>8.3f}"
        else:
            split = f"{seconds:>10.3f} {0:>8.3f}"
        print(f"{name:<18} {tokens:>8.0f} {seconds:>8.3f} {rates[name]:>9,.0f} {split}")
    # each run's rlvr rate over the raw run just before it: the spread of the ratio itself
    paired = sorted((t / s) / (rt / rs) for (t, s), (rt, rs) in zip(runs["rlvr rollout"], runs["raw LLM.generate"]))
    verdict = "PASS" if ratio >= args.target else "FAIL"
    print(
        f"rlvr / raw: {ratio:.3f}  (paired runs {paired[0]:.3f}-{paired[-1]:.3f}, {len(paired)} runs; "
        f"target >= {args.target}: {verdict})"
    )
    return 0 if ratio >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
