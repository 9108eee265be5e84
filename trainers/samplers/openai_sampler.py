"""`OpenAISampler`: an OpenAI-compatible `/v1/completions` endpoint behind the `Sampler` protocol,
to evaluate a served model (e.g. `vllm serve`).

Prompts go as token ids. Token ids come back exactly when the server returns them (vLLM:
`return_token_ids`); failing that, from `return_tokens_as_token_ids` logprob entries
("token_id:N"); failing that, the text is re-tokenized with `tokenizer` and the sample is not
token-exact (fine for evaluation, not for training). Logprobs are the server's `token_logprobs`
where it gives them (vLLM started with `--logprobs-mode processed_logprobs` matches
`VLLMSampler`), else NaN. Plain `urllib`: no client library needed.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.envs.sampler import FinishReason, Sample, SamplingSettings
from rlvr.errors import RlvrError

VLLM_EXTRAS = {"return_token_ids": True, "return_tokens_as_token_ids": True}


class SamplerError(RlvrError, RuntimeError):
    """The endpoint failed or answered something that is not a completion."""


class OpenAISampler:
    """One request per prompt (with `n`), up to `max_concurrency` in flight; each bounded by
    `timeout` seconds and retried `retries` times on connection errors and 5xx answers."""

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
        self.url = base_url.rstrip("/") + (
            "/completions" if base_url.rstrip("/").endswith("/v1") else "/v1/completions"
        )
        self.model = model
        self.api_key = api_key
        self.tokenizer = tokenizer
        self.timeout = timeout
        self.retries = retries
        self.max_concurrency = max_concurrency
        self._extras = dict(VLLM_EXTRAS)  # dropped after a server rejects them

    version: int | None = None  # the server's weights: not ours to track
    max_model_len: int | None = None  # the server enforces its own
    track_versions = False

    def update_weights(self, named_tensors: Any = (), version: int | None = None) -> None:
        raise NotImplementedError("a served model's weights are the server's business")

    def close(self) -> None:
        """Nothing to free: each request opens and closes its own connection."""

    def generate(
        self, prompt_token_ids: Sequence[Sequence[int]], n: int, sampling: SamplingSettings
    ) -> list[list[Sample]]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        prompts = [list(map(int, p)) for p in prompt_token_ids]
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(prompts)))) as pool:
            return list(pool.map(lambda ip: self._complete(ip[1], n, sampling, ip[0]), enumerate(prompts)))

    def _complete(self, prompt: list[int], n: int, sampling: SamplingSettings, index: int) -> list[Sample]:
        # Servers refuse n > 1 when greedy (vLLM does): ask once and copy; greedy is deterministic.
        greedy = sampling.temperature == 0
        body = {
            "model": self.model,
            "prompt": prompt,
            "n": 1 if greedy else n,
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "logprobs": 0,
            "skip_special_tokens": True,
        }
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.seed is not None:
            body["seed"] = sampling.seed + index * n  # distinct per request, as VLLMSampler does
        answer = self._post(body)
        choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != body["n"]:
            raise SamplerError(f"asked for {body['n']} choices, got {len(choices)}: {str(answer)[:300]}")
        samples = [self._to_sample(c, sampling) for c in choices]
        return samples * n if greedy else samples

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(
                self.url,
                data=json.dumps({**body, **self._extras}).encode(),
                headers=headers,
                method="POST",
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as e:
                detail = e.read()[:500].decode(errors="replace")
                if e.code == 400 and self._extras and any(k in detail for k in self._extras):
                    self._extras = {}  # not vLLM: ask again without its extensions
                    continue
                if e.code < 500 or attempt == self.retries:
                    raise SamplerError(f"{self.url} answered {e.code}: {detail}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                if attempt == self.retries:
                    raise SamplerError(f"{self.url} unreachable: {e}") from None
            except json.JSONDecodeError as e:
                raise SamplerError(f"{self.url} answered something that is not JSON: {e}") from None
            time.sleep(0.5 * 2**attempt)
        raise SamplerError(f"{self.url}: no answer after {self.retries + 1} attempts")

    def _to_sample(self, choice: dict[str, Any], sampling: SamplingSettings) -> Sample:
        logprobs = choice.get("logprobs") or {}
        token_logprobs = logprobs.get("token_logprobs")
        tokens = logprobs.get("tokens")
        if choice.get("token_ids") is not None:
            ids = [int(t) for t in choice["token_ids"]]
        elif tokens and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
            ids = [int(t.split(":", 1)[1]) for t in tokens]
        elif self.tokenizer is not None:
            ids = list(self.tokenizer.encode(choice.get("text", ""), add_special_tokens=False))
        else:
            raise SamplerError("the server returned no token ids; pass a tokenizer to re-tokenize its text")
        if token_logprobs is None or len(token_logprobs) != len(ids):
            lps = [math.nan] * len(ids)
        else:
            lps = [math.nan if lp is None else float(lp) for lp in token_logprobs]
        finish = choice.get("finish_reason")
        if finish not in tuple(FinishReason):  # e.g. "content_filter", "tool_calls"
            raise SamplerError(f"unexpected finish_reason {finish!r}")
        return Sample(tuple(ids), tuple(lps), FinishReason(finish))


def build(spec: Any, version: int = 0, policy: Any = None) -> OpenAISampler:
    """The registry's builder (`trainers.samplers.registry`): token ids to `spec.base_url`'s
    /v1/completions, for `spec.model` as the server names it; `spec.tokenizer` (required) is the
    served model's tokenizer."""
    from rlvr.trainers.models import load_tokenizer

    if spec.base_url is None or spec.tokenizer is None:
        raise ValueError("the openai sampler needs base_url and the served model's tokenizer")
    return OpenAISampler(spec.base_url, spec.model, spec.api_key, tokenizer=load_tokenizer(spec.tokenizer))
