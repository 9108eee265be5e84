"""scripts/gpu_check.sh and scripts/gpu_wheels.sh: the plan of the GPU check (its parts and budgets,
within 8 minutes on a machine without vLLM), bad arguments, the wheels it carries at the project's
pins, and a real run of its environment part here."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = ["env", "device", "table", "readme", "trl", "training", "vllm"]


def run(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def test_the_plan_lists_every_part_and_its_budget_without_running_it(tmp_path):
    r = run("scripts/gpu_check.sh", "--plan", env={"OUT": str(tmp_path / "out")})
    assert r.returncode == 0, r.stderr
    rows = [line.split(None, 2) for line in r.stdout.strip().splitlines()]
    assert [row[0] for row in rows] == [*PARTS, "total"]
    budgets = {name: int(seconds.removesuffix("s")) for name, seconds, _ in rows}
    assert sum(budgets[p] for p in PARTS) == budgets["total"]
    assert budgets["total"] - budgets["vllm"] < 8 * 60  # the bare H100 has no vLLM: under 8 minutes
    assert "--sampler hf --device cuda" in r.stdout and not (tmp_path / "out").exists()  # nothing ran


def test_only_selects_parts_and_bad_arguments_are_one_line():
    r = run("scripts/gpu_check.sh", "--plan", "--only", "table", "--only", "trl")
    assert [line.split()[0] for line in r.stdout.strip().splitlines()] == ["table", "trl", "total"]
    for bad in (["--only", "nope"], ["--frobnicate"]):
        r = run("scripts/gpu_check.sh", *bad)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
        assert r.stderr.startswith("gpu_check: error:")


def test_the_carried_wheels_are_at_the_projects_pins():
    r = run("scripts/gpu_wheels.sh", "--plan")
    assert r.returncode == 0, r.stderr
    wheels = dict(line.split("==") for line in r.stdout.split())
    assert {"gymnasium", "docker", "trl", "datasets", "dill", "multiprocess", "xxhash"} <= set(wheels)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = dict(d.split("==") for d in deps if "==" in d)
    for name in set(wheels) & set(pins):
        assert wheels[name] == pins[name], name


def test_the_env_part_runs_here_and_writes_its_summary(tmp_path):
    """The first part for real (on this CPU machine): the environment, and `rlvr.trainers` imported
    from this checkout by the mapping the GPU machine needs (nothing installed there), forced here."""
    env = {"OUT": str(tmp_path), "GPU_CHECK_SITE": str(tmp_path / "site"), "GPU_CHECK_FINDER": "1"}
    r = run("scripts/gpu_check.sh", "--only", "env", env=env, timeout=240)
    log = (tmp_path / "env.log").read_text()
    assert r.returncode == 0, r.stdout + log
    assert re.search(r"torch \S+, CUDA build", log)
    assert f"rlvr imports from {ROOT}/trainers/flops.py (mapped by gpu_check's sitecustomize.py)" in log
    assert re.fullmatch(r"env\s+ok\s+\d+ s of \d+", (tmp_path / "summary.txt").read_text().strip())
