"""The setup scripts on a fresh machine: the Docker check looks for the engine, not the client;
and two clones on one machine each run their own code, while sharing the cached packages."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def plan(path: str) -> list[str]:
    """The Debian packages `ensure_docker.sh --plan` would install with this PATH."""
    done = subprocess.run(
        ["/bin/bash", str(ROOT / "scripts/ensure_docker.sh"), "--plan"],
        env={"PATH": path},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.split()


def test_a_docker_client_without_an_engine_installs_the_engine(tmp_path):
    client = shutil.which("docker")
    if client is None:
        pytest.skip("no docker client on this machine to build the client-only PATH from")
    (tmp_path / "docker").symlink_to(client)  # the fresh machine's state: a client, no dockerd
    assert "docker.io" in plan(str(tmp_path))


def test_with_the_engine_installed_nothing_more_is_planned():
    # setup.sh (which the test command runs first) has installed docker.io and debootstrap
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    if shutil.which("dockerd", path=path) is None:
        pytest.skip("the Docker engine is not installed here (bash scripts/setup.sh installs it)")
    assert plan(path) == []


def copy_clone(dest: Path) -> Path:
    """This checkout's tracked files, as they are in the working tree: a second clone."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.mark.timeout(300)
def test_two_clones_each_run_their_own_code(tmp_path):
    clones = [copy_clone(tmp_path / name) for name in ("a", "b")]
    for clone in clones:  # b sets up last: under the old shared venv, a would then run b's code
        subprocess.run(
            ["bash", "scripts/setup.sh", "--no-docker"], cwd=clone, check=True, capture_output=True, timeout=280
        )
    for clone in clones:
        python = clone / ".venv/bin/python"
        where = subprocess.run(
            [
                str(python),
                "-c",
                "import rlvr.envs, rlvr.trainers; print(rlvr.envs.__file__, rlvr.trainers.__file__, rlvr.__file__)",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert all(Path(w).is_relative_to(clone) for w in where), where
        # the console script runs this clone's code too
        shown = subprocess.run(
            [str(clone / ".venv/bin/rlvr"), "envs"], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert shown.returncode == 0 and "rlvr/Arithmetic-v0" in shown.stdout, shown.stderr[-500:]
