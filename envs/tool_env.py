"""`ToolEnv`: a multi-turn environment whose tools are Python callables with JSON schemas.

Each model turn is, in this order:
1. a final answer, when `final_answer(action)` (the subclass's) returns a `Verdict`: the episode
   ends with it, its score scaled to `reward_range`;
2. tool calls, found by the parser of the chat template's family (`tool_format`, see
   `envs.tools`): each call is checked (a known tool, arguments valid against its schema), run
   (bounded by its `timeout_s`), and answered by one `tool_role` message, in order. The turn's
   reward is 0 and the episode goes on. A call that cannot be read, names no tool, breaks the
   schema, raises or times out is answered by an error message in its place, and the turn's
   verdict is `format_error` (the model may try again; the episode's outcome is its last turn's).
   A tool raising `ToolUnavailableError` ends the episode as `error` (the grader failed);
3. neither: a `format_error` that ends the episode.

Rollouts render the prompt and every reply with the chat template's `tools=` set to
`chat_tools` (the tools' OpenAI function schemas) when the parser's family lists tools in the
template; the model's text is still never re-tokenized (`envs.rollout`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rlvr.envs.core import MultiTurnEnv, TurnResult
from rlvr.envs.tools import ParsedCall, Tool, ToolCall, ToolCallParser, argument_errors, call_tool, get_parser
from rlvr.verifiers.verdict import Outcome, Verdict

_CUT = "\n[... output truncated ...]\n"


def cap(text: str, max_chars: int) -> str:
    """`text`, its middle cut out when longer than `max_chars` (plus the mark of a cut, so that
    a text capped once already, as `python_tool.format_tool_output` caps, is left alone)."""
    if len(text) <= max_chars + len(_CUT):
        return text
    return text[: max_chars // 2] + _CUT + text[-max_chars // 2 :]


class ToolEnv(MultiTurnEnv):
    """Tool use until a final answer. Subclasses give the tools (`tools=` to `__init__`), the task
    source, and `final_answer(action) -> Verdict | None`."""

    version: ClassVar[str] = "0"

    def __init__(
        self,
        tools: Sequence[Tool],
        tool_format: str | ToolCallParser = "hermes",
        max_turns: int = 8,
        max_calls_per_turn: int = 4,
        max_output_chars: int = 2000,
        tool_role: str = "tool",
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        names = [t.name for t in tools]
        if not tools or not all(isinstance(t, Tool) for t in tools) or len(set(names)) != len(names):
            raise ValueError(f"tools must be a non-empty sequence of envs.Tool with distinct names, got {names!r}")
        if max_calls_per_turn < 1 or max_output_chars < 100:
            raise ValueError("max_calls_per_turn must be >= 1 and max_output_chars >= 100")
        if tool_role not in ("tool", "user"):
            raise ValueError(f"tool_role must be 'tool' or 'user', got {tool_role!r}")
        self.tools = {t.name: t for t in tools}
        self.parser = get_parser(tool_format)
        self.tool_format = self.parser.name
        self.max_calls_per_turn = max_calls_per_turn
        self.max_output_chars = max_output_chars
        self.tool_role = tool_role
        self.tool_calls = 0

    @property
    def chat_tools(self) -> list[dict[str, Any]] | None:
        """The tools as the chat template's `tools=` takes them; None when the prompt, not the
        template, teaches the call syntax (the `markdown` family)."""
        return [t.schema() for t in self.tools.values()] if self.parser.renders_tools else None

    def format_call(self, name: str, **arguments: Any) -> str:
        """A call written as the model should write it (for reference answers)."""
        return self.parser.format_call(ToolCall(name, arguments))

    def _on_reset(self) -> None:
        super()._on_reset()
        self.tool_calls = 0

    # ---- for subclasses ---------------------------------------------------------------------
    def final_answer(self, action: str) -> Verdict | None:
        """The verdict on `action` if it is a final answer, else None (it should call a tool)."""
        raise NotImplementedError

    # ---- one turn ---------------------------------------------------------------------------
    def respond(self, action: str) -> TurnResult:
        verdict = self.final_answer(action)
        if verdict is not None:
            lo, hi = self.reward_range
            return TurnResult([], lo + (hi - lo) * verdict.score, True, verdict)
        attempts = self.parser.parse(action)
        if not attempts:
            return TurnResult(
                [],
                self.reward_range[0],
                True,
                Verdict(0.0, Outcome.FORMAT_ERROR, f"neither {self.parser.syntax} nor a final answer"),
            )
        replies, problems, calls, info = [], [], [], {}
        for i, attempt in enumerate(attempts):
            if i >= self.max_calls_per_turn:
                content, status = f"error: at most {self.max_calls_per_turn} tool calls per reply; not run", "skipped"
            else:
                content, status, extra = self._run(attempt)
                if status == "unavailable":
                    return TurnResult(
                        [],
                        self.reward_range[0],
                        True,
                        Verdict(0.0, Outcome.ERROR, f"tool unavailable: {content}"[:300], {"calls": calls}),
                    )
                info.update(extra)
            name = attempt.call.name if attempt.call is not None else None
            calls.append({"name": name, "status": status})
            if status != "ok":
                problems.append(f"call {i + 1}: {content.removeprefix('error: ')}")
            replies.append({"role": self.tool_role, "content": cap(content, self.max_output_chars)})
        info["calls"] = calls
        if problems:
            verdict = Verdict(0.0, Outcome.FORMAT_ERROR, "; ".join(problems)[:300], info)
        else:
            verdict = Verdict(0.0, Outcome.INCORRECT, f"tool call {self.tool_calls}: no answer yet", info)
        return TurnResult(replies, self.reward_range[0], False, verdict)

    def _run(self, attempt: ParsedCall) -> tuple[str, str, dict[str, Any]]:
        """(content for the model, status, verdict extras) of one call attempt."""
        if attempt.call is None:
            return f"error: {attempt.error}", "malformed", {}
        tool = self.tools.get(attempt.call.name)
        if tool is None:
            return (
                f"error: unknown tool {attempt.call.name[:60]!r}; the tools are {', '.join(self.tools)}",
                "unknown_tool",
                {},
            )
        errors = argument_errors(tool.parameters, attempt.call.arguments)
        if errors:
            return f"error: invalid arguments for {tool.name!r}: {'; '.join(errors)[:300]}", "invalid_arguments", {}
        self.tool_calls += 1
        result = call_tool(tool, attempt.call.arguments)
        return result.content, result.status, result.info
