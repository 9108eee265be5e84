"""Small frictions of issue 43 (items 5 and 7), through the real command line, in this process:
`rlvr --version`, no silent abbreviations (`--step 2` is not `--steps 2`), `--temperature 0` in
training refused with its reason, and a warm-up longer than the run warned about."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest

from tests.conftest import rlvr_here


def test_version_and_no_abbreviations(capsys):
    with pytest.raises(SystemExit) as exit_info:
        rlvr_here(capsys, "--version")
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"rlvr {version('rlvr')}\n"
    for argv in (["train", "--step", "2", "--check"], ["eval", "--task", "2"]):
        with pytest.raises(SystemExit) as exit_info:
            rlvr_here(capsys, *argv)
        assert exit_info.value.code == 2
        assert f"unrecognized arguments: {' '.join(argv[1:3])}" in capsys.readouterr().err


def test_greedy_training_is_refused_with_its_reason_and_a_long_warmup_warned(tmp_path, capsys):
    greedy = rlvr_here(capsys, "train", "--temperature", "0", "--check", "--out", tmp_path / "a")
    assert greedy.returncode == 2
    assert greedy.stderr.startswith("rlvr train: error: temperature must be > 0, got 0.0: training learns from ")
    assert greedy.stderr.rstrip().endswith("(rlvr eval takes 0)")

    short = rlvr_here(capsys, "train", "--steps", "3", "--check", "--out", tmp_path / "b")
    assert short.returncode == 0
    assert short.stderr.splitlines()[0] == (
        "warning: --warmup-steps 30 is longer than the run (--steps 3): the learning rate ends at 3/30 of --lr; "
        "pass --warmup-steps 1 (or 0) for a short run"
    )
    assert json.loads(short.stdout)["config"]["warmup_steps"] == 30  # warned, not changed: the run is as asked
    fitting = rlvr_here(capsys, "train", "--steps", "3", "--warmup-steps", "2", "--check", "--out", tmp_path / "c")
    assert "warning: --warmup-steps" not in fitting.stderr
