"""Held-out means held out (issue 43, item 1), through the real `rlvr train` (in this process, tiny
model, HF sampler): on a dataset, training and the held-out evaluation use disjoint rows, whether
the evaluation has a split of its own (`--eval-env-arg split=test`) or the one file holds every
10th row out (`envs.held_out`). The rows evaluated are read from `eval.jsonl`; the rows trained on
from `samples.jsonl` (one task a step, shown every step: every training task is seen)."""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.envs.held_out import HELD_OUT_EVERY, reserve, split_tasks
from tests.conftest import rlvr_here

TRAIN = [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(30)]
TEST = [{"question": f"What is {i} + 100?", "answer": str(i + 100)} for i in range(12)]


def write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def train(capsys, out: Path, steps: int, *env: str):
    return rlvr_here(
        capsys, "train", "--env", "rlvr/MathDataset-v0", *env, "--eval-tasks", "5", "--steps", steps,
        "--tasks-per-step", "1", "--group-size", "2", "--max-tokens", "6", "--sampler", "hf", "--sample-every", "1",
        "--warmup-steps", "0", "--no-progress", "--log-every", "0", "--threads", "1", "--report-to", "none",
        "--device", "cpu", "--out", out,
    )  # fmt: skip


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_training_on_one_split_never_evaluates_a_training_row(tmp_path, capsys):
    data = tmp_path / "math"  # a folder in the Hugging Face download layout: split = the files' prefix
    write(data / "train-00000-of-00001.jsonl", TRAIN)
    write(data / "test-00000-of-00001.jsonl", TEST)
    run = train(capsys, tmp_path / "run", 4, "--env-arg", f"path={data}", "--env-arg", "split=train",
                "--eval-env-arg", "split=test")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert (
        "held out: 5 of the 12 rows of the evaluation environment (split=test) evaluate, ids 0, 1, 2, 3, ...; "
        "training draws from the 30 rows of its own"
    ) in run.stderr
    evaluated = {TEST[int(i)]["question"] for e in records(tmp_path / "run" / "eval.jsonl") for i in e["task_ids"]}
    assert len(evaluated) == 5
    trained = records(tmp_path / "run" / "samples.jsonl")
    assert len({s["step"] for s in trained}) == 4  # every step's one task
    questions = {r["question"] for r in TRAIN}
    for sample in trained:
        [question] = [q for q in questions | evaluated if f"{q}\n" in sample["prompt"]]
        assert question in questions and question not in evaluated


def test_one_file_holds_every_tenth_row_out_of_training(tmp_path, capsys):
    path = write(tmp_path / "math.jsonl", TRAIN)
    run = train(capsys, tmp_path / "run", 6, "--env-arg", f"path={path}")
    assert run.returncode == 0, run.stderr[-3000:]
    assert (
        "held out: every 10th row of the 30 listed (3 rows, ids 0, 10, 20) evaluate; training draws from the "
        "other 27 rows"
    ) in run.stderr
    assert "note: 3 rows are held out, so 3 are evaluated (not 5), each once" in run.stderr
    evals = records(tmp_path / "run" / "eval.jsonl")
    assert [e["task_ids"] for e in evals] == [["0", "10", "20"]] * 2
    assert "held-out accuracy on 3 tasks:" in run.stdout
    trained = {s["task_id"] for s in records(tmp_path / "run" / "samples.jsonl")}
    assert trained and not trained & {"0", "10", "20"}


def test_the_split_rule_and_its_refusals(tmp_path):
    ids = [str(i) for i in range(25)]
    train_ids, held = reserve(ids)
    assert held == ("0", "10", "20") and len(train_ids) == 22 and not set(train_ids) & set(held)
    path = write(tmp_path / "math.jsonl", TRAIN)
    split = split_tasks("rlvr/MathDataset-v0", {"path": str(path)}, {}, 0, 0)
    assert split.evaluate is None and split.reserved == 3  # no evaluation asked: the rows stay held out
    draws = split.training_tasks(range(1000))["task_ids"]
    assert set(draws) == {str(i) for i in range(30) if i % HELD_OUT_EVERY}  # every training row, no held-out one


def test_code_dataset_splits_and_the_same_rows_are_refused(tmp_path, capsys):
    def task(i: int) -> dict:
        return {"id": f"t{i}", "prompt": f"Print {i}.", "tests": [{"stdin": "", "stdout": f"{i}\n"}]}

    train_file = write(tmp_path / "train.jsonl", [task(i) for i in range(20)])
    test_file = write(tmp_path / "test.jsonl", [task(100 + i) for i in range(4)])
    base = ("train", "--env", "rlvr/CodeDataset-v0", "--env-arg", f"path={train_file}", "--eval-tasks", "8")
    checked = rlvr_here(capsys, *base, "--eval-env-arg", f"path={test_file}", "--check", "--out", tmp_path / "a")
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert json.loads(checked.stdout)["held_out"] == (
        f"held out: 4 of the 4 rows of the evaluation environment (path={test_file}) evaluate, ids t100, t101, "
        "t102, t103; training draws from the 20 rows of its own"
    )
    alone = rlvr_here(capsys, *base, "--check", "--out", tmp_path / "b")
    assert json.loads(alone.stdout)["held_out"] == (
        "held out: every 10th row of the 20 listed (2 rows, ids t0, t10) evaluate; training draws from the other "
        "18 rows"
    )
    same = rlvr_here(capsys, *base, "--eval-env-arg", f"path={tmp_path}/../{tmp_path.name}/train.jsonl", "--check")
    assert same.returncode == 2
    assert same.stderr.strip().endswith("the evaluation would not be held out; point it at another split or file")
