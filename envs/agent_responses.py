"""The agent gateway's answers in OpenAI's wire format: a whole response, or the same as a stream.

`response` is a `chat.completion` or `text_completion` object for the calls one request was
answered with (one per choice). `stream_events` is that answer as server-sent events, for a
request with `stream: true`: per choice, one chunk holding its whole text (the gateway answers
once the sample is done; a client that streams reads the same text, in one piece), then one with
its finish reason; a usage chunk when `stream_options.include_usage` asks for it; then `[DONE]`.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from rlvr.envs.agent_calls import Call


def response(calls: list[Call], model: str, chat: bool) -> dict[str, Any]:
    """The answer to one request, whose choices are `calls` (all of one prompt)."""
    prompt_tokens = len(calls[0].prompt_ids)
    completion_tokens = sum(len(c.completion_ids) for c in calls)
    choices = []
    for i, c in enumerate(calls):
        if chat:
            choices.append(
                {
                    "index": i,
                    "message": {"role": "assistant", "content": c.text},
                    "finish_reason": str(c.finish_reason),
                    "logprobs": None,
                }
            )
        else:
            choices.append({"index": i, "text": c.text, "finish_reason": str(c.finish_reason), "logprobs": None})
    return {
        "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def stream_events(answer: dict[str, Any], include_usage: bool = False) -> list[str]:
    """`answer` (from `response`) as the server-sent events of a streamed answer (module docstring)."""
    chat = answer["object"] == "chat.completion"
    head = {
        "id": answer["id"],
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": answer["created"],
        "model": answer["model"],
    }
    chunks = []
    for choice in answer["choices"]:
        i = choice["index"]
        if chat:
            text = {"role": "assistant", "content": choice["message"]["content"]}
            chunks.append({**head, "choices": [{"index": i, "delta": text, "finish_reason": None, "logprobs": None}]})
            done = {"index": i, "delta": {}, "finish_reason": choice["finish_reason"], "logprobs": None}
        else:
            chunks.append(
                {**head, "choices": [{"index": i, "text": choice["text"], "finish_reason": None, "logprobs": None}]}
            )
            done = {"index": i, "text": "", "finish_reason": choice["finish_reason"], "logprobs": None}
        chunks.append({**head, "choices": [done]})
    if include_usage:
        chunks.append({**head, "choices": [], "usage": answer["usage"]})
    return [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
