"""The registry: built-in ids in Gymnasium's registry, typed errors, listing, --env-arg parsing, CLI."""

from __future__ import annotations

import argparse
import subprocess
import sys

import gymnasium as gym
import pytest

from rlvr import envs
from rlvr.commands import check_env as check_env_cmd
from rlvr.commands import envs as envs_cmd
from rlvr.envs.registry import BUILTIN_ENVS, EnvArgumentError, UnknownEnvError, parse_env_args

BUILTIN = [
    "rlvr/Arithmetic-v0",
    "rlvr/SymbolicMath-v0",
    "rlvr/MathDataset-v0",
    "rlvr/ReasoningGym-v0",
    "rlvr/GuessNumber-v0",
    "rlvr/Code-v0",
    "rlvr/CodeDataset-v0",
    "rlvr/CodeFeedback-v0",
    "rlvr/PythonTool-v0",
    "rlvr/Agent-v0",
    "rlvr/MATH500-v0",
    "rlvr/HumanEval-v0",
]


def test_all_builtin_ids_registered_idempotently():
    assert sorted(BUILTIN_ENVS) == sorted(BUILTIN)
    envs.register_builtins()
    envs.register_builtins()
    for env_id in BUILTIN:
        assert gym.registry[env_id].entry_point == BUILTIN_ENVS[env_id]


def test_gymnasium_make_works_with_the_module_prefix_in_a_fresh_process():
    # Gymnasium 1.x no longer loads the `gymnasium.envs` entry-point group, so a bare
    # gymnasium.make("rlvr/...") needs `import rlvr.envs` first; "rlvr.envs:rlvr/..." imports it for you.
    code = (
        "import gymnasium, sys; e = gymnasium.make('rlvr.envs:rlvr/GuessNumber-v0', n=8); "
        "print(e.reset(seed=0)[1]['task_id']); print('rlvr.envs' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1] == "True"


@pytest.mark.parametrize(
    "env_id,hint",
    [
        ("rlvr/GuesNumber-v0", "rlvr/GuessNumber-v0"),
        ("arithmetic", "rlvr/Arithmetic-v0"),
        ("rlvr/Arithmetic-v9", "rlvr/Arithmetic-v0"),
        ("rlvr/ReasoningGym", "rlvr/ReasoningGym-v0"),
    ],
)
def test_unknown_ids_suggest_close_matches(env_id, hint):
    with pytest.raises(UnknownEnvError, match=f"Did you mean '{hint}'"):
        envs.make(env_id)


@pytest.mark.parametrize("env_id", ["bad id with spaces", "a/b/c-v0", "", "rlvr/-v0"])
def test_malformed_ids_are_unknown_env_errors(env_id):
    with pytest.raises(UnknownEnvError, match="malformed environment id|unknown environment"):
        envs.make(env_id)


def test_non_string_id():
    with pytest.raises(UnknownEnvError, match="must be a string"):
        envs.make(42)


def test_bad_keyword_names_the_accepted_ones():
    with pytest.raises(
        EnvArgumentError,
        match=r"unexpected keyword argument\(s\) nn; it accepts: n, max_turns, "
        r"reward, render_mode",
    ):
        envs.make("rlvr/GuessNumber-v0", nn=5)


@pytest.mark.filterwarnings("ignore:.*render_mode='human'")
def test_bad_keyword_value_is_an_argument_error():
    with pytest.raises(EnvArgumentError, match="reward must be one of"):
        envs.make("rlvr/GuessNumber-v0", reward="sometimes")
    with pytest.raises(EnvArgumentError, match="render_mode must be one of"):
        envs.make("rlvr/GuessNumber-v0", render_mode="human")


def test_gymnasium_make_kwargs_still_pass_through():
    env = envs.make("rlvr/GuessNumber-v0", max_episode_steps=1, disable_env_checker=True)
    env.reset(seed=0)
    assert env.step("0")[3] is True  # TimeLimit truncated after one step


def test_list_envs_kinds_descriptions_and_broken_entry_points():
    gym.register(id="rlvr/Broken-v0", entry_point="rlvr.envs.no_such_module:NoEnv")
    try:
        rows = {r.id: r for r in envs.list_envs(plugins=False)}
    finally:
        del gym.registry["rlvr/Broken-v0"]
    g = rows["rlvr/GuessNumber-v0"]
    assert (g.kind, g.entry_point, g.error) == ("multi-turn", "rlvr.envs.tasks.guess_number:GuessNumberEnv", None)
    assert g.description.startswith("Multi-turn number guessing")
    broken = rows["rlvr/Broken-v0"]
    assert broken.kind == "unavailable" and "No module named 'rlvr.envs.no_such_module'" in broken.error
    assert "CartPole-v1" not in rows  # only text environments
    assert set(BUILTIN) - {"rlvr/Code-v0", "rlvr/CodeDataset-v0", "rlvr/CodeFeedback-v0", "rlvr/PythonTool-v0"} <= set(
        rows
    )


def test_make_of_a_registered_but_broken_entry_point_is_clear():
    gym.register(id="rlvr/Broken-v0", entry_point="rlvr.envs.no_such_module:NoEnv")
    try:
        with pytest.raises(envs.EnvError, match="registered but rlvr.envs.no_such_module:NoEnv cannot be imported"):
            envs.make("rlvr/Broken-v0")
    finally:
        del gym.registry["rlvr/Broken-v0"]


def test_parse_env_args_reads_values_as_yaml():
    got = parse_env_args(
        [
            "difficulty=2",
            "ratio=0.5",
            "flag=true",
            "name=gsm8k",
            "kinds=[expand, diff]",
            "path=/tmp/a=b.jsonl",
            "empty=",
            "none=null",
        ]
    )
    assert got == {
        "difficulty": 2,
        "ratio": 0.5,
        "flag": True,
        "name": "gsm8k",
        "kinds": ["expand", "diff"],
        "path": "/tmp/a=b.jsonl",
        "empty": "",
        "none": None,
    }


@pytest.mark.parametrize("bad", ["difficulty", "=3", "1x=3", "k=[unclosed"])
def test_parse_env_args_rejects_malformed_pairs(bad):
    with pytest.raises(EnvArgumentError, match="--env-arg"):
        parse_env_args([bad])


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rlvr")
    sub = parser.add_subparsers(dest="command", required=True)
    envs_cmd.add_parser(sub)
    check_env_cmd.add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_envs_prints_a_table(capsys):
    assert _cli(["envs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "KIND", "DESCRIPTION"]
    row = next(line for line in lines if line.startswith("rlvr/GuessNumber-v0"))
    assert row.split()[1] == "multi-turn" and "higher" in row


def test_cli_check_env_passes_and_fails(capsys):
    assert _cli(["check-env", "rlvr/GuessNumber-v0", "--env-arg", "n=50", "--env-arg", "reward=per_turn"]) == 0
    out = capsys.readouterr().out
    assert "PASS  known-good answer gets the max reward" in out and "8/8 checks passed" in out
    # max_turns=1 is too few for binary search: the reference cannot win, and the check says so.
    assert _cli(["check-env", "rlvr/GuessNumber-v0", "--env-arg", "max_turns=1"]) == 1
    assert "FAIL  known-good answer gets the max reward" in capsys.readouterr().out


def test_cli_check_env_bad_input_exits_2(capsys):
    assert _cli(["check-env", "rlvr/Nope-v0"]) == 2
    assert "unknown environment 'rlvr/Nope-v0'" in capsys.readouterr().err
    assert _cli(["check-env", "rlvr/GuessNumber-v0", "--env-arg", "n"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_module_prefix_imports_the_registering_module(tmp_path, monkeypatch):
    (tmp_path / "my_envs_mod.py").write_text(
        "import gymnasium as gym\n"
        "gym.register(id='mine/Guess-v0', entry_point='rlvr.envs.tasks.guess_number:GuessNumberEnv', kwargs={'n': 4})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        env = envs.make("my_envs_mod:mine/Guess-v0")
        assert env.unwrapped.n == 4
    finally:
        gym.registry.pop("mine/Guess-v0", None)
        sys.modules.pop("my_envs_mod", None)
    with pytest.raises(UnknownEnvError, match="cannot import module 'no_such_mod_xyz'"):
        envs.make("no_such_mod_xyz:mine/Guess-v0")
