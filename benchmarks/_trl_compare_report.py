"""The numbers and the table of `trl_compare.py`: pure functions over the two sides' results.

Speed is judged on each step's wall time minus the time its main thread spent waiting for a CPU
(runnable, not running): on an idle machine the two are the same, and on a busy shared machine
the wait depends on the neighbours, not on the trainer. Raw wall time and CPU time are shown too.

Accuracy is compared task by task: both trained models are evaluated on the same held-out tasks
with the same sampling seeds, so the per-task difference in pass rate is paired, and its 95%
percentile-bootstrap interval over tasks says whether rlvr learned less than TRL beyond noise.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SPEEDUP_TARGET = 2.0  # on the CPU
CUDA_SPEEDUP_TARGET = 1.5  # on a GPU (issue 30): both sides generate with HF, which dominates a step there


def median_after_warmup(seconds: Sequence[float]) -> float:
    """The median step time without the first (warm-up) step."""
    if not seconds:
        raise ValueError("no steps were timed")
    return statistics.median(seconds[1:] if len(seconds) > 1 else seconds)


def step_seconds_without_waits(side: dict[str, Any]) -> list[float]:
    """Each step's wall time less its CPU wait (just the wall time where no wait was recorded)."""
    waits = side.get("step_wait_seconds") or [0.0] * len(side["step_seconds"])
    return [max(0.0, w - q) for w, q in zip(side["step_seconds"], waits)]


def per_task_pass_rates(episodes_jsonl: Path) -> dict[int, float]:
    """Fraction of correct samples per held-out task (group id), `error` episodes left out."""
    by_task: dict[int, list[bool]] = {}
    for line in Path(episodes_jsonl).read_text().splitlines():
        record = json.loads(line)
        if record["outcome"] != "error":
            by_task.setdefault(int(record["group_id"]), []).append(record["outcome"] == "correct")
    return {task: sum(v) / len(v) for task, v in by_task.items()}


def paired_difference(a: dict[int, float], b: dict[int, float], seed: int = 0) -> dict[str, float]:
    """Mean over shared tasks of b - a, with its 95% percentile-bootstrap interval over tasks."""
    from rlvr.envs.evaluate import bootstrap_ci

    tasks = sorted(set(a) & set(b))
    if not tasks:
        raise ValueError("the two evaluations share no task")
    mean, low, high = bootstrap_ci([b[t] - a[t] for t in tasks], seed=seed)
    return {"estimate": mean, "ci_low": low, "ci_high": high, "tasks": len(tasks)}


def on_cuda(trl: dict[str, Any], rlvr: dict[str, Any]) -> bool:
    """Whether both sides trained on a GPU (each side reports its CUDA peak there)."""
    return "cuda_peak_bytes" in trl and "cuda_peak_bytes" in rlvr


def verdicts(trl: dict[str, Any], rlvr: dict[str, Any], accuracy_diff: dict[str, float] | None) -> dict[str, Any]:
    """The three targets: faster per step (wall time less CPU waits) by at least 2x on the CPU,
    1.5x on a GPU; no more peak memory (on a GPU: CUDA memory, the one that limits the model);
    and accuracy not below TRL's beyond noise (the paired interval of rlvr - TRL reaches 0 or
    above)."""
    t, r = (median_after_warmup(step_seconds_without_waits(x)) for x in (trl, rlvr))
    speedup = t / r
    target = CUDA_SPEEDUP_TARGET if on_cuda(trl, rlvr) else SPEEDUP_TARGET
    key = "cuda_peak_bytes" if on_cuda(trl, rlvr) else "peak_rss_bytes"
    memory_ratio = rlvr[key] / trl[key]
    out: dict[str, Any] = {
        "speedup": speedup,
        "speedup_target": target,
        "faster": speedup >= target,
        "memory_ratio": memory_ratio,
        "memory_measure": key,
        "leaner": memory_ratio <= 1.0,
    }
    if accuracy_diff is not None:
        out["learns_as_well"] = accuracy_diff["ci_high"] >= 0.0
    return out


def schedules_match(trl: dict[str, Any], rlvr: dict[str, Any], rel: float = 1e-6) -> bool:
    """Whether both sides used the same learning rate at every step (a check that the settings
    really are the same, read from what each trainer reports)."""
    a, b = trl.get("step_lrs") or [], rlvr.get("step_lrs") or []
    return len(a) == len(b) > 0 and all(abs(x - y) <= rel * max(abs(x), abs(y)) for x, y in zip(a, b))


def _pass(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _acc(e: dict[str, Any]) -> str:
    p = e["pass_at_1"]
    return f"{p['estimate']:.3f} [{p['ci_low']:.3f}, {p['ci_high']:.3f}]"


def _mean(x: Sequence[float]) -> str:
    return f"{sum(x) / len(x):.3f}" if x else "-"


def table(trl: dict[str, Any], rlvr: dict[str, Any], evals: dict[str, Any], accuracy_diff: dict | None) -> str:
    v = verdicts(trl, rlvr, accuracy_diff)
    t_cpu, r_cpu = median_after_warmup(trl["step_cpu_seconds"]), median_after_warmup(rlvr["step_cpu_seconds"])
    wall = [median_after_warmup(x["step_seconds"]) for x in (trl, rlvr)]
    wait = [median_after_warmup(x.get("step_wait_seconds") or [0.0]) for x in (trl, rlvr)]
    net = [median_after_warmup(step_seconds_without_waits(x)) for x in (trl, rlvr)]
    rows = [
        ("", "TRL GRPOTrainer", "rlvr grpo", "rlvr vs TRL", "target"),
        (
            "seconds / step, less CPU waits",
            f"{net[0]:.3f}",
            f"{net[1]:.3f}",
            f"{v['speedup']:.2f}x faster",
            f">= {v['speedup_target']:g}x: {_pass(v['faster'])}",
        ),
        ("seconds / step, wall clock", f"{wall[0]:.3f}", f"{wall[1]:.3f}", f"{wall[0] / wall[1]:.2f}x faster", ""),
        ("  of which waiting for a CPU", f"{wait[0]:.3f}", f"{wait[1]:.3f}", "", ""),
        ("CPU seconds / step", f"{t_cpu:.3f}", f"{r_cpu:.3f}", f"{t_cpu / r_cpu:.2f}x less", ""),
        (
            "peak memory (MiB)",
            f"{trl['peak_rss_bytes'] / 2**20:,.0f}",
            f"{rlvr['peak_rss_bytes'] / 2**20:,.0f}",
            f"{rlvr['peak_rss_bytes'] / trl['peak_rss_bytes']:.2f}x",
            f"<= 1x: {_pass(v['leaner'])}" if v["memory_measure"] == "peak_rss_bytes" else "",
        ),
        *(
            [
                (
                    "peak CUDA memory (MiB)",
                    f"{trl['cuda_peak_bytes'] / 2**20:,.0f}",
                    f"{rlvr['cuda_peak_bytes'] / 2**20:,.0f}",
                    f"{v['memory_ratio']:.2f}x",
                    f"<= 1x: {_pass(v['leaner'])}",
                )
            ]
            if v["memory_measure"] == "cuda_peak_bytes"
            else []
        ),
        ("train reward, first 3 steps", _mean(trl["train_rewards"][:3]), _mean(rlvr["train_rewards"][:3]), "", ""),
        ("train reward, last 3 steps", _mean(trl["train_rewards"][-3:]), _mean(rlvr["train_rewards"][-3:]), "", ""),
    ]
    if evals and accuracy_diff is not None:
        d = accuracy_diff
        rows += [
            ("held-out pass@1, start", _acc(evals["base"]), _acc(evals["base"]), "", ""),
            (
                "held-out pass@1, after",
                _acc(evals["trl"]),
                _acc(evals["rlvr"]),
                f"{100 * d['estimate']:+.1f} [{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}] pts",
                f"not below: {_pass(v['learns_as_well'])}",
            ),
        ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
