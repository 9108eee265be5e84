"""A completion of a function stub (HumanEval's shape: a prompt that is a signature and docstring)
as the program its tests run, read the way HumanEval's harness (`prompt + completion`) and
EvalPlus read it:

- a whole function (the response's code defines the entry point, as chat models answer): the
  stub's imports and helper definitions go in front of it, so an answer that uses `List` from the
  prompt's `from typing import List`, or the prompt's helper `poly`, without repeating them, runs;
- a body only (no definition of the entry point; its first line indented, as a completion model
  continues the prompt): joined to the stub;
- anything else: the response unchanged (no code is a format error, other code fails its tests).

The result is a response again (one fenced block), handed to `verifiers.code.verify` like any other,
so the program runs in the sandbox and nothing else changes.
"""

from __future__ import annotations

import ast
import re

from rlvr.verifiers.code import extract_program


def _defines(code: str, function: str) -> bool:
    """`code` defines `function` at its top level (column 0), as a whole-function answer does."""
    return re.search(rf"^(async[ \t]+)?def[ \t]+{re.escape(function)}[ \t]*\(", code, re.M) is not None


def _indented(code: str) -> bool:
    first = next((line for line in code.splitlines() if line.strip()), "")
    return first[:1] in (" ", "\t")


def stub_context(stub: str, entry_point: str) -> str:
    """The stub's top-level statements except the entry point's own definition (its imports, helper
    functions and constants), as source; the whole stub when it does not parse."""
    try:
        body = ast.parse(stub).body
    except (SyntaxError, ValueError):
        return stub
    keep = [s for s in body if not (isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == entry_point)]
    return "\n\n".join(ast.get_source_segment(stub, s) or ast.unparse(s) for s in keep)


def as_program(response: str, stub: str, entry_point: str) -> str:
    """`response` with its code completed by the stub (see the module docstring), as one fenced
    block; the response itself when it holds neither a definition of the entry point nor a body."""
    code = extract_program(response, entry_point)
    if code is None and _indented(response):  # a bare continuation of the prompt, no fence
        code = response
    if code is None:
        return response
    if _defines(code, entry_point):
        context = stub_context(stub, entry_point)
        program = f"{context}\n\n\n{code}" if context.strip() else code
    elif _indented(code):
        program = stub.rstrip("\n") + "\n" + code
    else:
        return response
    return f"```python\n{program.rstrip()}\n```\n"
