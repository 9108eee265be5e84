"""pass@k and its interval against worked numbers, the summary, the episode log's resume, and
`rlvr eval` end to end on the tiny model (Hugging Face and vLLM samplers)."""

from __future__ import annotations

import importlib.util
import json
import math
from itertools import combinations

import pytest

from rlvr.cli import main
from rlvr.envs.episode import Episode
from rlvr.envs.episode_log import (
    CHUNK,
    EpisodeLogError,
    append_records,
    chunk_bounds,
    episode_from_record,
    load_whole_chunks,
    read_records,
    sort_by_group,
)
from rlvr.envs.evaluate import bootstrap_ci, format_table, pass_at_k, pass_at_k_summary, summarize
from rlvr.envs.sampler import FinishReason
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require


@pytest.mark.parametrize(
    "n,c,k,expected",
    [
        (5, 2, 1, 0.4),
        (5, 2, 2, 0.7),
        (5, 0, 3, 0.0),
        (5, 5, 1, 1.0),
        (5, 4, 2, 1.0),
        (1, 1, 1, 1.0),
        (10, 3, 4, 1 - math.comb(7, 4) / math.comb(10, 4)),  # 1 - 35/210 = 0.8333...
    ],
)
def test_pass_at_k_worked_numbers(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_is_the_chance_that_some_k_subset_holds_a_correct_sample():
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                subsets = list(combinations([1] * c + [0] * (n - c), k))
                assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets), abs=1e-12)


@pytest.mark.parametrize(
    "n,c,k,error",
    [
        (5, 6, 1, ValueError),
        (5, 2, 6, ValueError),
        (5, 2, 0, ValueError),
        (5, -1, 1, ValueError),
        (5.0, 2, 1, TypeError),
        (5, True, 1, TypeError),
    ],
)
def test_pass_at_k_bad_input(n, c, k, error):
    with pytest.raises(error):
        pass_at_k(n, c, k)


def test_bootstrap_interval():
    assert bootstrap_ci([0.25, 0.25, 0.25]) == (0.25, 0.25, 0.25)
    values = [1.0] * 50 + [0.0] * 50
    mean, lo, hi = bootstrap_ci(values, seed=3)
    assert mean == 0.5 and bootstrap_ci(values, seed=3) == (mean, lo, hi)  # seeded: reproducible
    half_width = 1.96 * math.sqrt(0.25 / 100)  # the normal approximation: 0.098
    assert lo == pytest.approx(0.5 - half_width, abs=0.02) and hi == pytest.approx(0.5 + half_width, abs=0.02)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def episode(group: int, outcome: Outcome, reward: float, tokens: int = 3) -> Episode:
    return Episode(
        "rlvr/Arithmetic-v0",
        str(100 + group),
        group,
        [1, 2],
        [7] * tokens,
        [1] * tokens,
        [-0.5] * tokens,
        [reward],
        outcome,
        [{"role": "user", "content": "q"}],
        "stop",
        {"model_step": 0},
    )


C, W, F, E = Outcome.CORRECT, Outcome.INCORRECT, Outcome.FORMAT_ERROR, Outcome.ERROR
# Task 0: 5 samples, 2 correct. Task 1: 4 valid samples, 3 correct, and one grader error (not a sample).
EPISODES = [episode(0, o, float(o is C)) for o in (C, W, C, F, W)] + [
    episode(1, o, float(o is C)) for o in (C, C, E, W, C)
]


def test_pass_at_k_summary_leaves_errors_out():
    s = pass_at_k_summary(EPISODES, [1, 2, 5])
    assert s["1"]["estimate"] == pytest.approx((0.4 + 0.75) / 2)  # task 1 is n=4, c=3: 3/4
    assert s["2"]["estimate"] == pytest.approx((0.7 + 1.0) / 2)
    assert s["5"] == {**s["5"], "tasks": 1, "estimate": pytest.approx(1.0)}  # task 1 has only 4 samples
    assert s["1"]["ci_low"] <= s["1"]["estimate"] <= s["1"]["ci_high"]


def test_summary_counts_and_table():
    s = summarize(
        EPISODES, [1, 2], env_id="rlvr/Arithmetic-v0", env_args={"difficulty": 2}, model="tiny", seconds=2.0, tokens=27
    )
    assert s["outcomes"] == {"correct": 5, "incorrect": 3, "format_error": 1, "truncated": 0, "error": 1}
    assert (s["tasks"], s["episodes"], s["valid_episodes"]) == (2, 10, 9)
    assert s["mean_reward"]["estimate"] == pytest.approx((2 / 5 + 3 / 4) / 2)  # per task, errors left out
    assert s["tokens_per_second"] == 13.5
    json.dumps(s)  # summary.json is plain JSON
    table = format_table(s)
    for text in ("pass@1", "0.575", "pass@2", "format_error 1", "error 1", "rlvr/Arithmetic-v0 {'difficulty': 2}"):
        assert text in table


def test_chunk_bounds_are_fixed_from_task_zero():
    assert chunk_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert chunk_bounds(8, 4) == [(0, 4), (4, 8)] and chunk_bounds(3, 32) == [(0, 3)] and chunk_bounds(0, 4) == []
    with pytest.raises(ValueError):
        chunk_bounds(4, 0)


def chunk_lines(start: int, stop: int, group_size: int = 2, outcome: Outcome = C, bounds=None) -> list[dict]:
    """The lines a run writes for chunk [start, stop): every group whole, each line naming the chunk."""
    return [
        {**episode(g, outcome, float(outcome is C)).to_dict(), CHUNK: list(bounds or (start, stop))}
        for g in range(start, stop)
        for _ in range(group_size)
    ]


def test_log_resumes_by_whole_chunks(tmp_path):
    """A chunk is kept only as its whole write: a torn line, a partial group, an `error`, other bounds
    or no bounds send the whole chunk back to be sampled, and its lines leave the file."""
    path = tmp_path / "episodes.jsonl"
    chunks = [(0, 2), (2, 4), (4, 5)]
    whole = chunk_lines(0, 2) + chunk_lines(2, 4) + chunk_lines(4, 5)
    append_records(path, whole)
    assert load_whole_chunks(path, chunks, 2) == (whole, [])
    assert read_records(path) == whole  # nothing to drop: the file is as it was

    text = path.read_text()
    lines = text.splitlines(keepends=True)
    path.write_text("".join(lines[:7]) + lines[7][:40])  # stopped in chunk (2, 4)'s write: group 3 half, torn
    kept, redo = load_whole_chunks(path, chunks, 2)
    assert redo == [(2, 4), (4, 5)] and kept == whole[:4]
    assert path.read_text() == "".join(lines[:4])  # group 2, whole on its own, went with its chunk
    append_records(path, whole[4:])
    assert read_records(path) == whole  # appending after the repair makes whole lines

    bad = {
        "error": chunk_lines(0, 2)[:3] + chunk_lines(1, 2, outcome=E)[:1],  # a grader outage in group 1
        "other bounds": chunk_lines(0, 2, bounds=(0, 3)),  # a run with more tasks sampled it in a larger chunk
        "no bounds": [{k: v for k, v in r.items() if k != CHUNK} for r in chunk_lines(0, 2)],  # not a chunk's write
        "a group short": chunk_lines(0, 2)[:3],
        "a group long": chunk_lines(0, 2) + chunk_lines(1, 2)[:1],
    }
    for case, first in bad.items():
        path.write_text("")
        append_records(path, first + whole[4:])
        kept, redo = load_whole_chunks(path, chunks, 2)
        assert redo == [(0, 2)] and kept == whole[4:], case
        assert read_records(path) == whole[4:], case


def test_an_agent_episodes_segments_are_lines_of_one_episode(tmp_path):
    """An agent that rewrote its history leaves two lines for one episode: the group is whole with G
    episodes, whatever their segments; summaries count the episode once."""
    path = tmp_path / "episodes.jsonl"
    lines = chunk_lines(0, 1)
    second = {**lines[0], "metadata": {**lines[0]["metadata"], "segment": 1}}
    append_records(path, [lines[0], second, lines[1]])
    assert load_whole_chunks(path, [(0, 1)], 2) == ([lines[0], second, lines[1]], [])
    episodes = [episode_from_record(r) for r in read_records(path)]
    s = summarize(episodes, [1], env_id="rlvr/Agent-v0", env_args={}, model="tiny")
    assert (s["tasks"], s["episodes"], s["outcomes"]["correct"]) == (1, 2, 2)


def test_log_keeps_the_lines_of_a_longer_run(tmp_path):
    """Groups past this run's chunks (a run with more tasks wrote them) stay in the file untouched,
    for a later run to judge, and are not this run's records; `sort_by_group` puts a chunk sampled
    again back in its place."""
    path = tmp_path / "episodes.jsonl"
    append_records(path, chunk_lines(0, 2) + chunk_lines(2, 4))
    kept, redo = load_whole_chunks(path, [(0, 2), (2, 3)], 2)  # 3 tasks now: chunk (2, 3) was sampled as (2, 4)
    assert kept == chunk_lines(0, 2) and redo == [(2, 3)]
    assert read_records(path) == chunk_lines(0, 2) + chunk_lines(2, 4)[2:]  # group 3's lines: not this run's
    path.write_text("")
    append_records(path, chunk_lines(2, 4) + chunk_lines(0, 2) + chunk_lines(4, 6))
    kept, redo = load_whole_chunks(path, [(0, 2), (2, 4)], 2)
    assert redo == [] and kept == chunk_lines(2, 4) + chunk_lines(0, 2)
    assert read_records(path)[-4:] == chunk_lines(4, 6)
    sort_by_group(path)
    assert read_records(path) == chunk_lines(0, 2) + chunk_lines(2, 4) + chunk_lines(4, 6)


def test_finish_reasons_round_trip_through_the_log_as_plain_strings(tmp_path):
    """Enums in memory, the same plain strings on disk as before they were enums."""
    eps = [episode(0, C, 1.0), episode(0, W, 0.0), episode(0, Outcome.TRUNCATED, 0.0)]
    eps[1].finish_reason, eps[2].finish_reason = FinishReason.LENGTH, None  # None: the model never sampled
    path = tmp_path / "episodes.jsonl"
    append_records(path, [ep.to_dict() for ep in eps])
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["finish_reason"], r["outcome"]) for r in raw] == [
        ("stop", "correct"),
        ("length", "incorrect"),
        ("", "truncated"),
    ]
    back = [episode_from_record(r) for r in read_records(path)]
    assert back == eps
    assert [ep.finish_reason for ep in back] == [FinishReason.STOP, FinishReason.LENGTH, None]
    assert all(type(ep.outcome) is Outcome for ep in back) and type(back[0].finish_reason) is FinishReason
    # An episode built from strings (an old log line, a hand-made record) holds the enums too.
    old = Episode.from_dict({**eps[1].to_dict(), "outcome": "error", "finish_reason": "length"})
    assert old.is_error and old.finish_reason is FinishReason.LENGTH
    with pytest.raises(ValueError):
        Episode.from_dict({**eps[0].to_dict(), "finish_reason": "abort"})


def test_log_refuses_a_damaged_middle(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text('{"not": "an episode"}\n')
    with pytest.raises(EpisodeLogError):
        read_records(path)
    path.write_text("garbage\n" + json.dumps(EPISODES[0].to_dict()) + "\n")
    with pytest.raises(EpisodeLogError):
        read_records(path)


def eval_args(model_dir, out, *extra):
    return [
        "eval",
        "--model",
        str(model_dir),
        "--env",
        "rlvr/GuessNumber-v0",
        "--env-arg",
        "n=8",
        "--env-arg",
        "max_turns=2",
        "--k",
        "1,2",
        "--max-tokens",
        "6",
        "--chunk",
        "2",
        "--no-progress",
        "--out",
        str(out),
        *extra,
    ]


def test_eval_writes_resumes_and_extends(model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(eval_args(model_dir, out, "--sampler", "hf", "--tasks", "3")) == 0
    table = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    lines = (out / "episodes.jsonl").read_text().splitlines()
    assert summary["tasks"] == 3 and summary["episodes"] == 6 == len(lines)
    assert summary["env"] == "rlvr/GuessNumber-v0" and summary["env_args"] == {"n": 8, "max_turns": 2}
    assert set(summary["pass_at_k"]) == {"1", "2"} and summary["tokens_per_second"] > 0
    assert sum(summary["outcomes"].values()) == 6 and "pass@2" in table
    first = json.loads(lines[0])
    assert {"prompt", "completion", "reward", "outcome", "metadata"} <= first.keys()
    assert first["prompt"].startswith("<|im_start|>user") and first["metadata"]["seed"] == 1_000_000

    assert [json.loads(x)["chunk"] for x in lines] == [[0, 2]] * 4 + [[2, 3]] * 2  # chunks of 2, the last cut at 3

    # Interrupted during the second chunk: task 2's group half written, its last line torn.
    (out / "episodes.jsonl").write_text("\n".join(lines[:5]) + "\n" + lines[5][:40])
    assert main(eval_args(model_dir, out, "--sampler", "hf", "--tasks", "3")) == 0
    resumed = (out / "episodes.jsonl").read_text().splitlines()
    assert resumed == lines  # the first chunk kept, the second sampled again whole: as the run was

    # More tasks: chunk [2, 4) replaces [2, 3), sampled whole as a run of 4 tasks samples it.
    assert main(eval_args(model_dir, out, "--sampler", "hf", "--tasks", "4")) == 0
    extended = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert [json.dumps(r, ensure_ascii=False) for r in extended[:4]] == resumed[:4]
    assert [(r["group_id"], r["chunk"]) for r in extended[4:]] == [(2, [2, 4])] * 2 + [(3, [2, 4])] * 2
    assert json.loads((out / "summary.json").read_text())["episodes"] == 8


def test_eval_refuses_bad_arguments(model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(eval_args(model_dir, out, "--k", "0", "--sampler", "hf")) == 2
    assert main(["eval", "--env", "rlvr/Nope-v0", "--out", str(out)]) == 2
    assert main(["eval", "--model", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert main(eval_args(model_dir, out, "--sampler", "hf", "--tasks", "1", "--samples", "2")) == 0
    assert main(eval_args(model_dir, out, "--sampler", "hf", "--tasks", "1", "--temperature", "0.5")) == 2
    assert "another run" in capsys.readouterr().err
    assert main(eval_args(model_dir, tmp_path / "x", "--sampler", "openai")) == 2  # needs --base-url


def test_eval_with_vllm(model_dir, tmp_path, capsys):
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    out = tmp_path / "run"
    # All defaults: the tiny model, the vLLM sampler, rlvr/Arithmetic-v0.
    assert main(["eval", "--tasks", "4", "--k", "1,4", "--max-tokens", "12", "--no-progress", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sampler"] == "vllm" and summary["episodes"] == 16 and summary["tokens"] > 0
    assert summary["model"] == str(model_dir) and summary["env"] == "rlvr/Arithmetic-v0"
    assert summary["outcomes"]["correct"] > 0  # the shipped model answers some held-out tasks right
    assert "pass@4" in capsys.readouterr().out


# A grader that is down for the task ids in GRADER_DOWN: their episodes end as `error`.
GRADER_DOWN: set[str] = set()


def _flaky_grader_env():
    from rlvr.envs import ProceduralTasks, SingleTurnEnv, Task
    from rlvr.verifiers.verdict import Verdict

    class FlakyGraderEnv(ProceduralTasks, SingleTurnEnv):
        """Say the seed's last digit; the grader fails for the tasks in GRADER_DOWN."""

        def make_task(self, seed):
            digit = str(seed % 10)
            return Task(
                task_id=str(seed),
                prompt=[{"role": "user", "content": f"Say {digit}."}],
                answer=digit,
                reference=digit,
                wrong="x",
            )

        def verify(self, task, response):
            if task.task_id in GRADER_DOWN:
                raise ConnectionError("grader unreachable")
            ok = task.answer in response
            return Verdict(float(ok), Outcome.CORRECT if ok else Outcome.INCORRECT)

    return FlakyGraderEnv


def test_eval_resume_retries_the_tasks_whose_grader_failed(model_dir, tmp_path):
    import gymnasium as gym

    env_id = "tests/FlakyGrader-v0"
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=_flaky_grader_env())
    out = tmp_path / "run"
    args = [
        "eval",
        "--model",
        str(model_dir),
        "--env",
        env_id,
        "--tasks",
        "3",
        "--samples",
        "2",
        "--max-tokens",
        "4",
        "--sampler",
        "hf",
        "--no-progress",
        "--out",
        str(out),
    ]
    from rlvr import envs

    env = envs.make(env_id)
    env.reset(seed=1_000_001)  # task 1 of the run (reset seed task_start + 1) meets an outage
    GRADER_DOWN.add(env.unwrapped.task.task_id)
    try:
        assert main(args) == 0
    finally:
        GRADER_DOWN.clear()
    first = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert [r["outcome"] == "error" for r in first] == [False, False, True, True, False, False]
    assert json.loads((out / "summary.json").read_text())["outcomes"]["error"] == 2

    assert main(args) == 0  # the grader is back: task 1's chunk (all three tasks) is sampled again whole
    again = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert [r["group_id"] for r in again] == [0, 0, 1, 1, 2, 2] and all(r["outcome"] != "error" for r in again)
    assert again[:2] + again[4:] == first[:2] + first[4:]  # the same call: the same samples, the same lines
    assert [r["completion_ids"] for r in again] == [r["completion_ids"] for r in first]  # task 1 now graded
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == summary["valid_episodes"] == 6 and summary["outcomes"]["error"] == 0
