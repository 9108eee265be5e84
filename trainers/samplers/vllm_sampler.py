"""`VLLMSampler`: the rollout sampler on `vllm.LLM`, with in-place weight updates.

The engine runs in the calling process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, set before vLLM is
imported unless the caller set it): start-up takes seconds instead of tens of seconds, and
`collective_rpc` can hand the worker live tensors and functions, which `update_weights` needs.
The same code runs on vLLM-CPU and on CUDA vLLM.

Logprobs are those of the distribution actually sampled from (`logprobs_mode=
"processed_logprobs"`): log-softmax of the logits after temperature scaling and top-p/top-k
masking, so with `top_p < 1` they are renormalised over the nucleus; at temperature 0 (greedy)
vLLM skips the scaling and they are plain log-softmax of the raw logits. A trainer matches them
with `log_softmax(logits / temperature)` (top-p 1).

Seeds: with `SamplingSettings.seed`, the i-th prompt's request gets seed + i*n (vLLM seeds its n
samples seed, seed+1, ...), so no two samples of a call share a seed and a call is reproducible.
Greedy (temperature 0) samples once per prompt and copies it n times. On CPU two defaults
differ from vLLM's: whole-prompt prefill, and a KV cache sized to `max_num_seqs` sequences of
`max_model_len` tokens (at most 2 GiB) instead of 92% of the machine (reasons in `__init__`).
"""

from __future__ import annotations

import gc
import itertools
import os
from collections.abc import Iterable, Sequence
from typing import Any

from rlvr.envs.sampler import FinishReason, Sample, SamplingSettings

CPU_KV_CACHE_MAX_BYTES = 2 * 2**30  # cap on the default KV cache on CPU (about a million tokens of the tiny model)
# vLLM-CPU's default KV block is 128 tokens, and prefix caching reuses whole blocks only: a
# multi-turn episode's next turn, whose context is mostly cached, was prefilled anew whenever its
# context was under 128 tokens. 32 is the smallest block its attention takes; single-turn
# sampling is as fast (benchmarks/README.md).
CPU_BLOCK_SIZE = 32
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def kv_cache_bytes(
    hf_config: Any,
    max_model_len: int,
    max_num_seqs: int,
    dtype: str = "float32",
    block_size: int = CPU_BLOCK_SIZE,
    seq_tokens: int | None = None,
) -> int:
    """KV cache for `max_num_seqs` sequences of `seq_tokens` tokens (default `max_model_len`; plus
    one block each, for block rounding), capped at `CPU_KV_CACHE_MAX_BYTES`: a batch of that many
    runs at once; more sequences, or longer ones, wait their turn. Never less than one sequence of
    `max_model_len` (vLLM's minimum)."""
    text = getattr(hf_config, "text_config", None) or hf_config
    heads = int(text.num_attention_heads)
    head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // heads)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    per_token = 2 * int(text.num_hidden_layers) * kv_heads * head_dim * DTYPE_BYTES.get(dtype, 4)
    whole = (max_model_len + block_size) * per_token
    per_seq = (min(seq_tokens or max_model_len, max_model_len) + block_size) * per_token
    return max(whole, min(max_num_seqs * per_seq, CPU_KV_CACHE_MAX_BYTES))


def _import_vllm():
    # Must precede the first `import vllm`: the engine mode and log level are read when it starts.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # Every in-place weight sync logs two INFO lines and a harmless WARNING (rotary embeddings have
    # no weights to load), which would bury the progress bar; set VLLM_LOGGING_LEVEL to see them.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    import vllm
    from vllm.inputs import TokensPrompt

    return vllm, TokensPrompt


def _repack_lm_head(worker: Any) -> None:
    """Runs inside the vLLM worker. vLLM-CPU keeps a pre-packed copy of each linear weight; a
    tied `lm_head` shares its weight with the embedding, so a reload refreshes the weight but not
    the packed copy, and logprobs go wrong. Re-pack it from the (new) weight."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    dispatch_cpu_unquantized_gemm(worker.model_runner.get_model().lm_head, remove_weight=False)


class VLLMSampler:
    """Samples with `vllm.LLM` (`n` samples per prompt in one call, `logprobs=0`).

    `max_num_seqs` is how many sequences run at once (a training step's batch, say); on CPU it
    also sizes the KV cache, with `seq_tokens` tokens a sequence (prompt plus completion; default
    the whole context): the cache is resident memory, and most tasks need a fraction of the
    context. `llm_kwargs` go to `vllm.LLM` as they are (e.g.
    `gpu_memory_utilization`, `kv_cache_memory_bytes`)."""

    def __init__(
        self,
        model_path: str,
        *,
        seed: int = 0,
        max_model_len: int | None = None,
        dtype: str = "float32",
        enforce_eager: bool = True,
        max_num_seqs: int = 256,
        seq_tokens: int | None = None,
        tokenizer: Any = None,
        version: int = 0,
        **llm_kwargs: Any,
    ):
        vllm, self._tokens_prompt = _import_vllm()
        self.model_dir = model_path  # a `ServableDir`'s temporary directory lives as long as the sampler
        self.tokenizer = tokenizer  # the Hugging Face tokenizer of its ids, for rollouts (`build` sets it)
        # Tensors (not lists) reach the worker only when the engine shares this process.
        self.in_process = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"
        from vllm.platforms import current_platform

        self._vllm = vllm
        self.model_path = str(model_path)
        llm_kwargs.setdefault("logprobs_mode", "processed_logprobs")
        # The "Loading safetensors checkpoint shards" bar goes with vLLM's INFO logs (`--verbose`).
        llm_kwargs.setdefault(
            "use_tqdm_on_load", os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper() in ("DEBUG", "INFO")
        )
        if current_platform.is_cpu():
            # vLLM-CPU 0.32 crashes ("CPU Generator does not use offset") when a seeded request's
            # prefill is split across steps, which large batches cause: prefill whole prompts.
            llm_kwargs.setdefault("enable_chunked_prefill", False)
            llm_kwargs.setdefault("block_size", CPU_BLOCK_SIZE)
            # Without a KV cache size vLLM-CPU reserves (and touches) 92% of the machine's memory,
            # and refuses to start when other processes hold more than 8%; the batch needs far
            # less. VLLM_CPU_KVCACHE_SPACE (whole GiB), when set, overrides this.
            if "kv_cache_memory_bytes" not in llm_kwargs:
                from transformers import AutoConfig

                hf = AutoConfig.from_pretrained(self.model_path)
                length = max_model_len or int(getattr(hf, "max_position_embeddings", 4096))
                llm_kwargs["kv_cache_memory_bytes"] = kv_cache_bytes(
                    hf, length, max_num_seqs, dtype, llm_kwargs["block_size"], seq_tokens
                )
        self.llm = vllm.LLM(
            model=self.model_path,
            seed=seed,
            max_model_len=max_model_len,
            dtype=dtype,
            enforce_eager=enforce_eager,
            max_num_seqs=max_num_seqs,
            **llm_kwargs,
        )
        # None above: the model's own limit. Rollouts read this to end episodes that would overflow.
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        hf_config = self.llm.llm_engine.model_config.hf_config
        self._keys = itertools.count()
        self._copies: dict[str, int] = {}  # submitted request -> copies of its samples (greedy: n)
        # The policy version of the weights loaded (`update_weights` sets it); every token is tagged
        # with it. With weights loaded between engine steps, `track_versions` streams requests
        # token by token (vLLM's DELTA outputs), so each token gets the version that sampled it.
        self.version = int(version)
        self.track_versions = False
        self._streams: dict[str, dict[int, _Stream]] = {}
        self._repack_tied_head = current_platform.is_cpu() and bool(getattr(hf_config, "tie_word_embeddings", False))

    def sampling_params(self, n: int, sampling: SamplingSettings, seed: int | None = None):
        """vLLM `SamplingParams` for `sampling`; also what benchmarks hand raw `LLM.generate`."""
        # A `Sample` is token ids only, so vLLM's incremental detokenization (of every token and of
        # every logprob's token) is wasted work, about 8% of a step's sampling here, except where
        # stop strings need the text.
        return self._vllm.SamplingParams(
            n=n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
            stop=list(sampling.stop) or None,
            seed=seed,
            logprobs=0,
            detokenize=bool(sampling.stop),
        )

    def close(self) -> None:
        """Free the engine (weights, KV cache) now. vLLM `gc.freeze`s what it allocates at start,
        so dropping the object alone would leak it until the process ends."""
        llm, self.llm = self.llm, None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()

    def __enter__(self) -> VLLMSampler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _engine(self) -> Any:
        if self.llm is None:
            raise RuntimeError("this VLLMSampler is closed")
        return self.llm

    def generate(
        self, prompt_token_ids: Sequence[Sequence[int]], n: int, sampling: SamplingSettings
    ) -> list[list[Sample]]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if not prompt_token_ids:
            return []
        # vLLM refuses n > 1 when greedy: sample once and copy (greedy is deterministic).
        greedy = sampling.temperature == 0
        per_request = 1 if greedy else n
        prompts = [self._tokens_prompt(prompt_token_ids=list(p)) for p in prompt_token_ids]
        if sampling.seed is None:
            params: Any = self.sampling_params(per_request, sampling)
        else:
            # vLLM seeds the n children of a request with seed, seed+1, ...: space the requests
            # n apart so no two samples of one call share a seed (identical prompts would
            # otherwise give identical samples).
            params = [self.sampling_params(per_request, sampling, sampling.seed + i * n) for i in range(len(prompts))]
        outputs = self._engine().generate(prompts, params, use_tqdm=False)
        samples = [[_to_sample(c, self.version) for c in out.outputs] for out in outputs]
        return [s * n for s in samples] if greedy else samples

    # ---- request-level submission: per-episode rollouts (`envs.rollout`) ----------------------
    def submit(self, prompt_token_ids: Sequence[int], n: int, sampling: SamplingSettings) -> str:
        """Queue one prompt for `n` samples without running the engine; `poll` runs it. Returns the
        request's key. Seeded as `generate` seeds a single prompt. Not to be mixed with a
        concurrent `generate` (one engine, one caller)."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        llm = self._engine()
        greedy = sampling.temperature == 0
        params = self.sampling_params(1 if greedy else n, sampling, sampling.seed)
        from vllm.sampling_params import RequestOutputKind

        # One output per request when it ends; or, tracking versions, each step's new tokens.
        params.output_kind = RequestOutputKind.DELTA if self.track_versions else RequestOutputKind.FINAL_ONLY
        # Made for this request alone, so the engine need not deep-copy it (as vLLM's own server
        # marks its per-request params): about 0.15 ms of every turn a multi-turn rollout submits.
        params.skip_clone = True
        key = f"rlvr-{next(self._keys)}"
        llm.llm_engine.add_request(key, self._tokens_prompt(prompt_token_ids=list(prompt_token_ids)), params)
        self._copies[key] = n if greedy else 1
        if self.track_versions:
            self._streams[key] = {}
        return key

    def poll(self) -> list[tuple[str, list[Sample]]]:
        """Run one engine step; the requests it finished, as (key, their samples)."""
        done = []
        for out in self._engine().llm_engine.step():
            key = out.request_id
            if key not in self._copies:
                continue
            stream = self._streams.get(key)
            if stream is not None:  # DELTA: this step's tokens of each sample, sampled by these weights
                for c in out.outputs:
                    stream.setdefault(c.index, _Stream()).add(c, self.version)
            if out.finished:
                if stream is not None:
                    samples = [stream[i].sample() for i in sorted(self._streams.pop(key))]
                else:
                    samples = [_to_sample(c, self.version) for c in out.outputs]
                done.append((key, samples * self._copies.pop(key)))
        return done

    def unfinished(self) -> int:
        """Requests submitted and not yet returned by `poll`."""
        return len(self._copies)

    def cancel(self) -> None:
        """Abort every unfinished request, so that a later `generate` sees only its own."""
        if self._copies and self.llm is not None:
            self.llm.llm_engine.abort_request(list(self._copies))
        self._copies.clear()
        self._streams.clear()

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]], version: int | None = None) -> None:
        """Load new policy weights in place (names as in the Hugging Face checkpoint); `version`
        (default: one more than now) tags the tokens they sample."""
        if not self.in_process:
            raise RuntimeError(
                "update_weights hands tensors to the engine in this process; it needs "
                "VLLM_ENABLE_V1_MULTIPROCESSING=0 (unset it, and VLLMSampler sets it)"
            )
        llm = self._engine()
        llm.collective_rpc("reload_weights", kwargs={"weights_iterator": list(named_tensors)})
        if self._repack_tied_head:
            llm.collective_rpc(_repack_lm_head)
        llm.reset_prefix_cache()  # cached prompt KV was computed with the old weights
        self.version = self.version + 1 if version is None else int(version)


def build(spec: Any, version: int, policy: Any = None) -> VLLMSampler:
    """The registry's builder (`trainers.samplers.registry`): an engine started from `spec.model`
    (a LoRA checkpoint: its base with the adapter merged, in a temporary directory kept as long as
    the sampler). Unset settings keep `VLLMSampler`'s defaults. Sampling in the training dtype keeps
    the sampler/trainer logprob gap about rounding, not dtype; on a GPU the trainer's models share
    the card, so the engine takes only `gpu_memory` of it (vLLM's own default, 0.9, would leave the
    trainer nothing; vLLM-CPU ignores it). `policy` is not used: the engine holds its own weights."""
    from rlvr.trainers.models import load_tokenizer, servable_dir

    settings = {
        "max_model_len": spec.max_model_len,
        "dtype": spec.dtype,
        "max_num_seqs": spec.max_num_seqs,
        "seq_tokens": spec.seq_tokens,
        "gpu_memory_utilization": spec.gpu_memory,
        "enable_chunked_prefill": spec.chunked_prefill,
    }
    tokenizer = load_tokenizer(spec.tokenizer or spec.model)
    return VLLMSampler(
        servable_dir(spec.model),
        seed=spec.seed,
        tokenizer=tokenizer,
        version=version,
        **{k: v for k, v in settings.items() if v is not None},
    )


def _tokens(completion: Any) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """A vLLM completion's (new) token ids and their sampled logprobs."""
    token_ids = tuple(int(t) for t in completion.token_ids)
    if completion.logprobs is None or len(completion.logprobs) != len(token_ids):
        raise RuntimeError("vLLM returned no per-token logprobs; was logprobs=0 dropped?")
    return token_ids, tuple(float(step[t].logprob) for step, t in zip(completion.logprobs, token_ids))


def _finish(reason: Any) -> FinishReason:
    # vLLM reports "stop" for eos, stop strings and stop tokens, "length" at max_tokens.
    if reason not in tuple(FinishReason):  # e.g. "abort": not a completion to train on
        raise RuntimeError(f"vLLM ended a completion with {reason!r}")
    return FinishReason(reason)


def _to_sample(completion: Any, version: int) -> Sample:
    token_ids, logprobs = _tokens(completion)
    return Sample(token_ids, logprobs, _finish(completion.finish_reason), (version,) * len(token_ids))


class _Stream:
    """One sample of a streamed (DELTA) request, put together step by step."""

    def __init__(self) -> None:
        self.token_ids: list[int] = []
        self.logprobs: list[float] = []
        self.versions: list[int] = []
        self.finish_reason: Any = None

    def add(self, completion: Any, version: int) -> None:
        token_ids, logprobs = _tokens(completion)
        self.token_ids += token_ids
        self.logprobs += logprobs
        self.versions += [version] * len(token_ids)
        self.finish_reason = completion.finish_reason or self.finish_reason

    def sample(self) -> Sample:
        return Sample(tuple(self.token_ids), tuple(self.logprobs), _finish(self.finish_reason), tuple(self.versions))
