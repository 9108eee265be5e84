"""Tools for `ToolEnv`: Python callables with JSON-schema arguments, the parsers that find a
model's tool calls in its text, argument validation, and a bounded call.

A `Tool` is rendered for the chat template in OpenAI's function format
(`{"type": "function", "function": {"name", "description", "parameters"}}`, what
`apply_chat_template(..., tools=...)` takes). A parser is chosen per chat-template family:
- `hermes` (Hermes / Qwen2.5): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, any number
  per reply; the tools are listed by the chat template (`renders_tools`).
- `markdown`: a reply's last ```python block is one call of the tool named `python` (argument
  `code`); the prompt itself must teach the syntax (`renders_tools` is False).
Another family is a `ToolCallParser` subclass, handed to `ToolEnv(tool_format=...)` as an object:
nothing global is registered.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlvr.envs.core import EnvError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


class ToolSpecError(EnvError, ValueError):
    """A tool is defined wrongly (a bad name, a parameters schema that is not a JSON schema of an object)."""


class ToolUnavailableError(EnvError, RuntimeError):
    """Raised by a tool's function when its backend fails (a sandbox down, a service unreachable):
    the grader's failure, not the model's, so the episode ends as `error` and is not trained on."""


@dataclass(frozen=True)
class ToolOutput:
    """What a tool's function may return instead of a plain value: the text the model sees and
    extras for the turn's verdict `info` (plain, picklable data)."""

    content: str
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tool:
    """One tool. `parameters` is the JSON schema of the arguments object; `fn(**arguments)` runs
    it and returns a `str`, a `ToolOutput`, or any JSON-serialisable value (shown as JSON).
    `timeout_s` bounds a call that hangs (it is then abandoned in its thread and reported)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[..., Any]
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ToolSpecError(f"a tool name is 1-64 letters, digits, '_', '.', '-' (not first), got {self.name!r}")
        if not isinstance(self.parameters, Mapping) or self.parameters.get("type") != "object":
            raise ToolSpecError(f"tool {self.name!r}: parameters must be a JSON schema with type 'object'")
        if not callable(self.fn):
            raise ToolSpecError(f"tool {self.name!r}: fn must be callable")
        if not self.timeout_s > 0:
            raise ToolSpecError(f"tool {self.name!r}: timeout_s must be positive, got {self.timeout_s!r}")
        validator = _jsonschema_validator(self.parameters)
        properties = self.parameters.get("properties", {})
        if validator is None and not (
            isinstance(properties, Mapping) and all(isinstance(p, Mapping) for p in properties.values())
        ):
            raise ToolSpecError(f"tool {self.name!r}: parameters is not a valid JSON schema: bad 'properties'")
        if validator is not None:
            try:
                validator.check_schema(dict(self.parameters))
            except Exception as exc:  # noqa: BLE001 - jsonschema's SchemaError, reported as ours
                raise ToolSpecError(f"tool {self.name!r}: parameters is not a valid JSON schema: {exc}") from None

    def schema(self) -> dict[str, Any]:
        """The OpenAI function format, as chat templates' `tools=` takes it."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json.loads(json.dumps(self.parameters)),
            },
        }


@dataclass(frozen=True)
class ToolCall:
    """One call the model made: the tool's name and its arguments (a JSON object)."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ParsedCall:
    """One call attempt found in a reply: the call, or why it could not be read (`error`)."""

    call: ToolCall | None
    error: str | None = None
    text: str = ""  # the attempt's text as the model wrote it


class ToolCallParser:
    """Finds a reply's tool calls for one chat-template family; `format_call` writes one call as
    the model should (for reference answers and for the prompt's examples)."""

    name: ClassVar[str] = ""
    renders_tools: ClassVar[bool] = True  # the chat template lists the tools (`tools=`)
    syntax: ClassVar[str] = "a tool call"  # for messages to the model

    def parse(self, text: str) -> list[ParsedCall]:
        """Every call attempt in `text`, in order; [] when the reply makes none."""
        raise NotImplementedError

    def format_call(self, call: ToolCall) -> str:
        raise NotImplementedError


class HermesParser(ToolCallParser):
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, as the Hermes and Qwen2.5 chat
    templates teach it. An opened tag never closed is an attempt that could not be read."""

    name = "hermes"
    syntax = "a <tool_call>{...}</tool_call> call"
    _CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)

    def parse(self, text: str) -> list[ParsedCall]:
        out = []
        for m in self._CALL.finditer(text):
            body, closed = m.group(1).strip(), bool(m.group(2))
            out.append(ParsedCall(*self._read(body, closed), text=m.group(0)))
        return out

    @staticmethod
    def _read(body: str, closed: bool) -> tuple[ToolCall | None, str | None]:
        if not closed:
            return None, "<tool_call> is not closed by </tool_call>"
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError) as exc:
            return None, f"the call is not valid JSON ({str(exc)[:80]})"
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None, 'the call must be a JSON object {"name": ..., "arguments": {...}}'
        arguments = obj.get("arguments", {})
        if isinstance(arguments, str):  # OpenAI's wire format: the arguments as a JSON string
            try:
                arguments = json.loads(arguments)
            except (ValueError, RecursionError):
                return None, "the arguments string is not valid JSON"
        if not isinstance(arguments, dict):
            return None, "the arguments must be a JSON object"
        return ToolCall(obj["name"], arguments), None

    def format_call(self, call: ToolCall) -> str:
        # The spacing of the Qwen2.5 template's own rendering of an assistant's tool call.
        return (
            "<tool_call>\n"
            + json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
            + "\n</tool_call>"
        )


class MarkdownPythonParser(ToolCallParser):
    """A reply's last ```python block is one call of the tool `python` with argument `code`
    (`verifiers.code.extract_program`'s rule). The prompt teaches this syntax, not the template."""

    name = "markdown"
    renders_tools = False
    syntax = "a ```python tool call"

    def parse(self, text: str) -> list[ParsedCall]:
        from rlvr.verifiers.code import extract_program

        code = extract_program(text)
        return [] if code is None else [ParsedCall(ToolCall("python", {"code": code}), text=code)]

    def format_call(self, call: ToolCall) -> str:
        if call.name != "python" or set(call.arguments) != {"code"}:
            raise ToolSpecError("the markdown format writes only calls of the tool 'python' with one argument 'code'")
        return f"```python\n{call.arguments['code'].rstrip()}\n```"


PARSERS: Mapping[str, type[ToolCallParser]] = {"hermes": HermesParser, "markdown": MarkdownPythonParser}


def get_parser(tool_format: str | ToolCallParser) -> ToolCallParser:
    """A parser by family name, or the parser object given."""
    if isinstance(tool_format, ToolCallParser):
        return tool_format
    if tool_format not in PARSERS:
        raise ValueError(f"tool_format must be one of {sorted(PARSERS)} or a ToolCallParser, got {tool_format!r}")
    return PARSERS[tool_format]()


# ---- argument validation ---------------------------------------------------------------------
def _jsonschema_validator(schema: Mapping[str, Any]) -> Any:
    """jsonschema's validator class for `schema` when the package is installed (it is optional:
    vLLM brings it), else None and `minimal_errors` checks instead."""
    try:
        import jsonschema
    except ImportError:
        return None
    return jsonschema.validators.validator_for(dict(schema), default=jsonschema.Draft202012Validator)


def argument_errors(schema: Mapping[str, Any], arguments: Any) -> list[str]:
    """Why `arguments` does not satisfy `schema` ([] if it does): jsonschema's full check when
    installed, else `minimal_errors`."""
    validator = _jsonschema_validator(schema)
    if validator is None:
        return minimal_errors(schema, arguments)
    errors = sorted(validator(dict(schema)).iter_errors(arguments), key=lambda e: list(e.absolute_path))
    return [(f"{'/'.join(map(str, e.absolute_path))}: " if e.absolute_path else "") + e.message for e in errors]


_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer(),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def minimal_errors(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """A small subset of JSON schema, for when jsonschema is not installed: `type` (one or a
    list), `enum`, `required`, `properties`, `additionalProperties: false`, `items`."""
    where = f"{path}: " if path else ""
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else list(types)
        if not any(_TYPES.get(t, lambda v: True)(value) for t in types):
            return [f"{where}{json.dumps(value)[:60]} is not of type {' or '.join(map(repr, types))}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}{json.dumps(value)[:60]} is not one of {schema['enum']!r}"]
    errors: list[str] = []
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        errors += [
            f"{where}{name!r} is a required property" for name in schema.get("required", []) if name not in value
        ]
        if schema.get("additionalProperties") is False:
            errors += [
                f"{where}additional property {name!r} is not allowed" for name in value if name not in properties
            ]
        for name, sub in properties.items():
            if name in value:
                errors += minimal_errors(sub, value[name], f"{path}/{name}".lstrip("/"))
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            errors += minimal_errors(schema["items"], item, f"{path}/{i}".lstrip("/"))
    return errors


# ---- a bounded call ----------------------------------------------------------------------------
@dataclass(frozen=True)
class CallResult:
    """How one call went: `status` is `ok`, `raised` (the tool raised: the model's arguments made
    it fail), `timeout` (it did not return in time) or `unavailable` (`ToolUnavailableError`)."""

    status: str
    content: str
    info: dict[str, Any] = field(default_factory=dict)


def call_tool(tool: Tool, arguments: dict[str, Any]) -> CallResult:
    """Run `tool.fn(**arguments)` in a daemon thread and wait at most `tool.timeout_s`: a call
    that hangs is abandoned there (a thread cannot be killed; a tool bounds its own work, and
    this is the last resort, so that an episode never hangs)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = tool.fn(**arguments)
        except BaseException as exc:  # noqa: BLE001 - reported to the model or as the grader's error
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"tool-{tool.name}", daemon=True)
    thread.start()
    thread.join(tool.timeout_s)
    if thread.is_alive():
        return CallResult("timeout", f"error: the tool {tool.name!r} did not return within {tool.timeout_s:g}s")
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, ToolUnavailableError):
            return CallResult("unavailable", str(exc))
        return CallResult("raised", f"error: {type(exc).__name__}: {exc}"[:500])
    value = box.get("value")
    if isinstance(value, ToolOutput):
        return CallResult("ok", value.content, dict(value.info))
    if isinstance(value, str):
        return CallResult("ok", value)
    try:
        return CallResult("ok", json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        return CallResult("ok", str(value))
