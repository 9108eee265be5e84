"""The Python API (`rlvr.trainers`' exports, `trainers.api`): the names load lazily, so the settings
import no torch; each is documented; `evaluate` gives `rlvr eval`'s numbers for the same settings and
refuses a bad setting before any model loads. The README's example runs the whole API
(tests/test_readme_python.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import rlvr.trainers


def python(code: str) -> str:
    """`code`'s stdout in a fresh interpreter: what an import loads depends on what loaded before."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_the_settings_import_no_torch():
    loaded = python(
        "import sys, rlvr.trainers.config\n"
        "from rlvr.trainers import TrainConfig, SamplerSpec\n"
        "print('torch' in sys.modules, TrainConfig.__module__, SamplerSpec.__module__)"
    )
    assert loaded.split() == ["False", "rlvr.trainers.config", "rlvr.trainers.samplers.protocol"]


def test_every_export_loads_and_is_documented():
    assert rlvr.trainers.__all__ == [
        "EvalResult",
        "SamplerSpec",
        "TrainConfig",
        "Trainer",
        "build_sampler",
        "evaluate",
    ]
    for name in rlvr.trainers.__all__:
        value = getattr(rlvr.trainers, name)
        assert value.__doc__ and value.__doc__.strip(), name
        assert f"`{name}`" in rlvr.trainers.__doc__, f"{name} is not described in the package docstring"
    assert set(rlvr.trainers.__all__) <= set(dir(rlvr.trainers))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        rlvr.trainers.Nope  # noqa: B018 - the lookup is the test


def test_trainer_is_the_loop_trainer():
    from rlvr.trainers import Trainer
    from rlvr.trainers.loop import Trainer as LoopTrainer

    assert issubclass(Trainer, LoopTrainer)


@pytest.mark.parametrize(
    "kwargs",
    [{"tasks": 0}, {"k": [0]}, {"k": [1, 4], "samples": 2}],
    ids=["no tasks", "k 0", "fewer samples than k"],
)
def test_evaluate_refuses_bad_settings_before_loading(kwargs):
    from rlvr.trainers import evaluate

    with pytest.raises(ValueError, match="need tasks >= 1"):
        evaluate("no/such/model", "rlvr/Arithmetic-v0", **kwargs)  # a missing model would fail later


def test_evaluate_gives_rlvr_evals_numbers(tmp_path):
    """The same settings, episode for episode: the same pass@k, reward and outcomes as the command."""
    from rlvr.cli import main
    from rlvr.trainers import EvalResult, evaluate

    settings = ["--tasks", "3", "--k", "1,2", "--max-tokens", "8", "--seed", "5", "--no-progress"]
    assert main(["eval", "--model", "tiny", "--sampler", "hf", *settings, "--out", str(tmp_path)]) == 0
    command = json.loads((tmp_path / "summary.json").read_text())
    result = evaluate("tiny", "rlvr/Arithmetic-v0", tasks=3, k=[1, 2], max_tokens=8, seed=5)
    assert isinstance(result, EvalResult)
    assert len(result.episodes) == 6
    for key in ("pass_at_k", "mean_reward", "outcomes", "truncation", "tasks", "episodes"):
        assert result.summary[key] == command[key], key
    assert result.pass_at_k == {int(k): stat["estimate"] for k, stat in command["pass_at_k"].items()}
    # the sampling that produced the score is named before it: k up to 2 samples twice per task, at 1.0
    assert str(result).splitlines()[3] == "sampling          temperature 1.0, top_p 1.0, up to 8 tokens"
    assert str(result).splitlines()[4].startswith("pass@1")
    lines = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [ep.completion_ids for ep in result.episodes] == [line["completion_ids"] for line in lines]
