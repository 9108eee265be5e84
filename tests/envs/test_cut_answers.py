"""A completion cut at max_tokens is never paid (issue 38): on real MATH-500 outputs of a real
small model, rambles cut at the token limit were paid on a number restated from the question, and
a policy learns exactly that. The scripted text below ends mid-sentence on the gold ("... so the
answer is 12"): graded as a complete text it is right, so only the cut can make it 0.
- `rlvr eval` through the real CLI, sampling from a scripted OpenAI-compatible server (FastAPI on
  loopback, answered with finish_reason "length", as vLLM answers a cut completion);
- `envs.rollout.rollout`, the function `rlvr train` samples through (trainers/loop.py via the
  sampler backend's `rollout`), with a scripted sampler: the cut episode is `truncated` with reward
  0 and reason `length`; an env that declares `grade_truncated` keeps its verdict."""

from __future__ import annotations

import json
import threading
import time

import gymnasium as gym
import pytest
import uvicorn
from fastapi import FastAPI

from rlvr.envs.episode import TruncationReason
from rlvr.envs.rollout import RolloutRequest, rollout
from rlvr.envs.sampler import FinishReason, Sample, SamplingSettings
from rlvr.envs.tasks.math_dataset import MathDatasetEnv
from rlvr.verifiers.verdict import Outcome
from tests.conftest import free_port, rlvr_here

TEXT = "Five apples and seven apples make 12 apples, so the answer is 12"  # right, if it were complete


class GradesCutText(MathDatasetEnv):
    grade_truncated = True


gym.register("rlvr-test/MathGradesCut-v0", entry_point=GradesCutText)


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    path = tmp_path_factory.mktemp("cut") / "problems.jsonl"
    rows = [{"question": f"Tom has 5 apples and buys 7 more ({i}). How many now?", "answer": "12"} for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class ScriptedSampler:
    """Every sample is TEXT's tokens, ending as `finish` says."""

    def __init__(self, tokenizer, finish: FinishReason):
        self.ids, self.finish = tuple(tokenizer.encode(TEXT, add_special_tokens=False)), finish

    def generate(self, prompt_token_ids, n, sampling):
        return [[Sample(self.ids, (0.0,) * len(self.ids), self.finish) for _ in range(n)] for _ in prompt_token_ids]


@pytest.mark.parametrize("env_id", ["rlvr/MathDataset-v0", "rlvr-test/MathGradesCut-v0"])
@pytest.mark.parametrize("finish", [FinishReason.STOP, FinishReason.LENGTH])
def test_a_cut_turn_is_truncated_with_reward_0(problems, tokenizer, env_id, finish):
    groups = rollout(
        RolloutRequest(
            env_id,
            {"path": str(problems)},
            seeds=[0, 1],
            group_size=2,
            sampling=SamplingSettings(max_tokens=len(tokenizer.encode(TEXT, add_special_tokens=False))),
        ),
        ScriptedSampler(tokenizer, finish),
        tokenizer,
        progress=False,
    )
    episodes = [ep for g in groups for ep in g.episodes]
    assert len(episodes) == 4
    paid = finish is FinishReason.STOP or env_id.startswith("rlvr-test/")
    for ep in episodes:
        assert ep.reward == (1.0 if paid else 0.0)
        assert ep.outcome is (Outcome.CORRECT if paid else Outcome.TRUNCATED)
        assert ep.truncation is (None if paid else TruncationReason.LENGTH)


@pytest.fixture(scope="module")
def scripted_server():
    """An OpenAI-compatible /v1/completions that answers TEXT, cut by the token limit."""
    app = FastAPI()

    @app.post("/v1/completions")
    def completions(body: dict):
        n = 1 if body.get("temperature") == 0 else int(body.get("n", 1))
        choices = [{"index": i, "text": TEXT, "finish_reason": "length", "logprobs": None} for i in range(n)]
        return {"id": "cmpl-scripted", "object": "text_completion", "model": body["model"], "choices": choices}

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(10)


def test_rlvr_eval_never_pays_a_cut_answer(scripted_server, problems, tmp_path, capsys):
    out = tmp_path / "eval"
    args = ["eval", "--base-url", scripted_server, "--model", "scripted", "--tokenizer", "tiny"]
    args += ["--env", "rlvr/MathDataset-v0", "--env-arg", f"path={problems}", "--tasks", "4", "--k", "1"]
    args += ["--max-tokens", "16", "--no-progress", "--out", str(out)]
    run = rlvr_here(capsys, *args)
    assert run.returncode == 0, run.stderr
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 4
    assert {(e["outcome"], e["truncation"], sum(e["turn_rewards"])) for e in episodes} == {("truncated", "length", 0.0)}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pass_at_k"]["1"]["estimate"] == 0.0 and summary["mean_reward"]["estimate"] == 0.0
