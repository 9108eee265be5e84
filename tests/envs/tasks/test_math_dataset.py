"""rlvr/MathDataset-v0 on small JSONL and Parquet files written here (no downloads)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlvr import envs
from rlvr.envs.tasks.math_dataset import DatasetError, MathDatasetEnv, extract_boxed
from rlvr.verifiers.verdict import Outcome

GSM8K_ROWS = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
    {"question": "A box holds 12 eggs. How many eggs in 10 boxes?", "answer": "12 * 10 = 120\n#### 120"},
    {"question": "Half of 1,000 is?", "answer": "1000 / 2 = 500\n#### 500"},
]
MATH_ROWS = [
    {"problem": "Simplify $\\frac{6}{8}$.", "solution": "Divide by 2: $\\boxed{\\frac{3}{4}}$."},
    {"problem": "Factor $x^2-1$.", "solution": "It is $\\boxed{(x-1)(x+1)}$."},
    {"problem": "Solve $2x=6$.", "solution": "So $x = \\boxed{3}$."},
]


def write_jsonl(path, rows, extra_lines=()):
    path.write_text("\n".join([json.dumps(r) for r in rows] + list(extra_lines)) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def gsm8k(tmp_path):
    return write_jsonl(tmp_path / "gsm8k.jsonl", GSM8K_ROWS)


@pytest.fixture
def math_parquet(tmp_path):
    path = tmp_path / "math.parquet"
    pq.write_table(pa.Table.from_pylist(MATH_ROWS), path)
    return path


def test_gsm8k_jsonl_tasks_are_rows(gsm8k):
    env = MathDatasetEnv(path=str(gsm8k), answer_format="gsm8k")
    assert env.problems[1] == (GSM8K_ROWS[1]["question"], "120")
    obs, info = env.reset(options={"task_id": "1"})
    assert info["task_id"] == "1" and obs[0]["content"].startswith("A box holds 12 eggs")
    assert "\\boxed{answer}" in obs[0]["content"]
    assert env.task.reference == "\\boxed{120}" and env.task.wrong == "\\boxed{121}"


def test_parquet_with_custom_columns_and_boxed_answers(math_parquet):
    env = MathDatasetEnv(path=str(math_parquet), question_key="problem", answer_key="solution", answer_format="boxed")
    assert [a for _, a in env.problems] == ["\\frac{3}{4}", "(x-1)(x+1)", "3"]


def test_split_picks_files_in_a_directory_and_limit_keeps_the_first_rows(tmp_path):
    write_jsonl(tmp_path / "train-00000.jsonl", GSM8K_ROWS[:2])
    write_jsonl(tmp_path / "test-00000.jsonl", GSM8K_ROWS[2:])
    pq.write_table(pa.Table.from_pylist(GSM8K_ROWS[:2]), tmp_path / "test-00001.parquet")
    env = MathDatasetEnv(path=str(tmp_path), split="test", answer_format="gsm8k")
    assert [a for _, a in env.problems] == ["500", "7", "120"]  # files in name order
    assert len(MathDatasetEnv(path=str(tmp_path), split="train", answer_format="gsm8k", limit=1).problems) == 1


def test_seed_determinism_and_unknown_task_ids(gsm8k):
    env = MathDatasetEnv(path=str(gsm8k), answer_format="gsm8k")
    assert env.reset(seed=4)[1]["task_id"] == env.reset(seed=4)[1]["task_id"]
    for bad in ("3", "-1", "x", "9" * 50):
        with pytest.raises(envs.TaskNotFoundError, match="row indices 0..2"):
            env.reset(options={"task_id": bad})


@pytest.mark.parametrize(
    "lines,match",
    [
        (['{"question": "q", "answer": "1"}', '{"question": "q2", answer: 2}'], r"row 1 \(line 2\): invalid JSON"),
        (['{"question": "q", "answer": "1"}', "", "[1, 2]"], r"row 1 \(line 3\): expected a JSON object"),
        (['{"question": "q", "answer": "1"}', '{"q": "x", "answer": "2"}'], r"row 1 \(line 2\): no 'question' key"),
        (['{"question": "", "answer": "1"}'], r"row 0 \(line 1\): 'question' must be a non-empty string"),
        (['{"question": "q", "answer": null}'], r"row 0 \(line 1\): the answer must be a string or a number"),
        (['{"question": "q", "answer": "  "}'], r"row 0 \(line 1\): the answer is empty"),
    ],
)
def test_malformed_jsonl_names_file_and_row(tmp_path, lines, match):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=match) as err:
        MathDatasetEnv(path=str(path))
    assert str(path) in str(err.value)


def test_format_errors_name_the_row(gsm8k, math_parquet):
    with pytest.raises(DatasetError, match=r"row 0 \(line 1\): answer_format='gsm8k' but the answer has no '####'"):
        MathDatasetEnv(
            path=str(write_jsonl(gsm8k.parent / "raw.jsonl", [{"question": "q", "answer": "7"}])), answer_format="gsm8k"
        )
    with pytest.raises(DatasetError, match=r"math.parquet, row 0: answer_format='boxed'"):
        MathDatasetEnv(path=str(math_parquet), question_key="problem", answer_key="problem", answer_format="boxed")


def test_file_level_errors(tmp_path, math_parquet):
    with pytest.raises(DatasetError, match="nope.jsonl: no such file"):
        MathDatasetEnv(path=str(tmp_path / "nope.jsonl"))
    (tmp_path / "data.csv").write_text("question,answer\n")
    with pytest.raises(DatasetError, match="unsupported file type '.csv'"):
        MathDatasetEnv(path=str(tmp_path / "data.csv"))
    with pytest.raises(DatasetError, match=r"no column\(s\) \['question', 'answer'\]; columns are \['problem', "):
        MathDatasetEnv(path=str(math_parquet))
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DatasetError, match="junk.parquet: not a readable Parquet file"):
        MathDatasetEnv(path=str(tmp_path / "junk.parquet"))
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(DatasetError, match="empty.jsonl: no rows"):
        MathDatasetEnv(path=str(tmp_path / "empty.jsonl"))
    with pytest.raises(DatasetError, match="is a directory: pass split="):
        MathDatasetEnv(path=str(tmp_path))
    with pytest.raises(DatasetError, match="no .jsonl/.parquet file starting with 'dev'"):
        MathDatasetEnv(path=str(tmp_path), split="dev")


def test_bad_keyword_values_through_make(gsm8k):
    with pytest.raises(envs.EnvArgumentError, match="answer_format must be one of"):
        envs.make("rlvr/MathDataset-v0", path=str(gsm8k), answer_format="latex")
    with pytest.raises(envs.EnvArgumentError, match="limit must be a positive integer"):
        envs.make("rlvr/MathDataset-v0", path=str(gsm8k), limit=0)
    with pytest.raises(envs.EnvArgumentError, match="accepts: path, question_key, answer_key"):
        envs.make("rlvr/MathDataset-v0", path=str(gsm8k), column="x")
    with pytest.raises(DatasetError, match="no such file"):
        envs.make("rlvr/MathDataset-v0", path="/nonexistent/x.jsonl")


def test_extract_boxed_balances_braces():
    assert extract_boxed("a \\boxed{1} then \\boxed{\\frac{1}{2}} end") == "\\frac{1}{2}"
    assert extract_boxed("\\boxed{unclosed") is None and extract_boxed("none") is None


def test_verifies_equivalent_answers(math_parquet):
    env = MathDatasetEnv(path=str(math_parquet), question_key="problem", answer_key="solution", answer_format="boxed")
    env.reset(options={"task_id": "1"})
    _, reward, terminated, _, info = env.step("Difference of squares: \\boxed{x^2-1}")
    assert (reward, terminated, info["verdict"].outcome) == (1.0, True, Outcome.CORRECT)
    env.reset(options={"task_id": "0"})
    assert env.step("\\boxed{0.75}")[1] == 1.0
    env.reset(options={"task_id": "0"})
    assert env.step("\\boxed{0.74}")[1] == 0.0


def test_passes_check_env(gsm8k, math_parquet):
    envs.check_env(envs.make("rlvr/MathDataset-v0", path=str(gsm8k), answer_format="gsm8k"))
    envs.check_env(
        envs.make(
            "rlvr/MathDataset-v0",
            path=str(math_parquet),
            question_key="problem",
            answer_key="solution",
            answer_format="boxed",
        )
    )
