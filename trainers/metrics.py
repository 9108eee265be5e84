"""Where a run's numbers go: `metrics.jsonl` (one line per step), `eval.jsonl` (held-out
evaluations), `samples.jsonl` (sample completions every `sample_every` steps, `trainers.samples`),
the trackers of `--report-to` (TensorBoard events by default; `trainers.trackers.opening`), `reward.png`
(the reward curve) and a live progress line.

Each JSONL line is written whole, with its newline, in one call, so a crash leaves at most a torn
last line, which the readers skip. A resumed run (`start_step` > 0) first drops the lines of the
steps after its checkpoint, which it redoes: each step is in each file once."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.trainers.samples import COLUMNS, Sample, console_lines

# The progress line shows these, in this order, when present. `kl` is k3's mean (>= 0, whatever the
# loss uses: trainers.phases); `gap mean` is what the weight-sync bound is on (trainers.weight_sync:
# the mean over the current version's tokens), never the max, which stale tokens and outliers inflate.
PROGRESS_KEYS = (
    ("reward", "reward_mean", "{:.3f}"),
    ("pass", "pass_rate", "{:.2f}"),
    ("kl", "kl", "{:.4f}"),
    ("ent", "entropy", "{:.3f}"),
    ("clip", "clip_frac", "{:.3f}"),
    ("gnorm", "grad_norm", "{:.2f}"),
    ("len", "response_length", "{:.1f}"),
    ("gap mean", "sync_gap_mean", "{:.1e}"),
    ("tok/s", "tokens_per_second", "{:.0f}"),
    ("mfu", "mfu", "{:.1%}"),  # CUDA only (trainers.flops)
    ("eval", "eval_accuracy", "{:.3f}"),
)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Records of a JSONL file; a last line cut short by a crash is ignored."""
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def update_counts(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """What the steps of `records` (metrics.jsonl, a resumed run's earlier steps included) did to the
    weights: `optimizer_steps` taken in all, and `skipped_steps`, the steps that took none (no reward
    variance, or only errors: `trainers.zero_signal`, `trainers.outage`)."""
    return {
        "optimizer_steps": sum(int(r.get("optimizer_steps", 0)) for r in records),
        "skipped_steps": sum(1 for r in records if r.get("skipped")),
    }


def _keep_until(path: Path, step: int) -> None:
    """After a resume from checkpoint `step`, forget the records of steps that will be redone."""
    kept = [r for r in read_jsonl(path) if r.get("step", 0) <= step]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
    tmp.replace(path)


def _numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The plain numbers of a record (what a tracker plots): no flags, texts or lists."""
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def progress_line(metrics: Mapping[str, Any]) -> str:
    parts = []
    for label, key, fmt in PROGRESS_KEYS:
        value = metrics.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            parts.append(f"{label} {fmt.format(value)}")
    return " | ".join(parts)


class MetricsLogger:
    """Writes every step's metrics to JSONL and TensorBoard and shows the progress bar.
    `start_step` > 0 (a resume) drops records of later steps, which the run will redo. Without
    the bar (`progress=False`), a plain metrics line goes to stderr every `log_every` steps (and
    at the last step); 0: none. `report_to` names the trackers (`trainers.trackers.opening`), given
    `config` once."""

    def __init__(
        self,
        out_dir: str | Path,
        total_steps: int,
        start_step: int = 0,
        progress: bool = True,
        log_every: int = 0,
        report_to: str = "tensorboard",
        config: Mapping[str, Any] | None = None,
        verbose: bool = False,
    ):
        from tqdm.auto import tqdm

        from rlvr.trainers.trackers.opening import open_trackers

        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.out_dir / "metrics.jsonl"
        self.eval_path = self.out_dir / "eval.jsonl"
        self.samples_path = self.out_dir / "samples.jsonl"
        for path in (self.metrics_path, self.eval_path, self.samples_path):
            if start_step > 0:
                _keep_until(path, start_step)
            else:
                path.write_text("")
        self.trackers = open_trackers(report_to, self.out_dir, start_step, verbose)
        if config is not None:
            for tracker in self.trackers:
                tracker.log_config(config)
        self.total_steps, self.progress, self.log_every = total_steps, progress, log_every
        self.bar = tqdm(
            total=total_steps,
            initial=start_step,
            desc="train",
            unit="step",
            disable=not progress,
            file=sys.stderr,
            dynamic_ncols=True,
        )

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        record = {"step": step, **metrics}
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        for tracker in self.trackers:
            tracker.log_metrics(step, _numbers(metrics), "train")
        self.bar.set_postfix_str(progress_line(metrics), refresh=False)
        self.bar.update(1)
        if not self.progress and self.log_every > 0 and (step % self.log_every == 0 or step == self.total_steps):
            print(f"step {step}/{self.total_steps} | {progress_line(metrics)}", file=sys.stderr, flush=True)

    def log_eval(self, step: int, results: Mapping[str, Any]) -> None:
        with self.eval_path.open("a") as f:
            f.write(json.dumps({"step": step, **results}) + "\n")
        for tracker in self.trackers:
            tracker.log_metrics(step, _numbers(results), "eval")

    def log_samples(self, step: int, samples: Sequence[Sample], strip: Callable[[str], str] = str) -> None:
        """A step's sample completions (`trainers.samples`): their lines appended to
        `samples.jsonl` in one write, a table to each tracker, and shown on the console (between
        the progress lines); `strip` drops special tokens from the console's text."""
        if not samples:
            return
        with self.samples_path.open("a") as f:
            f.write("".join(json.dumps(s.to_dict(), ensure_ascii=False) + "\n" for s in samples))
        for tracker in self.trackers:
            tracker.log_table(step, "samples", COLUMNS, [s.row() for s in samples])
        for line in console_lines(samples, strip):
            self.write(line)

    def first_eval(self) -> dict[str, Any] | None:
        """The run's evaluation before training (step 0) as logged, e.g. for a resumed run."""
        return next((r for r in read_jsonl(self.eval_path) if r.get("step") == 0), None)

    def write(self, text: str) -> None:
        """Print a line without breaking the progress bar."""
        self.bar.write(text, file=sys.stderr)

    def plot(self) -> Path:
        return plot_reward(read_jsonl(self.metrics_path), read_jsonl(self.eval_path), self.out_dir / "reward.png")

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()
        self.bar.close()


def plot_reward(history: list[dict[str, Any]], evals: list[dict[str, Any]], path: str | Path) -> Path:
    """The reward curve: per-step mean reward with a band of +-1 standard error (the noise of
    that mean over the step's episodes) and its moving average, and the held-out accuracy where
    it was measured."""
    import matplotlib

    matplotlib.use("Agg")  # no display: write files only
    import matplotlib.pyplot as plt

    # The legend goes below the axes (constrained layout makes room), never over the curves.
    fig, ax = plt.subplots(figsize=(7, 4.4), dpi=110, layout="constrained")
    rows = [r for r in history if "reward_mean" in r]
    if rows:
        steps = [r["step"] for r in rows]
        mean = [r["reward_mean"] for r in rows]
        se = [r.get("reward_std", 0.0) / max(1, r.get("episodes", 1)) ** 0.5 for r in rows]
        ax.plot(steps, mean, color="tab:blue", alpha=0.35, lw=1, label="train reward (per step)")
        ax.fill_between(
            steps,
            [m - s for m, s in zip(mean, se)],
            [m + s for m, s in zip(mean, se)],
            color="tab:blue",
            alpha=0.12,
            lw=0,
        )
        window = max(1, len(mean) // 20)
        smooth = [
            sum(mean[max(0, i - window + 1) : i + 1]) / len(mean[max(0, i - window + 1) : i + 1])
            for i in range(len(mean))
        ]
        ax.plot(steps, smooth, color="tab:blue", lw=2, label=f"train reward (mean of {window})")
    points = [e for e in evals if "accuracy" in e]
    if points:
        ax.plot(
            [e["step"] for e in points],
            [e["accuracy"] for e in points],
            "o-",
            color="tab:orange",
            lw=2,
            label="held-out accuracy",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("reward / accuracy")
    ax.grid(alpha=0.3)
    if rows or points:
        fig.legend(loc="outside lower center", ncol=3, frameon=False, fontsize="small")
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
