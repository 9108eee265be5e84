"""One judge request to an OpenAI-compatible server, bounded in time and size (plain urllib).

`complete(...)` returns the judge's reply text or raises `JudgeUnavailable` (refused connection,
HTTP error, time limit, a body that is not a completion). The caller turns that into an `error`
verdict: a judge that fails has not graded anything.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

from rlvr.errors import RlvrError

MAX_BODY_BYTES = 1 << 20  # a completion's JSON is a few KB; more is a broken server


class JudgeUnavailable(RlvrError, RuntimeError):
    """The judge server failed to give a usable reply (the judge failed, not the answer)."""


def endpoint(base_url: str, api: str) -> str:
    """`http://host:port`, `.../v1` or a full `.../v1/chat/completions` URL -> the endpoint URL."""
    url = base_url.rstrip("/")
    path = "/chat/completions" if api == "chat" else "/completions"
    if url.endswith(path):
        return url
    return url + path if url.endswith("/v1") else url + "/v1" + path


def complete(url: str, body: dict[str, Any], *, timeout: float, retries: int = 1, api_key: str | None = None) -> str:
    """POST `body`; the reply's first choice as text. `timeout` bounds the whole call (all
    attempts): each attempt's socket timeout is the time left, and the body is read in chunks
    against the same deadline."""
    deadline = time.monotonic() + timeout
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    data = json.dumps(body).encode()
    last = "no attempt"
    for attempt in range(retries + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=left) as response:
                raw = _read(response, deadline)
        except urllib.error.HTTPError as e:
            detail = e.read(500).decode(errors="replace").strip()
            last = f"answered HTTP {e.code}: {detail[:300]}"
            if e.code < 500 and e.code != 429:  # the request itself is wrong: asking again won't help
                raise JudgeUnavailable(f"judge at {url} {last}") from None
        except TimeoutError:
            raise JudgeUnavailable(f"judge at {url} did not answer within {timeout:g} s") from None
        except http.client.HTTPException as e:  # a reply that is not HTTP, cut short, ...
            last = f"answered malformed HTTP: {type(e).__name__}: {e}"[:300]
        except (urllib.error.URLError, ConnectionError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise JudgeUnavailable(f"judge at {url} did not answer within {timeout:g} s") from None
            last = f"unreachable: {reason}"
        else:
            return _text(raw, url)
        if attempt < retries:
            time.sleep(min(0.2 * 2**attempt, max(0.0, deadline - time.monotonic())))
    if last == "no attempt":
        raise JudgeUnavailable(f"judge at {url} did not answer within {timeout:g} s")
    raise JudgeUnavailable(f"judge at {url} {last} (after {attempt + 1} attempts)")


def _read(response: Any, deadline: float) -> bytes:
    chunks, size = [], 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError("reading the reply took too long")
        chunk = response.read(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise JudgeUnavailable(f"judge reply is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)


def _text(raw: bytes, url: str) -> str:
    try:
        answer = json.loads(raw)
    except ValueError as e:
        raise JudgeUnavailable(f"judge at {url} answered something that is not JSON ({e}): {raw[:120]!r}") from None
    try:
        choice = answer["choices"][0]
        text = choice["message"]["content"] if "message" in choice else choice["text"]
    except (KeyError, IndexError, TypeError):
        raise JudgeUnavailable(f"judge at {url} answered JSON without a completion: {str(answer)[:200]}") from None
    if not isinstance(text, str):
        raise JudgeUnavailable(f"judge at {url} answered a completion without text: {str(answer)[:200]}")
    return text
