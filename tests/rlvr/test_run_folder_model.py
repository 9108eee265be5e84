"""A run folder is a model (issue 43, item 2), through the real commands (in this process, tiny model,
HF sampler): `rlvr train` ends naming its checkpoint, and `rlvr eval --model RUN`, `rlvr train --model
RUN` and `--teacher RUN` take the run's last complete checkpoint, named in one line. A run folder with
no complete checkpoint, and a model that is not there, are one line each, the path said once."""

from __future__ import annotations

import json

from rlvr.trainers import checkpoint as ckpt
from tests.conftest import rlvr_here


def test_a_run_folder_is_its_last_checkpoint_everywhere_a_model_is_taken(tmp_path, capsys):
    run = tmp_path / "demo"
    trained = rlvr_here(
        capsys, "train", "--steps", "2", "--tasks-per-step", "2", "--group-size", "2", "--max-tokens", "4",
        "--sampler", "hf", "--warmup-steps", "0", "--no-progress", "--log-every", "0", "--threads", "1",
        "--report-to", "none", "--device", "cpu", "--save-every", "1", "--out", run,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    latest = ckpt.latest_checkpoint(run)
    assert latest.name == "step-00000002"
    assert trained.stdout.strip().splitlines()[-1] == f"model: {latest} (`rlvr eval --model {run}` takes it)"

    evaluated = rlvr_here(
        capsys, "eval", "--model", run, "--sampler", "hf", "--tasks", "2", "--max-tokens", "4", "--no-progress",
        "--out", tmp_path / "eval",
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert evaluated.stdout.splitlines()[0] == f"--model {run}: a training run; its last complete checkpoint, {latest}"
    assert json.loads((tmp_path / "eval" / "summary.json").read_text())["model"] == str(latest.resolve())

    checked = rlvr_here(capsys, "train", "--model", run, "--check", "--out", tmp_path / "warm")
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert json.loads(checked.stdout)["config"]["model"] == str(latest)
    assert f"--model {run}: a training run; its last complete checkpoint, {latest}" in checked.stderr


def test_no_checkpoint_and_no_model_are_one_line_naming_the_path_once(tmp_path, capsys):
    stopped = tmp_path / "stopped"
    (ckpt.checkpoint_dir(stopped) / ".tmp-step-00000001-1").mkdir(parents=True)  # a first save cut short
    result = rlvr_here(capsys, "eval", "--model", stopped, "--tasks", "2", "--out", tmp_path / "e")
    assert result.returncode == 2
    assert result.stderr == (
        f"rlvr eval: error: {stopped} is a training run's folder with no complete checkpoint yet (a run saves "
        "every --save-every steps and at its end): pass a model directory, or train first\n"
    )
    missing = tmp_path / "nothere"
    result = rlvr_here(capsys, "train", "--model", missing, "--steps", "1", "--out", tmp_path / "t")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.count(str(missing)) == 1 and line.startswith(f"rlvr train: error: model '{missing}' is not 'tiny'")
