"""Finding the program in a model's response: the last fenced Python code block, or a named
function. Line-based (linear time on any input; no backtracking regex over the whole text)."""

from __future__ import annotations

import re
import textwrap

PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3"})
_OPEN = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)")
_IMPORT = re.compile(r"^\s*(import\s+\w|from\s+[\w.]+\s+import\s)")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every closed fenced block as (language tag in lower case, code). A fence closes with the
    same character repeated at least as often; an unclosed last fence (a truncated response)
    yields no block."""
    blocks: list[tuple[str, str]] = []
    fence: str | None = None
    tag, body = "", []
    for line in text.splitlines():
        if fence is None:
            m = _OPEN.match(line)
            if m:
                fence, tag, body = m.group(1), m.group(2).lower(), []
            continue
        stripped = line.strip()
        if stripped and stripped[0] == fence[0] and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            blocks.append((tag, "\n".join(body) + "\n"))
            fence = None
        else:
            body.append(line)
    return blocks


def _defines(code: str, function: str) -> bool:
    return re.search(rf"^[ \t]*(async[ \t]+)?def[ \t]+{re.escape(function)}[ \t]*\(", code, re.M) is not None


def function_from_text(text: str, function: str) -> str | None:
    """An unfenced `def function(...)` and its indented body (the last one in the text), with
    the import lines found anywhere in the text put before it."""
    lines = text.splitlines()
    start = None
    for i, line in enumerate(lines):
        if _defines(line, function):
            start = i
    if start is None:
        return None
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines):
        line = lines[end]
        if line.strip() and len(line) - len(line.lstrip()) <= indent and not line.lstrip().startswith(")"):
            break
        end += 1
    imports = [line.strip() for line in lines[:start] if _IMPORT.match(line)]
    body = textwrap.dedent("\n".join(lines[start:end]))
    return "\n".join(imports + [body]).rstrip() + "\n"


def extract_program(response: str, function: str | None = None) -> str | None:
    """The program to run, or None when the response holds none (a format error).

    Without `function`: the last closed fenced block tagged python/py/python3 or untagged.
    With `function`: the last such block that defines it; else an unfenced definition of it
    in the text; else the last Python block (whose tests will then fail, not a format error)."""
    if not isinstance(response, str):
        raise TypeError(f"response must be a str, got {type(response).__name__}")
    blocks = [code for tag, code in code_blocks(response) if tag in PYTHON_TAGS and code.strip()]
    if function is None:
        return blocks[-1] if blocks else None
    for code in reversed(blocks):
        if _defines(code, function):
            return code
    return function_from_text(response, function) or (blocks[-1] if blocks else None)
