"""`dataset=` for rlvr/MathDataset-v0 and rlvr/CodeDataset-v0 (envs/tasks/dataset_sources.py): real `datasets` loading
of local data (a JSON file through the `json` builder, a local folder in the hub's layout, `Dataset.from_dict`),
offline so that nothing reaches the network, and the one-line errors."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from rlvr import envs
from rlvr.cli import main
from rlvr.envs.tasks.code_dataset import CodeDatasetEnv
from rlvr.envs.tasks.dataset_sources import DatasetSourceError
from rlvr.envs.tasks.math_dataset import DatasetError, MathDatasetEnv
from tests.conftest import require
from tests.envs.tasks.test_code_dataset import MBPP
from tests.test_readme_commands import readme_command

ROOT = Path(__file__).resolve().parents[3]
try:
    import datasets
    import huggingface_hub.constants
except ImportError:  # the suite still collects; each test then skips (fails under CI)
    datasets = None

GSM8K_TEST = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "Half of 1,000 is?", "answer": "1000 / 2 = 500\n#### 500"},
]
GSM8K_TRAIN = [{"question": "What is 2 + 2?", "answer": "2 + 2 = 4\n#### 4"}]
# The hub's own layout of openai/gsm8k: a README whose YAML names the configs and their split files.
HUB_README = """---
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train-*
  - split: test
    path: main/test-*
---
"""


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    """No network and a throwaway cache, for this process (the flags `datasets` and the hub client read at
    call time) and for the commands it starts (the environment variables)."""
    require(datasets is not None, "the `datasets` package is not installed")
    cache = tmp_path / "hf"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(cache))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache / "datasets")


def hub_folder(root: Path) -> Path:
    """`openai/gsm8k` under `root`, laid out as on the hub (Parquet split files under main/)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = root / "openai" / "gsm8k"
    (folder / "main").mkdir(parents=True)
    (folder / "README.md").write_text(HUB_README)
    pq.write_table(pa.Table.from_pylist(GSM8K_TEST), folder / "main" / "test-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist(GSM8K_TRAIN), folder / "main" / "train-00000-of-00001.parquet")
    return folder


def test_a_name_with_config_and_split_loads_through_datasets(tmp_path):
    folder = hub_folder(tmp_path)
    env = envs.make(
        "rlvr/MathDataset-v0", dataset=str(folder), config="main", split="test", answer_format="gsm8k"
    ).unwrapped
    assert env.problems == [(GSM8K_TEST[0]["question"], "7"), (GSM8K_TEST[1]["question"], "500")]
    obs, info = env.reset(options={"task_id": "1"})
    assert info["task_id"] == "1" and obs[0]["content"].startswith("Half of 1,000 is?")
    assert env.verify(env.task, "So \\boxed{500}").score == 1.0
    assert env.verify(env.task, env.task.wrong).score == 0.0
    train = MathDatasetEnv(dataset=str(folder), config="main", split="train", answer_format="gsm8k", limit=1)
    assert train.problems == [(GSM8K_TRAIN[0]["question"], "4")]


def test_json_data_files_read_as_the_same_file_through_path(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in GSM8K_TEST))
    ds = datasets.load_dataset("json", data_files=str(path), split="train")
    through_datasets = MathDatasetEnv(dataset=ds, answer_format="gsm8k")
    assert through_datasets.problems == MathDatasetEnv(path=str(path), answer_format="gsm8k").problems


def test_a_dataset_object_and_a_dataset_dict(tmp_path):
    ds = datasets.Dataset.from_dict(
        {"problem": ["Solve $2x=6$.", "1+1?"], "solution": ["$x=\\boxed{3}$", "\\boxed{2}"]}
    )
    # as README.md shows it
    env = envs.make(
        "rlvr/MathDataset-v0", dataset=ds, question_key="problem", answer_key="solution", answer_format="boxed"
    )
    env = env.unwrapped
    assert env.problems == [("Solve $2x=6$.", "3"), ("1+1?", "2")]
    assert env.get_task("0").reference == "\\boxed{3}"
    both = datasets.DatasetDict({"train": ds.select([1]), "test": ds.select([0])})
    picked = MathDatasetEnv(dataset=both, split="test", question_key="problem", answer_key="solution")
    assert [q for q, _ in picked.problems] == ["Solve $2x=6$."]
    with pytest.raises(DatasetSourceError, match=r"has splits \['train', 'test'\]: pass split="):
        MathDatasetEnv(dataset=both, question_key="problem", answer_key="solution")


def test_code_records_through_datasets_equal_the_jsonl_file(tmp_path):
    second = {**MBPP, "task_id": 902, "text": "Return the sum of a list.", "code": "def total(xs):\n    return sum(xs)"}
    second |= {"test_list": ["assert total([1, 2]) == 3"], "challenge_test_list": []}
    path = tmp_path / "mbpp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (MBPP, second)))
    from_file = CodeDatasetEnv(path=str(path), challenge_tests=True)
    ds = datasets.load_dataset("json", data_files=str(path), split="train")
    from_json = CodeDatasetEnv(dataset=ds, challenge_tests=True)
    from_dict = CodeDatasetEnv(dataset=datasets.Dataset.from_list([MBPP, second]), challenge_tests=True)
    assert [from_json.get_task(i) for i in ("901", "902")] == [from_file.get_task(i) for i in ("901", "902")]
    assert from_dict.get_task("901") == from_file.get_task("901")
    assert len(from_file.get_task("901").answer) == 3  # two tests and the challenge one


def test_errors_are_one_typed_line_naming_what_exists(tmp_path):
    folder = str(hub_folder(tmp_path))
    cases = [
        (
            dict(dataset=folder, config="main", split="validation"),
            r"no split 'validation'; splits are \['train', 'test'\]",
        ),
        (
            dict(dataset=folder, config="main", split="test", question_key="problem"),
            r"no column\(s\) \['problem'\]; "
            r"columns are \['question', 'answer'\]",
        ),
        (
            dict(dataset=folder, config="socratic", split="test"),
            r"cannot be loaded: ValueError: BuilderConfig 'socratic'",
        ),
        (dict(dataset="nobody/no-such-dataset", split="test"), r"'nobody/no-such-dataset' cannot be loaded: .*Offline"),
        (
            dict(dataset=datasets.Dataset.from_dict({"question": ["q"], "answer": ["1"]}), split="test"),
            "one split already",
        ),
        (dict(dataset=3), "must be a name, a datasets.Dataset or a datasets.DatasetDict, got int"),
    ]
    for kwargs, match in cases:
        with pytest.raises(DatasetSourceError, match=match) as caught:
            MathDatasetEnv(**kwargs)
        assert "\n" not in str(caught.value) and isinstance(caught.value, envs.EnvError)
    with pytest.raises(DatasetError, match="exactly one of path="):
        MathDatasetEnv(path=folder, dataset=folder)
    with pytest.raises(DatasetSourceError, match=r"no split 'dev'; splits are \['train', 'test'\]"):
        CodeDatasetEnv(dataset=folder, config="main", split="dev")


def test_check_env_reports_a_name_that_cannot_be_loaded_in_one_line(capsys):
    argv = ["check-env", "rlvr/MathDataset-v0", "--env-arg", "dataset=nobody/missing", "--env-arg", "split=test"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("rlvr check-env: error: dataset 'nobody/missing' cannot be loaded")


def test_readme_check_env_with_a_dataset_name(tmp_path):
    """The README's command as written, offline: `load_dataset` takes a local folder of that name before the hub, so
    it runs from a folder holding openai/gsm8k in the hub's layout (the download itself is not run)."""
    command = readme_command("check-env rlvr/MathDataset-v0", "dataset=")
    hub_folder(tmp_path)
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    done = subprocess.run(
        shlex.split(command), cwd=tmp_path, capture_output=True, text=True, timeout=300, env=dict(os.environ)
    )
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert re.search(r"rlvr/MathDataset-v0: (\d+)/\1 checks passed", done.stdout), done.stdout


def test_datasets_is_imported_only_inside_functions():
    """`datasets` costs seconds to import and is optional: no module of rlvr.envs imports it at its top level (torch:
    tests/test_import_graph.py)."""
    for module in sorted((ROOT / "envs").glob("*.py")):
        stack = list(ast.parse(module.read_text()).body)
        while stack:  # every statement run at import (a `try:` or `if` block too), not the bodies of functions
            node = stack.pop()
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stack += [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt | ast.excepthandler)]
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.split(".")[0] == "datasets"], f"{module.name} imports datasets at the top"
