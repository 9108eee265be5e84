"""`rlvr eval --resume` (the default, spelled as for `rlvr train`) and a finished evaluation that
prints its saved table at once, through the real CLI on the tiny model (issue 32)."""

from __future__ import annotations

import json

from rlvr.cli import main
from tests.rlvr import test_eval


def eval_args(model_dir, out, *extra):
    """test_eval's arguments, on the HF sampler, 2 tasks of 4 tokens (later flags win)."""
    return test_eval.eval_args(model_dir, out, "--sampler", "hf", "--tasks", "2", "--max-tokens", "4", *extra)


def table_of(printed: str) -> list[str]:
    """The table's lines: from the `env` row to the `tokens/s` row."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("env "))
    stop = next(i for i, line in enumerate(lines) if line.startswith("tokens/s"))
    return lines[start : stop + 1]


def test_a_finished_eval_prints_its_saved_table_without_a_model(model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    # --resume on an --out that holds no run starts fresh, as rlvr train --resume does
    assert main(eval_args(model_dir, out, "--resume")) == 0
    first = capsys.readouterr().out
    assert "no model loaded" not in first and "tokens/s" in table_of(first)[-1]
    saved = (out / "summary.json").read_text()
    log = (out / "episodes.jsonl").read_text()

    # Rerun, with or without --resume: the same table (the sampling run's speed included), from the saved
    # summary; the model and the sampler never built (the line says so, and nothing is rewritten).
    for extra in ([], ["--resume"]):
        assert main(eval_args(model_dir, out, *extra)) == 0
        again = capsys.readouterr().out
        assert f"this evaluation is complete: its saved result ({out}/summary.json), no model loaded" in again
        assert table_of(again) == table_of(first)
        assert (out / "summary.json").read_text() == saved and (out / "episodes.jsonl").read_text() == log

    # Another --k with the same samples: every task is there, so its summary is computed without a model.
    assert main(eval_args(model_dir, out, "--k", "2", "--samples", "2")) == 0
    other = capsys.readouterr().out
    assert "every task is in" in other and "no model loaded" in other
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["pass_at_k"]) == {"2"} and summary["tokens_per_second"] is None
    assert summary["pass_at_k"]["2"] == json.loads(saved)["pass_at_k"]["2"]

    # --no-resume asks for a fresh run: an --out holding one is refused in one line, nothing touched.
    assert main(eval_args(model_dir, out, "--no-resume")) == 2
    assert "already holds an evaluation: drop --no-resume" in capsys.readouterr().err
    assert (out / "episodes.jsonl").read_text() == log
