"""`rlvr eval` on an environment with a fixed list of problems: each problem once, in order (all of them by
default, the first N with --tasks N), the summary saying "N of M problems", and a stopped run resuming to
exactly what the uninterrupted one writes; the Python API's `evaluate` visits the same problems."""

from __future__ import annotations

import json

from rlvr.cli import main
from rlvr.trainers import evaluate


def eval_args(data, out, *extra):
    return [
        "eval",
        "--env",
        "rlvr/MathDataset-v0",
        "--env-arg",
        f"path={data}",
        "--sampler",
        "hf",
        "--max-tokens",
        "4",
        "--chunk",
        "2",
        "--no-progress",
        "--out",
        str(out),
        *extra,
    ]


def test_every_problem_once_in_order(tmp_path, capsys):
    data = tmp_path / "five.jsonl"
    data.write_text(
        "".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(5))
    )
    out = tmp_path / "all"
    assert main(eval_args(data, out, "--k", "1,2")) == 0  # no --tasks: all five, two samples each
    printed = capsys.readouterr().out
    assert "tasks / episodes  5 of 5 problems / 10 (10 valid)" in printed
    lines = (out / "episodes.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    assert [(r["task_id"], r["group_id"]) for r in records] == [(str(i // 2), i // 2) for i in range(10)]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["tasks"], summary["problems"], summary["pass_at_k"]["2"]["tasks"]) == (5, 5, 5)
    assert summary["sampling"]["task_start"] == 0

    # Stopped inside the third chunk's write: the resumed run writes what the uninterrupted one wrote.
    (out / "episodes.jsonl").write_text("\n".join(lines[:9]) + "\n")
    assert main(eval_args(data, out, "--k", "1,2")) == 0
    assert (out / "episodes.jsonl").read_text().splitlines() == lines
    capsys.readouterr()

    first = tmp_path / "first"  # --tasks 3: the first three, once each
    assert main(eval_args(data, first, "--tasks", "3")) == 0
    assert "3 of 5 problems" in capsys.readouterr().out
    assert [json.loads(x)["task_id"] for x in (first / "episodes.jsonl").read_text().splitlines()] == ["0", "1", "2"]

    api = evaluate("tiny", "rlvr/MathDataset-v0", env_args={"path": str(data)}, max_tokens=4)  # the API: all five
    assert [ep.task_id for ep in api.episodes] == ["0", "1", "2", "3", "4"] and api.summary["problems"] == 5
