"""`ChatSampler`: an OpenAI-compatible `/v1/chat/completions` endpoint (text in, text out) behind the
`Sampler` protocol, to EVALUATE a served model that takes no token-id prompts (any chat server:
vLLM, llama.cpp, SGLang, a hosted API).

EVALUATION ONLY, NEVER TRAINING: the server renders the chat template and tokenizes itself, and
sends back text; the samples' token ids are that text tokenized here with the local tokenizer
(the ids the chat template gives the assistant message, eos included when the server says
"stop"), which need NOT be the tokens the model produced. Logprobs are the server's when it
offers them (`logprobs: true`) and its tokens are exactly those ids, else NaN.

How the messages reach the server: the rollout asks a sampler for token ids, so the sampler
hands out its own tokenizer, `sampler.tokenizer` (pass it to the rollout in place of the model's):
a wrapper that remembers the messages of every prompt it renders with the generation prompt;
`generate` sends those messages. A prompt it did not render is a `SamplerError`.

Without a local tokenizer, `sampler.tokenizer` is a `TextTokenizer`: UTF-8 bytes as token ids and
a plain ChatML-like template, so token counts are bytes. Plain `urllib`: no client library needed.
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.envs.sampler import FinishReason, Sample, SamplingSettings
from rlvr.trainers.samplers.openai_sampler import OpenAISampler, SamplerError


class TextTokenizer:
    """A stand-in tokenizer when the served model's own is not on this machine: token ids are the
    text's UTF-8 bytes (0-255) and 256 ends a turn (eos). The chat template is
    `<|role|>\\ncontent<|end|>\\n` per message, `<|assistant|>\\n` as the generation prompt; the server
    uses its own template: this one only lets rollouts keep transcripts and count bytes."""

    eos_token_id = 256
    eos_token = "<|end|>"
    pad_token_id = 256
    name_or_path = "utf-8 bytes"

    def encode(self, text: str, add_special_tokens: bool = False, **kwargs: Any) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str:
        out, chunk = [], bytearray()
        for t in token_ids:
            if int(t) < 256:
                chunk.append(int(t))
                continue
            out.append(chunk.decode("utf-8", errors="replace"))
            chunk = bytearray()
            if not skip_special_tokens:
                out.append(self.eos_token)
        out.append(chunk.decode("utf-8", errors="replace"))
        return "".join(out)

    def apply_chat_template(
        self,
        conversation: list[dict[str, str]],
        tokenize: bool = True,
        add_generation_prompt: bool = False,
        **kwargs: Any,
    ) -> Any:
        ids: list[int] = []
        for m in conversation:
            ids += self.encode(f"<|{m['role']}|>\n{m['content']}") + [self.eos_token_id] + self.encode("\n")
        if add_generation_prompt:
            ids += self.encode("<|assistant|>\n")
        return ids if tokenize else self.decode(ids)


class _RecordingTokenizer:
    """The local tokenizer, unchanged, except that a prompt rendered with the generation prompt is
    remembered as (its token ids -> its messages) for the sampler."""

    renders_whole_turns = True  # rollouts must render each turn's whole conversation through it

    def __init__(self, inner: Any, memo: dict[tuple[int, ...], list[dict[str, str]]], lock: threading.Lock):
        self._inner, self._memo, self._lock = inner, memo, lock

    def __getattr__(self, name: str) -> Any:
        if name in ("_inner", "_memo", "_lock"):  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self._inner, name)

    def apply_chat_template(self, conversation: Any, *args: Any, **kwargs: Any) -> Any:
        result = self._inner.apply_chat_template(conversation, *args, **kwargs)
        if kwargs.get("add_generation_prompt") and kwargs.get("tokenize", True):
            ids = result["input_ids"] if isinstance(result, Mapping) else result
            with self._lock:
                self._memo[tuple(int(t) for t in ids)] = copy.deepcopy(list(conversation))
        return result


class ChatSampler(OpenAISampler):
    """One `/v1/chat/completions` request per prompt (with `n`), up to `max_concurrency` in flight,
    each bounded by `timeout` seconds and retried `retries` times on connection errors and 5xx.
    A server that is down, or answers an error or something that is not a chat completion, is a
    `SamplerError`. `tokenizer`: the model's local tokenizer, or None for a `TextTokenizer`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        tokenizer: Any = None,
        timeout: float = 300.0,
        retries: int = 2,
        max_concurrency: int = 16,
    ):
        super().__init__(
            base_url,
            model,
            api_key,
            tokenizer=tokenizer,
            timeout=timeout,
            retries=retries,
            max_concurrency=max_concurrency,
        )
        root = base_url.rstrip("/")
        self.url = root + ("/chat/completions" if root.endswith("/v1") else "/v1/chat/completions")
        self._extras = {"logprobs": True}  # dropped if the server rejects it
        self._memo: dict[tuple[int, ...], list[dict[str, str]]] = {}
        self._lock = threading.Lock()
        self.local_tokenizer = tokenizer if tokenizer is not None else TextTokenizer()
        self.tokenizer = _RecordingTokenizer(self.local_tokenizer, self._memo, self._lock)
        self.token_exact = False  # for callers that must refuse to train on these samples

    def generate(
        self, prompt_token_ids: Sequence[Sequence[int]], n: int, sampling: SamplingSettings
    ) -> list[list[Sample]]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        prompts = [[int(t) for t in p] for p in prompt_token_ids]
        keys = [tuple(p) for p in prompts]
        with self._lock:  # look every prompt up before forgetting any: episodes may share a context
            found = [self._memo.get(k) for k in keys]
            if None in found:
                raise SamplerError(
                    "ChatSampler got a prompt it did not render: pass `sampler.tokenizer` (not the "
                    "model's own tokenizer) to the rollout, so that the chat messages can be sent"
                )
            for k in set(keys):
                del self._memo[k]
        jobs = list(enumerate(zip(prompts, found)))
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(jobs)))) as pool:
            return list(pool.map(lambda j: self._chat(j[1][0], j[1][1], n, sampling, j[0]), jobs))

    def _chat(
        self, prompt: list[int], messages: list[dict[str, str]], n: int, sampling: SamplingSettings, index: int
    ) -> list[Sample]:
        greedy = sampling.temperature == 0  # servers refuse n > 1 when greedy: ask once and copy
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "n": 1 if greedy else n,
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
        }
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.seed is not None:
            body["seed"] = sampling.seed + index * n
        answer = self._post(body)
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or len(choices) != body["n"]:
            raise SamplerError(f"{self.url}: asked for {body['n']} choices, got: {str(answer)[:300]}")
        choices = sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
        samples = [self._chat_sample(prompt, messages, c) for c in choices]
        return samples * n if greedy else samples

    def _chat_sample(self, prompt: list[int], messages: list[dict[str, str]], choice: Any) -> Sample:
        message = choice.get("message") if isinstance(choice, dict) else None
        text = message.get("content") if isinstance(message, dict) else None
        if text is None:
            text = "" if isinstance(message, dict) else None
        if not isinstance(text, str):
            raise SamplerError(f"{self.url} answered a choice with no message text: {str(choice)[:300]}")
        finish = choice.get("finish_reason")
        if finish not in tuple(FinishReason):  # e.g. "content_filter", "tool_calls"
            raise SamplerError(f"{self.url}: unexpected finish_reason {finish!r}")
        ids = self._ids(prompt, messages, text, finish == FinishReason.STOP)
        return Sample(tuple(ids), tuple(self._logprobs(choice, ids)), FinishReason(finish))

    def _ids(self, prompt: list[int], messages: list[dict[str, str]], text: str, ended: bool) -> list[int]:
        """The ids the chat template gives `text` as the assistant's message (up to its eos, which is
        kept if the model ended its turn), so that the rollout's next prompt is exactly the template
        of the conversation; else the text's plain encoding (plus eos)."""
        tok, eos = self.local_tokenizer, self.local_tokenizer.eos_token_id
        full = tok.apply_chat_template(
            messages + [{"role": "assistant", "content": text}],
            tokenize=True,
            add_generation_prompt=False,
            return_dict=False,
        )
        full = [int(t) for t in (full["input_ids"] if isinstance(full, Mapping) else full)]
        rest = full[len(prompt) :]
        if full[: len(prompt)] == prompt and eos in rest:
            end = rest.index(eos)
            return rest[: end + 1] if ended else rest[:end]
        return list(tok.encode(text, add_special_tokens=False)) + ([eos] if ended else [])

    def _logprobs(self, choice: dict[str, Any], ids: list[int]) -> list[float]:
        """The server's logprobs where its tokens are exactly `ids` (an eos it leaves out gets NaN)."""
        entries = (
            ((choice.get("logprobs") or {}).get("content") or []) if isinstance(choice.get("logprobs"), dict) else []
        )
        nan = [math.nan] * len(ids)
        if len(entries) not in (len(ids), len(ids) - 1) or not ids:
            return nan
        try:
            tokens = [str(e["token"]) for e in entries]
            values = [math.nan if e.get("logprob") is None else float(e["logprob"]) for e in entries]
        except (KeyError, TypeError, ValueError, AttributeError):
            return nan
        ours = [self.local_tokenizer.decode([t]) for t in ids[: len(entries)]]
        if tokens != ours:
            return nan
        return values + [math.nan] * (len(ids) - len(values))


def build(spec: Any, version: int = 0, policy: Any = None) -> ChatSampler:
    """The registry's builder (`trainers.samplers.registry`): chat messages to `spec.base_url`;
    `spec.tokenizer`, when set, is the served model's tokenizer (else UTF-8 bytes count as tokens).
    Its `tokenizer` (what rollouts must template with) remembers each prompt's messages."""
    if spec.base_url is None:
        raise ValueError("the openai-chat sampler needs base_url")
    tokenizer = None
    if spec.tokenizer is not None:
        from rlvr.trainers.models import load_tokenizer

        tokenizer = load_tokenizer(spec.tokenizer)
    return ChatSampler(spec.base_url, spec.model, spec.api_key, tokenizer=tokenizer)
