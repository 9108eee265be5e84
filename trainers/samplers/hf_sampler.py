"""`HFSampler`: Hugging Face `generate` behind the `Sampler` protocol, for machines without vLLM.

It wraps a live model object, so a trainer that samples with it needs no weight sync
(`update_weights` does nothing). Logprobs are those of the distribution actually sampled from
(after temperature and top-p; at temperature 0, of the raw logits), as with `VLLMSampler`. They
are kept one step at a time by the last logits processor, never as `output_scores` (batch x
length x vocabulary floats: gigabytes for a real vocabulary).

Determinism: a seeded call draws all its rows from one private random stream, `batch_size` rows
per `generate`, each batch left-padded to its longest prompt, in float32 kernels whose sums follow
the batch's shape. A row's tokens are thus a function of the whole call (its rows, their order,
the seed, `batch_size`), not of the row's own seed: the same call gives the same samples, bit for
bit, on one machine and thread count; the same prompt in another call may not. A caller that must
reproduce samples after a stop redoes whole calls (`rlvr eval` resumes by whole chunks,
`rlvr.envs.episode_log`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList
from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

from rlvr.envs.sampler import FinishReason, Sample, SamplingSettings


class HFSampler:
    """`n` samples per prompt with `model.generate`, `batch_size` sequences at a time (left-padded)."""

    version: int | None = None  # the live model's weights are always the trainer's: nothing to track
    track_versions = False  # weights never change under it mid-sample (asynchronous RL needs vllm)

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 64):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        eos = getattr(model.generation_config, "eos_token_id", None)
        eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        if tokenizer.eos_token_id is not None:
            eos.append(tokenizer.eos_token_id)
        if not eos:
            raise ValueError("neither the model's generation config nor the tokenizer names an eos token")
        self.eos_token_ids = sorted(set(eos))
        pad = tokenizer.pad_token_id
        self.pad_token_id = self.eos_token_ids[0] if pad is None else pad
        # The context limit, read by rollouts to end episodes that would overflow it.
        self.max_model_len = getattr(model.config, "max_position_embeddings", None)

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]] = (), version: int | None = None) -> None:
        """Nothing to do: generation reads the live model's weights."""

    def close(self) -> None:
        """Nothing to free: the model is the caller's."""

    def generation_config(self, sampling: SamplingSettings) -> GenerationConfig:
        """Plain sampling (or greedy) from the scores `_SampledLogprobs` hands back. Every knob is
        set, to a neutral value where it is not ours: `generate` fills the ones left None from the
        model's own generation config (a checkpoint's top_k=20 or repetition_penalty=1.05)."""
        return GenerationConfig(
            max_new_tokens=sampling.max_tokens,
            min_new_tokens=0,
            do_sample=sampling.temperature > 0,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            min_p=0.0,
            typical_p=1.0,
            epsilon_cutoff=0.0,
            eta_cutoff=0.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            num_beams=1,
            eos_token_id=self.eos_token_ids,
            pad_token_id=self.pad_token_id,
            stop_strings=list(sampling.stop) or None,
            return_dict_in_generate=True,
        )

    def generate(
        self, prompt_token_ids: Sequence[Sequence[int]], n: int, sampling: SamplingSettings
    ) -> list[list[Sample]]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        rows = [list(p) for p in prompt_token_ids for _ in range(n)]
        if any(not r for r in rows):
            raise ValueError("every prompt needs at least one token")
        config = self.generation_config(sampling)
        was_training = self.model.training
        self.model.eval()
        samples: list[Sample] = []
        try:
            # A private RNG stream: a seed makes the call reproducible without touching the caller's.
            with torch.no_grad(), torch.random.fork_rng(devices=_cuda_devices(self.model)):
                if sampling.seed is not None:
                    torch.manual_seed(sampling.seed)
                for start in range(0, len(rows), self.batch_size):
                    samples += self._generate_batch(rows[start : start + self.batch_size], config, sampling)
        finally:
            self.model.train(was_training)
        return [samples[i * n : (i + 1) * n] for i in range(len(prompt_token_ids))]

    def _generate_batch(
        self, rows: list[list[int]], config: GenerationConfig, sampling: SamplingSettings
    ) -> list[Sample]:
        width = max(len(r) for r in rows)
        device = self.model.device
        input_ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):  # left padding: every row's next token is at the same column
            input_ids[i, width - len(r) :] = torch.tensor(r)
            attention_mask[i, width - len(r) :] = 1
        recorder = _SampledLogprobs(sampling)
        out = self.model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention_mask.to(device),
            generation_config=config,
            logits_processor=LogitsProcessorList([recorder]),
            tokenizer=self.tokenizer if sampling.stop else None,
        )
        recorder.take(out.sequences[:, -1])  # the last step's token
        new = out.sequences[:, width:].cpu()
        logprobs = torch.stack(recorder.logprobs, dim=1) if recorder.logprobs else torch.zeros(new.shape)
        if logprobs.shape != new.shape:
            raise RuntimeError(f"kept {tuple(logprobs.shape)} logprobs for {tuple(new.shape)} generated tokens")
        return [self._trim(new[i].tolist(), logprobs[i].tolist(), sampling) for i in range(len(rows))]

    def _trim(self, tokens: list[int], logprobs: list[float], sampling: SamplingSettings) -> Sample:
        """Cut a generated row to what the model produced: through the first eos or stop string,
        else all `max_tokens`. (Padding after a finished row is never taken for model tokens,
        even where the pad id is a token the model could emit.)"""
        eos = set(self.eos_token_ids)
        eos_end = next((i + 1 for i, t in enumerate(tokens) if t in eos), None)
        stop_end = self._stop_string_end(tokens[: eos_end or len(tokens)], sampling.stop)
        if stop_end is not None or eos_end is not None:
            end, reason = (stop_end or eos_end), FinishReason.STOP
        else:
            end, reason = sampling.max_tokens, FinishReason.LENGTH
            if len(tokens) < end:
                raise RuntimeError(f"generate returned {len(tokens)} tokens for an unfinished row (expected {end})")
        return Sample(tuple(tokens[:end]), tuple(logprobs[:end]), reason)

    def _stop_string_end(self, tokens: list[int], stop: tuple[str, ...]) -> int | None:
        """The shortest prefix whose text contains a stop string (as vLLM cuts), or None."""

        def hit(k: int) -> bool:
            text = self.tokenizer.decode(tokens[:k], skip_special_tokens=True)
            return any(s in text for s in stop)

        if not stop or not hit(len(tokens)):
            return None
        lo, hi = 1, len(tokens)  # hit(hi) is true; find the first true
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if hit(mid) else (mid + 1, hi)
        return lo


class _SampledLogprobs(LogitsProcessor):
    """The last logits processor (HF puts its own temperature and top-p warpers after custom
    processors, so this one applies them itself, with HF's classes). At each step it hands back
    the processed scores that `generate` samples from and keeps their log-softmax until the next
    step, whose input ids end with the token drawn from them: then only that token's logprob is kept."""

    def __init__(self, sampling: SamplingSettings):
        warpers: list[LogitsProcessor] = []
        if sampling.temperature > 0:  # greedy: the raw distribution, as vLLM reports it
            if sampling.temperature != 1.0:
                warpers.append(TemperatureLogitsWarper(sampling.temperature))
            if sampling.top_p < 1.0:
                warpers.append(TopPLogitsWarper(sampling.top_p))
        self.warpers = LogitsProcessorList(warpers)
        self.pending: torch.Tensor | None = None
        self.logprobs: list[torch.Tensor] = []

    def take(self, tokens: torch.Tensor) -> None:
        if self.pending is not None:
            self.logprobs.append(self.pending.gather(1, tokens[:, None].to(self.pending.device)).squeeze(1).cpu())
            self.pending = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.take(input_ids[:, -1])
        scores = self.warpers(input_ids, scores)
        self.pending = torch.log_softmax(scores.float(), dim=-1)
        return scores


def _cuda_devices(model: Any) -> list[int]:
    device = getattr(model, "device", torch.device("cpu"))
    return [device.index or 0] if device.type == "cuda" else []


class HFCopySampler(HFSampler):
    """An `HFSampler` on its own copy of the policy (a Ray rollout worker's, `--ray --sampler hf`):
    `update_weights` copies the trainer's weights in, by name, as policy `version`."""

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 64, version: int = 0):
        super().__init__(model, tokenizer, batch_size=batch_size)
        self.version = int(version)

    @torch.no_grad()
    def update_weights(self, named_tensors: Iterable[tuple[str, Any]] = (), version: int | None = None) -> None:
        params = dict(self.model.named_parameters())
        for name, tensor in named_tensors:
            if name not in params:
                raise KeyError(f"the sampler's model has no parameter {name!r}")
            params[name].copy_(tensor)
        self.version = self.version + 1 if version is None else int(version)


def build(spec: Any, version: int, policy: Any = None) -> HFSampler:
    """The registry's builder (`trainers.samplers.registry`): on the trainer's live `policy` when
    given (it shares the weights: nothing to sync), else on its own copy of `spec.model` (a Ray
    rollout worker's, `rlvr eval`'s), which takes the trainer's weights by name."""
    from rlvr.trainers.models import load_causal_lm, load_tokenizer

    tokenizer = load_tokenizer(spec.tokenizer or spec.model)
    if policy is not None:
        return HFSampler(policy, tokenizer)
    return HFCopySampler(load_causal_lm(spec.model), tokenizer, version=version)
