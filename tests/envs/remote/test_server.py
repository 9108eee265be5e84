"""`rlvr serve`'s server, for real: uvicorn serving OpenEnv's app (openenv-core 0.3.0) in a thread of this process,
played through OpenEnv's own client (`GenericEnvClient`, over its WebSocket) and through `RemoteEnv`, episode by
episode against the same environment played locally: the same prompts, rewards, flags and verdicts. Bad requests
over HTTP get a 4xx and one line, over the WebSocket an error message, and the server and the session go on."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import gymnasium
import pytest

pytest.importorskip("openenv.core", reason="the serve extra (pip install 'rlvr[serve]')")

from openenv.core import GenericEnvClient  # noqa: E402 - after the skip

from rlvr import envs  # noqa: E402
from rlvr.envs.core import StepAfterDoneError  # noqa: E402
from rlvr.envs.remote import RemoteEnv  # noqa: E402
from rlvr.envs.remote.server import ServerThread, build_app  # noqa: E402
from rlvr.envs.remote.session import ServedEnv  # noqa: E402
from rlvr.envs.remote.wire import RemoteEnvError, to_wire  # noqa: E402

GUESS_ARGS = {"n": 20, "reward": "per_turn"}  # arguments travel: a 5-turn game rewarded every turn


@pytest.fixture(scope="module")
def arithmetic():
    with ServerThread(build_app(ServedEnv("rlvr/Arithmetic-v0"))) as server:
        yield server.url


@pytest.fixture(scope="module")
def guess():
    with ServerThread(build_app(ServedEnv("rlvr/GuessNumber-v0", GUESS_ARGS))) as server:
        yield server.url


def scripted(env_id: str, seed: int, right: bool, env_args: dict | None = None) -> list[str]:
    """The completions of one scripted episode, found by playing it locally: the environment's known-good answer
    each turn (`right`), or its known-bad one."""
    env = envs.make(env_id, **(env_args or {}))
    env.reset(seed=seed)
    actions, done = [], False
    while not done:
        actions.append(env.unwrapped.reference_action() if right else env.unwrapped.wrong_action())
        _, _, terminated, truncated, _ = env.step(actions[-1])
        done = terminated or truncated
    env.close()
    return actions


def play(env: Any, seed: int, actions: list[str]) -> list[tuple]:
    """reset(seed) then each action: every value the Gymnasium API returned, in order."""
    trace = [env.reset(seed=seed)]
    trace += [env.step(action) for action in actions]
    return trace


def play_openenv(url: str, seed: int, actions: list[str]) -> list[tuple]:
    """The same episode through OpenEnv's own client: its results as (messages, reward, done, terminated, truncated,
    info) per turn, the JSON the server sent."""
    with GenericEnvClient(base_url=url).sync() as client:
        results = [client.reset(seed=seed)] + [client.step({"completion": a}) for a in actions]
    return [
        (r.observation["messages"], r.reward, r.done, r.observation["terminated"], r.observation["truncated"],
         r.observation["info"])
        for r in results
    ]  # fmt: skip


def as_openenv(trace: list[tuple]) -> list[tuple]:
    """A local trace as OpenEnv's client sees it: reward None after the reset, info as JSON."""
    (messages, info), steps = trace[0], trace[1:]
    out = [(messages, None, False, False, False, to_wire(info))]
    return out + [(m, r, t or u, t, u, to_wire(i)) for m, r, t, u, i in steps]


@pytest.mark.parametrize("right", [True, False], ids=["right", "wrong"])
def test_openenvs_client_plays_arithmetic_as_the_local_environment(arithmetic, right):
    for seed in (0, 1, 7):
        actions = scripted("rlvr/Arithmetic-v0", seed, right)
        local = play(envs.make("rlvr/Arithmetic-v0"), seed, actions)
        assert play_openenv(arithmetic, seed, actions) == as_openenv(local)
        outcome = local[-1][-1]["verdict"].outcome
        assert (outcome, local[-1][1]) == (("correct", 1.0) if right else ("incorrect", 0.0))


@pytest.mark.parametrize("right", [True, False], ids=["right", "wrong"])
def test_remote_env_plays_a_multi_turn_game_as_the_local_environment(guess, right):
    """RemoteEnv returns what the local environment returns, Verdicts included: per-turn rewards, the replies, and
    the last turn's termination (solved) or truncation (out of turns)."""
    remote = RemoteEnv(guess)
    try:
        for seed in (3, 11):
            actions = scripted("rlvr/GuessNumber-v0", seed, right, GUESS_ARGS)
            local = play(envs.make("rlvr/GuessNumber-v0", **GUESS_ARGS), seed, actions)
            assert play(remote, seed, actions) == local
            assert len(actions) > 1 and local[-1][2 if right else 3]  # terminated when solved, else truncated
        assert play_openenv(guess, seed, actions) == as_openenv(local)  # and OpenEnv's client sees the same
    finally:
        remote.close()


def test_remote_env_is_a_gymnasium_env(arithmetic):
    remote = RemoteEnv(arithmetic)
    try:
        gymnasium.utils.env_checker.check_env(remote, skip_render_check=True)
        assert (remote.env_id, remote.env_version) == ("rlvr/Arithmetic-v0", "0")
        local_prompt, local_info = envs.make("rlvr/Arithmetic-v0").reset(options={"task_id": "42"})
        assert remote.reset(options={"task_id": "42"}) == (local_prompt, local_info)
        assert remote.state()["task_id"] == "42" and remote.state()["running"]
    finally:
        remote.close()


def test_sessions_are_separate_environments(arithmetic):
    """Two connections, two environments: episodes interleaved, each its own."""
    first, second = RemoteEnv(arithmetic), RemoteEnv(arithmetic)
    try:
        a, b = first.reset(seed=1)[0], second.reset(seed=2)[0]
        assert a != b
        right = envs.make("rlvr/Arithmetic-v0")
        right.reset(seed=1)
        assert first.step(right.unwrapped.reference_action())[1] == 1.0
        with pytest.raises(StepAfterDoneError):  # refused here, as locally, before anything is sent
            first.step("again")
        assert second.state()["running"] and second.step("no idea")[1] == 0.0
    finally:
        first.close()
        second.close()


# ---- bad requests ------------------------------------------------------------------------------------------------


def post(url: str, path: str, body: bytes | str | dict) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
    request = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize(
    "path, body, status, says",
    [
        ("/reset", b"{not json", 422, "JSON decode error"),
        ("/reset", {"seed": -1}, 422, "seed"),
        ("/reset", {"seed": 1, "options": {"task": {"answer": 3}}}, 400, "reset options over the wire: task_id"),
        ("/reset", {"options": {"task_id": "x"}}, 400, "task ids are integer seeds"),
        ("/reset", {"level": 3}, 400, "reset takes seed, options and episode_id; got level"),
        ("/step", {"action": {"completion": 3}}, 422, "completion: Input should be a valid string"),
        ("/step", {"action": {"text": "7"}}, 422, "completion: Field required"),
        ("/step", {"completion": "7"}, 422, "action: Field required"),
        ("/step", {"action": {"completion": "\\boxed{7}"}}, 409, "no episode is running"),
    ],
)
def test_a_bad_http_request_gets_a_4xx_and_one_line(arithmetic, path, body, status, says):
    code, answer = post(arithmetic, path, body)
    assert code == status, answer
    assert isinstance(answer["detail"], str) and "\n" not in answer["detail"] and says in answer["detail"], answer
    with urllib.request.urlopen(arithmetic + "/health", timeout=30) as response:  # and the server goes on
        assert json.loads(response.read())["status"] == "healthy"


def test_http_reset_gives_the_tasks_prompt_and_metadata_and_schema_say_what_is_served(arithmetic):
    code, answer = post(arithmetic, "/reset", {"seed": 5})
    messages, info = envs.make("rlvr/Arithmetic-v0").reset(seed=5)
    assert code == 200 and answer["reward"] is None and not answer["done"]
    assert answer["observation"]["messages"] == messages and answer["observation"]["info"] == to_wire(info)
    with urllib.request.urlopen(arithmetic + "/metadata", timeout=30) as response:
        metadata = json.loads(response.read())
    assert (metadata["name"], metadata["version"]) == ("rlvr/Arithmetic-v0", "0")
    with urllib.request.urlopen(arithmetic + "/schema", timeout=30) as response:
        schema = json.loads(response.read())
    assert schema["action"]["required"] == ["completion"]
    assert {"messages", "terminated", "truncated", "info", "reward", "done"} <= set(schema["observation"]["properties"])


def test_a_bad_websocket_message_is_an_error_and_the_session_goes_on(arithmetic):
    from websockets.sync.client import connect

    with connect(arithmetic.replace("http", "ws", 1) + "/ws") as ws:

        def send(message: str | dict) -> dict:
            ws.send(message if isinstance(message, str) else json.dumps(message))
            return json.loads(ws.recv(timeout=30))

        for bad in ("{oops", {"type": "step", "data": {"completion": "7"}}, {"type": "step", "data": {"x": 1}},
                    {"type": "reset", "data": {"seed": "three"}}, {"type": "dance"}):  # fmt: skip
            answer = send(bad)
            assert answer["type"] == "error" and "\n" not in answer["data"]["message"], answer
        assert "no episode is running" in send({"type": "step", "data": {"completion": "7"}})["data"]["message"]
        refused = send({"type": "reset", "data": {"seed": "three"}})["data"]["message"]
        assert "seed must be a non-negative integer" in refused
        answer = send({"type": "reset", "data": {"seed": 4}})  # the same session plays on
        assert answer["type"] == "observation" and answer["data"]["observation"]["messages"]


def test_remote_env_says_what_went_wrong_in_one_line(arithmetic):
    remote = RemoteEnv(arithmetic)
    try:
        with pytest.raises(RemoteEnvError, match=r"could not reset: Server error: .*task ids are integer seeds"):
            remote.reset(options={"task_id": "x"})
        with pytest.raises(TypeError, match="action must be the model's text"):
            remote.step(7)
        assert remote.reset(seed=1)[0]  # the session goes on
    finally:
        remote.close()
    with pytest.raises(RemoteEnvError, match=r"^http://127\.0\.0\.1:1: could not connect to: Failed to connect"):
        RemoteEnv("http://127.0.0.1:1", connect_timeout_s=5)
