"""Accuracy and speed of `verifiers.math` against the `math-verify` package on labelled corpora.

    python benchmarks/math_verifier.py [--corpus FILE ...] [--repeat 3] [--show-errors]

By default these corpora run: `tests/data/math_corpus.jsonl` (built with the verifier: coverage),
`tests/data/math_corpus_heldout.jsonl` (written before the verifier was run on it),
`tests/data/math_near_miss.jsonl` (issue #27's classes: wrong answers that look right, categories
`fp_*`, and right answers in the forms real datasets use, `tp_*`; also written before the verifier
ran on it), `tests/data/math_blind.jsonl` (issue 38's classes, written by someone who had not read
the verifier) and, when present, `tests/data/math_real_smollm2.jsonl` (real completions of a real
small model on MATH-500, labelled by reading). After the per-corpus tables a summary gives, per
corpus and verifier, accuracy, false positives, false negatives and the mean and median time per call.
Each corpus line is {"category", "gold", "response", "expected"}. A verifier is right on a line
when it calls the response correct exactly when the line's reward label is true: `expected`,
except on lines marked `lenient_only` (a right value stated without an answer marker, which an RL
reward does not pay since issue 38: false for every verifier). A false positive is a response called
correct whose label is false (a reward for a wrong answer). A line with `"finish_reason": "length"`
is a completion cut at max_tokens, which rlvr never pays (`envs.rollout`); math-verify, which sees
text only, is given the text. Times are per call,
wall clock, after warm-up (our worker pool started; math-verify's imports done); with --repeat
the corpus is run several times and every call is timed. math-verify gets the gold as `$gold$`
and the response as is, its documented usage; it runs in the main thread (it uses signal.alarm).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

import rlvr.verifiers.math as vm

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
NAMES = ["math_corpus", "math_corpus_heldout", "math_near_miss", "math_blind", "math_real_smollm2"]
DEFAULT_CORPORA = [DATA / f"{name}.jsonl" for name in NAMES if (DATA / f"{name}.jsonl").exists()]


def load(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for i, row in enumerate(rows):
        if not {"category", "gold", "response", "expected"} <= row.keys():
            raise ValueError(f"{path}:{i + 1}: needs category, gold, response, expected")
        row["label"] = bool(row["expected"]) and not row.get("lenient_only", False)
    return rows


def ours(row: dict) -> bool:
    if row.get("finish_reason") == "length":  # cut at max_tokens: never paid, whatever the text says
        return False
    return vm.verify(row["response"], row["gold"]).outcome == "correct"


def math_verify_fn():
    try:
        from math_verify import parse, verify
    except ImportError:
        return None

    def run(row: dict) -> bool:
        try:
            return bool(verify(parse(f"${row['gold']}$"), parse(row["response"])))
        except Exception:  # noqa: BLE001 - a crash counts as "not correct", as in its own metric
            return False

    return run


def measure(fn, rows: list[dict], repeat: int) -> tuple[list[bool], list[float]]:
    verdicts, times = [], []
    for r in range(repeat):
        for row in rows:
            start = time.perf_counter()
            got = fn(row)
            times.append(time.perf_counter() - start)
            if r == 0:
                verdicts.append(got)
    return verdicts, times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(path: Path, systems: dict, repeat: int, show_errors: bool) -> dict[str, tuple]:
    rows = load(path)
    results = {name: measure(fn, rows, repeat) for name, fn in systems.items()}
    names = list(systems)
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_cat[row["category"]].append(i)
    width = max(max(len(c) for c in by_cat) + 2, 18)
    print(f"corpus: {path} ({len(rows)} pairs, {sum(r['label'] for r in rows)} positive)")
    print(f"{'category':<{width}}{'n':>5}" + "".join(f"{n:>17}" for n in names))
    for cat, idx in sorted(by_cat.items()):
        accs = [sum(results[n][0][i] == rows[i]["label"] for i in idx) / len(idx) for n in names]
        print(f"{cat:<{width}}{len(idx):>5}" + "".join(f"{a:>17.3f}" for a in accs))
    line = lambda label, cells: print(f"{label:<{width}}{'':>5}" + "".join(f"{c:>17}" for c in cells))  # noqa: E731
    print()
    line("ALL: accuracy", [f"{summary(*results[n], rows)[0]:.3f}" for n in names])
    line("false positives", [sum(v and not r["label"] for v, r in zip(results[n][0], rows)) for n in names])
    line("false negatives", [sum(r["label"] and not v for v, r in zip(results[n][0], rows)) for n in names])
    line("median (ms)", [f"{pct(results[n][1], 0.5) * 1e3:.2f}" for n in names])
    line("p99 (ms)", [f"{pct(results[n][1], 0.99) * 1e3:.2f}" for n in names])
    line("worst (ms)", [f"{max(results[n][1]) * 1e3:.2f}" for n in names])
    line("mean (ms)", [f"{statistics.fmean(results[n][1]) * 1e3:.2f}" for n in names])
    if show_errors:
        for n in names:
            print(f"\n{n} disagrees with the label on:")
            wrong = [(i, r) for i, (v, r) in enumerate(zip(results[n][0], rows)) if v != r["label"]]
            for i, r in sorted(wrong, key=lambda ir: ir[1]["label"]):  # false positives first
                print(
                    f"  line {i + 1} [{r['category']}] gold={r['gold']!r} label={r['label']} "
                    f"response={r['response'][-80:]!r}"
                )
    print()
    return {n: summary(results[n][0], results[n][1], rows) for n in names}


def summary(verdicts: list[bool], times: list[float], rows: list[dict]) -> tuple:
    """(accuracy, false positives, false negatives, mean ms, median ms) of one verifier on one corpus."""
    return (
        sum(v == r["label"] for v, r in zip(verdicts, rows)) / len(rows),
        sum(v and not r["label"] for v, r in zip(verdicts, rows)),
        sum(r["label"] and not v for v, r in zip(verdicts, rows)),
        statistics.fmean(times) * 1e3,
        pct(times, 0.5) * 1e3,
    )


def print_summary(table: dict[str, dict[str, tuple]]) -> None:
    print("summary (per corpus and verifier)")
    print(f"{'corpus':<28}{'verifier':<20}{'accuracy':>9}{'FP':>5}{'FN':>5}{'mean ms':>9}{'median ms':>11}")
    for corpus, per in table.items():
        for name, (acc, fp, fn, mean, median) in per.items():
            print(f"{corpus:<28}{name:<20}{acc:>9.3f}{fp:>5}{fn:>5}{mean:>9.2f}{median:>11.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--corpus", type=Path, action="append", help="a labelled corpus (repeatable; default: all of tests/data's)"
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--show-errors", action="store_true")
    parser.add_argument("--no-math-verify", action="store_true")
    args = parser.parse_args()
    corpora = args.corpus or DEFAULT_CORPORA

    vm.warm_up()
    systems = {"rlvr.verifiers.math": ours}
    other = None if args.no_math_verify else math_verify_fn()
    if other is not None:
        other(load(corpora[0])[0])  # its first call imports and compiles its grammar
        systems["math-verify"] = other
    table = {path.name: report(path, systems, args.repeat, args.show_errors) for path in corpora}
    print_summary(table)
    vm.shutdown()


if __name__ == "__main__":
    main()
