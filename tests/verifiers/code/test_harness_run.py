"""One test's run in the in-sandbox harness (verifiers/code/harness_run.py), on the host: the digest
both sides hash, how a test child's result line is read, and that every module the harness imports
inside the sandbox is shipped there (the sandbox has no rlvr: a module left out of `HARNESS_FILES`
fails every code verification). No Docker."""

from __future__ import annotations

import ast
from importlib import resources

from rlvr.verifiers.code import harness, harness_run


def test_the_digest_is_of_the_normalised_output():
    assert harness_run.stdout_digest(" 3 \n\n") == harness_run.stdout_digest("3")
    assert harness_run.stdout_digest("1 2") != harness_run.stdout_digest("1\n2")


def test_a_result_line_is_read_by_its_token_and_never_parsed():
    token = "ab" * 16
    assert harness_run._result(b"noise\n", token) is None
    line = f"{token} values [1, 2]\n".encode()
    assert harness_run._result(b"print\n" + line, token) == {"tag": "values", "body": "[1, 2]"}
    # two results for one test: the program wrote one itself
    assert harness_run._result(line + line, token)["tag"] == "invalid"
    # encoded values are printable ASCII; anything else is no value
    assert harness_run._result(f"{token} values [\u00e9]".encode(), token)["tag"] == "invalid"
    message = "x" * (2 * harness_run.MESSAGE_CHARS)
    assert len(harness_run._result(f"{token} error {message}".encode(), token)["body"]) == harness_run.MESSAGE_CHARS


def test_a_judge_s_verdict_is_its_second_line():
    assert harness_run._verdict(b"123\npassed \n") == {"tag": "passed", "body": ""}
    assert harness_run._verdict(b"")["tag"] == "error"  # no verdict: the test fails


def test_only_a_visible_failure_stops_early():
    done = {"status": "done", "exit_code": 0, "result": {"tag": "values", "body": "[1]"}}
    assert not harness_run.definitely_failed({"kind": "call"}, done)
    assert harness_run.definitely_failed({"kind": "call"}, {**done, "result": None})
    assert harness_run.definitely_failed({"kind": "io"}, {**done, "exit_code": 1})
    assert harness_run.definitely_failed({"kind": "io"}, {**done, "status": "timeout"})


def test_every_module_the_harness_imports_in_the_sandbox_is_shipped():
    package = resources.files("rlvr.verifiers.code")
    shipped = set(harness.HARNESS_FILES)
    for name in harness.HARNESS_FILES:
        tree = ast.parse(package.joinpath(name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "__package__":
                for imp in (n for stmt in node.orelse for n in ast.walk(stmt)):  # the sandbox's branch
                    if isinstance(imp, ast.Import):
                        modules = [a.name for a in imp.names]
                    elif isinstance(imp, ast.ImportFrom):
                        modules = [imp.module]
                    else:
                        continue
                    for module in modules:
                        assert f"{module}.py" in shipped, f"{name} imports {module}, which is not shipped"
    assert "harness_run.py" in shipped
