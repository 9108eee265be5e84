"""`EnvKind`: every built-in environment reports its kind as the enum, and the kind's text (what `rlvr envs`
prints, what a JSON log holds) is the plain string it always was."""

from __future__ import annotations

import argparse
import json

from gymnasium.envs.registration import load_env_creator

from rlvr.commands import envs as envs_cmd
from rlvr.envs import EnvKind
from rlvr.envs.registry import BUILTIN_ENVS

KINDS = {
    "rlvr/Agent-v0": EnvKind.AGENT,
    "rlvr/Arithmetic-v0": EnvKind.SINGLE_STEP,
    "rlvr/Code-v0": EnvKind.SINGLE_STEP,
    "rlvr/CodeDataset-v0": EnvKind.SINGLE_STEP,
    "rlvr/CodeFeedback-v0": EnvKind.MULTI_TURN,
    "rlvr/GuessNumber-v0": EnvKind.MULTI_TURN,
    "rlvr/HumanEval-v0": EnvKind.SINGLE_STEP,
    "rlvr/MATH500-v0": EnvKind.SINGLE_STEP,
    "rlvr/MathDataset-v0": EnvKind.SINGLE_STEP,
    "rlvr/PythonTool-v0": EnvKind.MULTI_TURN,
    "rlvr/ReasoningGym-v0": EnvKind.SINGLE_STEP,
    "rlvr/SymbolicMath-v0": EnvKind.SINGLE_STEP,
}


def test_every_built_in_env_reports_its_kind_as_the_enum():
    assert set(KINDS) == set(BUILTIN_ENVS)
    for env_id, entry_point in BUILTIN_ENVS.items():
        kind = load_env_creator(entry_point).kind
        assert type(kind) is EnvKind and kind is KINDS[env_id], env_id


def test_the_text_of_a_kind_is_the_plain_string():
    assert [str(k) for k in EnvKind] == [f"{k}" for k in EnvKind] == ["single-step", "multi-turn", "agent"]
    assert json.dumps({"kind": EnvKind.MULTI_TURN}) == '{"kind": "multi-turn"}'
    assert EnvKind("agent") is EnvKind.AGENT and EnvKind.SINGLE_STEP == "single-step"  # a plugin's plain string


def test_rlvr_envs_prints_each_kind_as_before(capsys):
    parser = argparse.ArgumentParser(prog="rlvr")
    envs_cmd.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["envs"])
    assert args.func(args) == 0
    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[1:] if line}
    assert {env_id: rows[env_id] for env_id in KINDS} == {env_id: kind.value for env_id, kind in KINDS.items()}
