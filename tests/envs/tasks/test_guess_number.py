"""rlvr/GuessNumber-v0: the multi-turn contract, played move by move with worked numbers."""

from __future__ import annotations

import pickle
import time

import pytest

from rlvr import envs
from rlvr.envs.tasks.guess_number import GuessNumberEnv, parse_guess
from rlvr.verifiers.verdict import Outcome


def _secret(env) -> int:
    return env.unwrapped.task.answer


def test_binary_search_transcript_worked_example():
    env = envs.make("rlvr/GuessNumber-v0", n=100)
    obs, info = env.reset(seed=0)
    assert obs[0]["role"] == "user" and "between 1 and 100" in obs[0]["content"] and "7 turns" in obs[0]["content"]
    secret = _secret(env)
    lo, hi, turns = 1, 100, 0
    while True:
        guess = (lo + hi) // 2
        assert env.unwrapped.reference_action() == str(guess)
        reply, reward, terminated, truncated, info = env.step(f"My guess is {guess}.")
        turns += 1
        if guess == secret:
            assert (reply, reward, terminated, truncated) == ([], 1.0, True, False)
            assert info["verdict"].outcome is Outcome.CORRECT
            break
        word = "higher" if secret > guess else "lower"
        assert reply == [{"role": "user", "content": word}] and reward == 0.0 and not terminated
        lo, hi = (guess + 1, hi) if secret > guess else (lo, guess - 1)
    assert turns <= 7  # 100 needs at most 7 halvings
    assert env.unwrapped.render() is None  # no render mode asked for


def test_per_turn_rewards_are_fractions_ruled_out():
    # n=10 with the task whose secret is 7: worked numbers for one fixed game.
    env = GuessNumberEnv(n=10, reward="per_turn")
    task_id = next(str(s) for s in range(100) if env.make_task(s).answer == 7)
    env.reset(options={"task_id": task_id})
    _, r1, *_ = env.step("5")  # 10 possible -> 6..10 (5 left): 5/10 ruled out
    _, r2, *_ = env.step("9")  # 6..10 -> 6..8 (3 left): 2/5
    _, r3, *_ = env.step("2")  # already ruled out: 0
    _, r4, done, _, info = env.step("7")
    assert (r1, r2, r3, r4, done) == (0.5, 0.4, 0.0, 1.0, True)
    assert info["verdict"].outcome is Outcome.CORRECT


def test_format_error_turn_and_truncation():
    env = GuessNumberEnv(n=100, max_turns=2)
    env.reset(seed=3)
    reply, reward, terminated, truncated, info = env.step("I have no idea")
    assert info["verdict"].outcome is Outcome.FORMAT_ERROR and reward == 0.0 and not (terminated or truncated)
    assert "integer between 1 and 100" in reply[0]["content"]
    wrong = str(_secret(env) % 100 + 1)
    reply, reward, terminated, truncated, info = env.step(wrong)
    assert truncated and not terminated and reply == [] and reward == 0.0
    assert info["verdict"].outcome is Outcome.TRUNCATED
    with pytest.raises(envs.StepAfterDoneError):
        env.step("1")


def test_render_transcript():
    env = GuessNumberEnv(n=8, render_mode="ansi")
    env.reset(seed=1)
    env.step("4")
    text = env.render()
    assert text.startswith("[user] I am thinking") and "[assistant] 4" in text


@pytest.mark.parametrize(
    "text,want",
    [
        ("42", 42),
        ("I guess 17, no, 18", 18),
        ("-3", -3),
        ("answer: 50.", 50),
        ("7.5", "7.5 is not an integer"),
        ("", "no number in the reply"),
        ("nothing", "no number in the reply"),
        ("9" * 40, "the number is too long"),
    ],
)
def test_parse_guess(text, want):
    assert parse_guess(text) == want


def test_hostile_input_is_fast_and_harmless():
    env = GuessNumberEnv(n=100)
    env.reset(seed=0)
    start = time.perf_counter()
    _, reward, *_, info = env.step("1 " * 500_000 + "9" * 100_000)
    assert time.perf_counter() - start < 2.0
    assert reward == 0.0 and info["verdict"].outcome is Outcome.FORMAT_ERROR


@pytest.mark.parametrize("kwargs", [{"n": 1}, {"n": "ten"}, {"reward": "dense"}, {"max_turns": 0}, {"max_turns": 2.5}])
def test_bad_arguments(kwargs):
    with pytest.raises(envs.EnvArgumentError):
        envs.make("rlvr/GuessNumber-v0", **kwargs)


def test_same_seed_same_secret_and_task_id_selects():
    env = GuessNumberEnv(n=1000)
    _, info5 = env.reset(seed=5)
    a = _secret(env)
    assert env.reset(seed=5)[1]["task_id"] == info5["task_id"] and _secret(env) == a
    _, info = env.reset(seed=99, options={"task_id": info5["task_id"]})
    assert info["task_id"] == info5["task_id"] and _secret(env) == a
    with pytest.raises(envs.TaskNotFoundError):
        env.reset(options={"task_id": "not-a-seed"})


def test_pickled_mid_game_continues_identically():
    env = GuessNumberEnv(n=1000, reward="per_turn")
    env.reset(seed=11)
    env.step("500")
    clone = pickle.loads(pickle.dumps(env))
    assert clone.reference_action() == env.reference_action()
    assert clone.step("250")[:4] == env.step("250")[:4]


@pytest.mark.parametrize("kwargs", [{}, {"n": 1000, "reward": "per_turn"}, {"n": 2}])
def test_passes_check_env(kwargs):
    results = envs.check_env(envs.make("rlvr/GuessNumber-v0", **kwargs))
    assert all(r.ok for r in results) and len(results) == 8
