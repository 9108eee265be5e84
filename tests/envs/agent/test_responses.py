"""The gateway's wire format (`envs.agent.responses`): answers, streams and tool calls, on worked strings."""

from __future__ import annotations

import json

from rlvr.envs.agent.calls import Call
from rlvr.envs.agent.responses import response, same_tool_calls, split_tool_calls, stream_events
from rlvr.envs.tools import HermesParser

CALL = '<tool_call>\n{"name": "multiply", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


def test_hermes_tool_calls_are_read_out_of_the_text():
    content, (call,) = split_tool_calls(f"Let me compute. {CALL}", HermesParser())
    assert content == "Let me compute." and call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "multiply" and json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    assert split_tool_calls("\\boxed{6}", HermesParser()) == ("\\boxed{6}", ())
    torn = f"{CALL} <tool_call>{{not json</tool_call>"  # one call cannot be read: the text goes back whole
    assert split_tool_calls(torn, HermesParser()) == (torn, ())


def test_an_answer_with_tool_calls_and_its_stream():
    content, calls = split_tool_calls(CALL, HermesParser())
    call = Call((1, 2), (3, 4), (-0.1, -0.2), text=content, tool_calls=calls)
    answer = response([call], "policy", chat=True)
    (choice,) = answer["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == list(calls) and answer["usage"]["completion_tokens"] == 2
    events = stream_events(answer, include_usage=True)
    chunks = [json.loads(e[len("data: ") :]) for e in events[:-1]]
    assert events[-1] == "data: [DONE]\n\n" and chunks[-1]["usage"] == answer["usage"]
    assert chunks[0]["choices"][0]["delta"]["tool_calls"] == [{"index": 0, **calls[0]}]
    assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls"


def test_tool_calls_sent_back_are_the_ones_given_whatever_their_ids():
    _, calls = split_tool_calls(CALL, HermesParser())
    echoed = [{**calls[0], "id": "the agent's own id"}]
    assert same_tool_calls(echoed, calls) and same_tool_calls(None, ()) and same_tool_calls([], ())
    spaced = [{"function": {"name": "multiply", "arguments": '{"b": 3, "a": 2}'}}]  # the same JSON, re-serialised
    assert same_tool_calls(spaced, calls)
    assert not same_tool_calls([{"function": {"name": "multiply", "arguments": '{"a": 2, "b": 4}'}}], calls)
    assert not same_tool_calls([], calls) and not same_tool_calls(echoed, ())
    assert not same_tool_calls([{"function": {"name": "multiply", "arguments": "{torn"}}], calls)
