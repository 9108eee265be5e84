"""`Judge`: grade an answer against a rubric with a judge model behind an OpenAI-compatible URL.

    judge = Judge("http://127.0.0.1:8000", "judge-model")
    judge.score("Paris", question="Capital of France?", reference="Paris")   # -> Verdict
    judge.score_many([JudgeItem("Paris", "Capital of France?"), ...])       # concurrent
    weighted({"judge": (judge, 1.0), "format": (Tags(), 0.2)})              # reward fn form

The judge's reply is read by the fixed parser (`parse.parse_score`, 0..scale -> [0, 1]);
`score >= threshold` is `correct`. A judge that fails (refused connection, HTTP error, time
limit, a reply the parser cannot read) gives an `error` verdict, never a 0: the episode is left
out of the batch, not punished. `structured=True` asks a vLLM server to constrain the reply to
`Score: 0` .. `Score: <scale>` (`structured_outputs`); any other server ignores that field and
the parser still reads the reply. A frozen dataclass: picklable, no state between calls.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rlvr.verifiers.judge import client, parse, prompt
from rlvr.verifiers.math.options import VerifierTypeError
from rlvr.verifiers.verdict import Outcome, Verdict, VerifierError


@dataclass(frozen=True)
class JudgeItem:
    """One answer to grade, with the context the judge sees."""

    answer: str
    question: str = ""
    reference: str = ""


@dataclass(frozen=True)
class Judge:
    base_url: str
    model: str
    rubric: str = prompt.DEFAULT_RUBRIC
    api: str = "chat"  # "chat" (/v1/chat/completions) or "completions" (/v1/completions)
    scale: int = 10
    threshold: float = 0.5  # score >= threshold is `correct`
    structured: bool = False  # vLLM structured outputs: the reply is exactly "Score: N"
    timeout: float = 60.0  # seconds for one verdict, retries included
    retries: int = 1  # on refused connections and 5xx answers, within `timeout`
    max_answer_chars: int = 4000
    max_tokens: int = 256
    temperature: float = 0.0
    max_concurrency: int = 8  # requests in flight in `score_many`
    api_key: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.startswith(("http://", "https://")):
            raise VerifierError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if not isinstance(self.model, str) or not self.model:
            raise VerifierError(f"model must be the served model's name, got {self.model!r}")
        if self.api not in ("chat", "completions"):
            raise VerifierError(f"api must be 'chat' or 'completions', got {self.api!r}")
        if not isinstance(self.rubric, str) or not self.rubric.strip():
            raise VerifierError("rubric must be non-empty text")
        for name, low in (
            ("scale", 1),
            ("max_answer_chars", 16),
            ("max_tokens", 1),
            ("max_concurrency", 1),
            ("retries", 0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise VerifierError(f"{name} must be an int >= {low}, got {value!r}")
        for name, ok in (
            ("threshold", lambda v: 0 <= v <= 1),
            ("timeout", lambda v: v > 0),
            ("temperature", lambda v: v >= 0),
        ):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or not ok(value)
            ):
                raise VerifierError(f"{name} is out of range: {value!r}")

    @property
    def url(self) -> str:
        return client.endpoint(self.base_url, self.api)

    # ---- one answer ------------------------------------------------------------------------
    def score(self, answer: str, question: str = "", reference: str = "") -> Verdict:
        for name, value in (("answer", answer), ("question", question), ("reference", reference)):
            if not isinstance(value, str):
                raise VerifierTypeError(f"{name} must be a str, got {type(value).__name__}")
        if not answer.strip():  # nothing to grade: the model's failure, known without asking
            return Verdict(0.0, Outcome.INCORRECT, "empty answer (not sent to the judge)", {"judge": self.model})
        built = prompt.build(
            answer,
            question=question,
            reference=reference,
            rubric=self.rubric,
            scale=self.scale,
            max_answer_chars=self.max_answer_chars,
        )
        info: dict[str, Any] = {"judge": self.model}
        cut = ""
        if built.truncated_from is not None:
            info["truncated_from"] = built.truncated_from
            cut = f"; answer cut from {built.truncated_from} to {self.max_answer_chars} characters"
        try:
            reply = client.complete(
                self.url, self._body(built), timeout=self.timeout, retries=self.retries, api_key=self.api_key
            )
        except client.JudgeUnavailable as e:
            return Verdict(0.0, Outcome.ERROR, f"judge failed: {e}"[:300] + cut, info)
        info["reply"] = reply[-500:]
        try:
            score = parse.parse_score(reply, self.scale)
        except parse.UnreadableJudgement as e:
            return Verdict(0.0, Outcome.ERROR, f"judge reply unreadable: {e}"[:300] + cut, info)
        outcome = Outcome.CORRECT if score >= self.threshold else Outcome.INCORRECT
        points = score * self.scale
        return Verdict(score, outcome, f"judge scored {points:g}/{self.scale}{cut}", info)

    def score_many(self, items: Sequence[JudgeItem | str]) -> list[Verdict]:
        """Verdicts in the order of `items` (a str is an answer without context), up to
        `max_concurrency` requests in flight (the server batches them)."""
        items = [JudgeItem(i) if isinstance(i, str) else i for i in items]
        for item in items:
            if not isinstance(item, JudgeItem):
                raise VerifierTypeError(f"items must be JudgeItem or str, got {type(item).__name__}")
        if not items:
            return []
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items))) as pool:
            return list(pool.map(lambda it: self.score(it.answer, it.question, it.reference), items))

    # ---- reward function form: fn(response, gold) -> Verdict -------------------------------
    def __call__(self, response: str, gold: Any = None) -> Verdict:
        """`gold` is the reference answer (str), a mapping with `question` / `reference`, or None."""
        if gold is None:
            return self.score(response)
        if isinstance(gold, str):
            return self.score(response, reference=gold)
        if isinstance(gold, Mapping):
            unknown = set(gold) - {"question", "reference"}
            if unknown:
                raise VerifierError(f"gold may hold 'question' and 'reference', not {sorted(unknown)}")
            return self.score(response, str(gold.get("question", "")), str(gold.get("reference", "")))
        raise VerifierTypeError(f"gold must be a str, a mapping or None, got {type(gold).__name__}")

    def _body(self, built: prompt.Prompt) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "temperature": self.temperature}
        if self.api == "chat":
            body["messages"] = built.messages
        else:
            body["prompt"] = built.text
        if self.structured:
            body["structured_outputs"] = {"choice": [f"Score: {n}" for n in range(self.scale + 1)]}
        return body
