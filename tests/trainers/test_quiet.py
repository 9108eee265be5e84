"""A run prints its own lines only: no library warnings or loading bars on stderr unless
--verbose (with either sampler: the first run's vLLM, the resumed run's Hugging Face); --no-progress
keeps a metrics line every N steps; a resumed run still reports held-out accuracy before -> after;
the reward plot's legend stays off the curves."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import train_device

RLVR = [sys.executable, "-m", "rlvr"]
# on the device the suite follows: the CUDA path must be as quiet as the CPU's; 1 thread (2 on 2 busy
# cores measured 10-19 s a step instead of 0.3)
SHORT = ["--tasks-per-step", "2", "--group-size", "2", "--eval-tasks", "4", "--device", train_device()]
SHORT += ["--threads", "1"]
# What `rlvr train` may print on stderr: its header and the held-out split, the progress bar,
# evaluation lines, a metrics line (--no-progress), the context warning and the warm-up warning of
# a run shorter than its warm-up.
ALLOWED = re.compile(
    r"(training .* -> .*|held out: .*|train: .*|step \d+: held-out accuracy .*|step \d+/\d+ \| .*"
    r"|resuming from .*|warning: .* did not fit in the context.*|warning: --warmup-steps \d+ is longer than the run.*)"
)


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VLLM_LOGGING_LEVEL", "TORCH_CPP_LOG_LEVEL", "TRANSFORMERS_VERBOSITY", "PYTHONWARNINGS")
    }
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    p = subprocess.run([*RLVR, *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    return p


def stray_lines(stderr: str) -> list[str]:
    lines = [s.strip() for line in stderr.splitlines() for s in line.split("\r")]
    return [s for s in lines if s and not ALLOWED.fullmatch(s)]


def test_train_is_quiet_resumes_with_before_after_and_logs_without_progress(tmp_path):
    out = tmp_path / "run"
    first = run("train", "--steps", "2", *SHORT, "--out", str(out), cwd=tmp_path)
    assert stray_lines(first.stderr) == []
    assert "train:" in first.stderr and "step 0: held-out accuracy" in first.stderr
    before = json.loads((out / "eval.jsonl").read_text().splitlines()[0])["accuracy"]
    assert f"{before:.3f} -> " in first.stdout

    resumed = run(  # the HF sampler's quiet too, and it spares this run vLLM's import and engine (about 10 s)
        "train",
        "--steps",
        "3",
        *SHORT,
        "--sampler",
        "hf",
        "--out",
        str(out),
        "--resume",
        "--no-progress",
        "--log-every",
        "1",
        cwd=tmp_path,
    )
    assert stray_lines(resumed.stderr) == [] and "train:" not in resumed.stderr
    assert re.search(r"^step 3/3 \| reward ", resumed.stderr, re.M)
    *_, held_out, model = resumed.stdout.strip().splitlines()
    assert re.fullmatch(rf"held-out accuracy on 4 tasks: {before:.3f} -> \d\.\d{{3}} \([+-]\d+\.\d points\)", held_out)
    assert model.startswith(f"model: {out}/checkpoints/step-") and f"rlvr eval --model {out}" in model
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(f"truncated_{r}_rate" in m for m in metrics for r in ("turns", "context", "length"))


def test_no_progress_prints_every_n_steps(tmp_path, capsys):
    from rlvr.trainers.metrics import MetricsLogger

    logger = MetricsLogger(tmp_path, total_steps=25, progress=False, log_every=10)
    for step in range(1, 26):
        logger.log(step, {"reward_mean": 0.5, "pass_rate": 0.25})
    logger.close()
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"step {s}/25 | reward 0.500 | pass 0.25" for s in (10, 20, 25)]


def test_quiet_configure_sets_what_libraries_read_and_verbose_undoes_it(monkeypatch):
    from rlvr.trainers import quiet

    for key in quiet.QUIET_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(quiet, "_ours", {})
    quiet.configure(False)
    assert os.environ["VLLM_LOGGING_LEVEL"] == "ERROR" and os.environ["TORCH_CPP_LOG_LEVEL"] == "ERROR"
    quiet.configure(True)
    assert "TORCH_CPP_LOG_LEVEL" not in os.environ and os.environ["VLLM_LOGGING_LEVEL"] == "INFO"
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "DEBUG")  # the user's own setting wins
    quiet.configure(False)
    assert os.environ["VLLM_LOGGING_LEVEL"] == "DEBUG"


def test_reward_plot_legend_is_outside_the_axes(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlvr.trainers.metrics import plot_reward

    history = [{"step": s, "reward_mean": 0.3 + 0.004 * s, "reward_std": 0.3, "episodes": 8} for s in range(1, 101)]
    evals = [{"step": 0, "accuracy": 0.3}, {"step": 100, "accuracy": 0.7}]
    captured = {}
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: captured.setdefault("fig", fig))  # keep it to measure
    assert plot_reward(history, evals, tmp_path / "reward.png").is_file()
    fig = captured["fig"]
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    legend = fig.legends[0] if fig.legends else ax.get_legend()
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    real_close(fig)
