"""The agent gateway's answers in OpenAI's wire format: a whole response, or the same as a stream,
and the tool calls a completion makes.

`response` is a `chat.completion` or `text_completion` object for the calls one request was
answered with (one per choice). `stream_events` is that answer as server-sent events, for a
request with `stream: true`: per choice, one chunk holding its whole text (the gateway answers
once the sample is done; a client that streams reads the same text, in one piece), then one with
its finish reason; a usage chunk when `stream_options.include_usage` asks for it; then `[DONE]`.

Tool calls. For a chat request with `tools`, `split_tool_calls` reads the completion's calls with
the model family's parser (`envs.tools`: Hermes' `<tool_call>{...}</tool_call>` by default): the
answer's `message.tool_calls` (OpenAI's `function` objects, arguments as a JSON string), its
`content` the text around them (null when none is left), finish reason `tool_calls`. A completion
with any call that cannot be read is sent back as text, whole, with no tool calls: the agent sees
what the model wrote. `same_tool_calls` tells whether the tool calls an agent sends back in its
history are the ones it was given (ids aside; arguments compared as JSON), which the gateway needs
to continue the episode's token ids rather than render the history anew.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from rlvr.envs.agent.calls import Call
from rlvr.envs.tools import ToolCallParser


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
                    "message": _message(c),
                    "finish_reason": "tool_calls" if c.tool_calls else str(c.finish_reason),
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
            message = choice["message"]
            text = {"role": "assistant", "content": message["content"]}
            if message.get("tool_calls"):
                text["tool_calls"] = [{"index": k, **call} for k, call in enumerate(message["tool_calls"])]
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


def split_tool_calls(text: str, parser: ToolCallParser) -> tuple[str, tuple[dict, ...]]:
    """(content, tool calls) of a completion's `text` (module docstring)."""
    parsed = parser.parse(text)
    if not parsed or any(p.call is None for p in parsed):
        return text, ()
    content = text
    for p in parsed:
        content = content.replace(p.text, "", 1)
    calls = tuple(
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": p.call.name, "arguments": json.dumps(p.call.arguments, ensure_ascii=False)},
        }
        for p in parsed
        if p.call is not None
    )
    return content.strip(), calls


def same_tool_calls(sent: Any, given: tuple[dict, ...]) -> bool:
    """Whether the tool calls of an assistant message an agent sent back (`sent`) are those it was
    given: the same functions with the same arguments, in order (ids are the agent's to keep)."""
    sent = sent or []
    if not isinstance(sent, list) or len(sent) != len(given):
        return False
    return all(_call_key(a) is not None and _call_key(a) == _call_key(b) for a, b in zip(sent, given))


def _call_key(call: Any) -> tuple[str, Any] | None:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return None
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    return function["name"], arguments


def _message(call: Call) -> dict[str, Any]:
    if not call.tool_calls:
        return {"role": "assistant", "content": call.text}
    return {"role": "assistant", "content": call.text or None, "tool_calls": list(call.tool_calls)}
