"""The default model on every built-in environment: pass@1, pass@8 and how many episodes the
context cut, each measured by `rlvr eval` exactly as a user runs it (vLLM, the real verifiers and
sandbox), on the held-out task seeds.

    .venv/bin/python benchmarks/tiny_envs.py                   # every built-in env, the table
    .venv/bin/python benchmarks/tiny_envs.py --model DIR --tasks 20 --only rlvr/GuessNumber-v0

The two dataset envs need a file: `rlvr/CodeDataset-v0` reads rlvr's own task file (the tasks of
`rlvr/Code-v0`, in rlvr's JSONL shape), `rlvr/MathDataset-v0` a JSONL written here from
held-out `rlvr/Arithmetic-v0` questions (a stand-in for a user's GSM8K-shaped file: the tiny
model cannot solve GSM8K). Code envs get 128 tokens a turn: a function does not fit in the
default 32. A code env lists its 35 tasks, and `rlvr eval` visits each once (before issue 39 a
seed drew one at random: 140 seeds reached about 34 of them); the table counts distinct tasks.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CODE_TASKS = 35  # every task of the code envs, each once (they list their tasks: rlvr.envs.eval_tasks)


@dataclass(frozen=True)
class EnvCase:
    env: str
    max_tokens: int = 32
    tasks: int | None = None  # None: --tasks
    env_args: dict[str, str] = field(default_factory=dict)


def cases(data_dir: Path) -> list[EnvCase]:
    return [
        EnvCase("rlvr/Arithmetic-v0"),
        EnvCase("rlvr/SymbolicMath-v0", max_tokens=64),
        EnvCase("rlvr/MathDataset-v0", env_args={"path": str(data_dir / "arithmetic_questions.jsonl")}),
        EnvCase("rlvr/ReasoningGym-v0"),
        EnvCase("rlvr/GuessNumber-v0"),
        EnvCase("rlvr/Code-v0", max_tokens=128, tasks=CODE_TASKS),
        EnvCase(
            "rlvr/CodeDataset-v0",
            max_tokens=128,
            tasks=CODE_TASKS,
            env_args={"path": str(files("rlvr.envs") / "data" / "code_tasks.jsonl")},
        ),
        EnvCase("rlvr/CodeFeedback-v0", max_tokens=128, tasks=CODE_TASKS),
        EnvCase("rlvr/PythonTool-v0", max_tokens=128),
    ]


def write_math_file(path: Path, n: int) -> None:
    """MathDataset-v0's input: held-out arithmetic questions as {"question", "answer"} rows."""
    from rlvr.envs.tasks.arithmetic import ArithmeticEnv

    env = ArithmeticEnv(difficulty=2)
    with path.open("w") as f:
        for seed in range(2_000_000, 2_000_000 + n):
            task = env.make_task(seed)
            question = task.prompt[0]["content"].split(" Give the final answer")[0]
            f.write(json.dumps({"question": question, "answer": task.answer}) + "\n")


def evaluate(case: EnvCase, model: str, tasks: int, out: Path, timeout_s: float) -> dict:
    command = [
        sys.executable,
        "-m",
        "rlvr",
        "eval",
        "--env",
        case.env,
        "--model",
        model,
        "--k",
        "1,8",
        "--tasks",
        str(case.tasks or tasks),
        "--max-tokens",
        str(case.max_tokens),
        "--out",
        str(out),
        "--no-progress",
    ]
    for key, value in case.env_args.items():
        command += ["--env-arg", f"{key}={value}"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"{case.env}: rlvr eval exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return json.loads((out / "summary.json").read_text())


def row(case: EnvCase, summary: dict, episodes: Path) -> dict:
    passes = summary["pass_at_k"]
    distinct = {json.loads(line)["task_id"] for line in episodes.read_text().splitlines()}
    return {
        "env": case.env,
        "tasks": summary["tasks"],
        "distinct_tasks": len(distinct),
        "episodes": summary["episodes"],
        "max_tokens": case.max_tokens,
        "pass@1": passes["1"]["estimate"],
        "pass@8": passes["8"]["estimate"],
        "cut_by_context": summary["truncation"]["context"] / max(1, summary["valid_episodes"]),
        "errors": summary["episodes"] - summary["valid_episodes"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--tasks", type=int, default=50, help=f"tasks per env (the code envs: all {CODE_TASKS})")
    parser.add_argument("--only", action="append", help="env id to run (repeatable; default: all)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per env")
    args = parser.parse_args(argv)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        write_math_file(data / "arithmetic_questions.jsonl", args.tasks)
        for case in cases(data):
            if args.only and case.env not in args.only:
                continue
            out = data / case.env.replace("/", "_")
            rows.append(row(case, evaluate(case, args.model, args.tasks, out, args.timeout), out / "episodes.jsonl"))
            r = rows[-1]
            print(
                f"{r['env']:<22} pass@1 {r['pass@1']:.3f}  pass@8 {r['pass@8']:.3f}  "
                f"cut by context {r['cut_by_context']:.1%}",
                file=sys.stderr,
                flush=True,
            )
    print(
        "| env | tasks x 8 | distinct | tokens/turn | pass@1 | pass@8 | cut by context | errors |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    for r in rows:
        print(
            f"| `{r['env']}` | {r['tasks']} | {r['distinct_tasks']} | {r['max_tokens']} | "
            f"{r['pass@1']:.3f} | {r['pass@8']:.3f} | "
            f"{r['cut_by_context']:.1%} | {r['errors']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
