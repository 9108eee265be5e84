"""The setup scripts on a fresh machine: the Docker check looks for the engine, not the client;
two clones on one machine each run their own code, while sharing the cached packages; and the pins are one
consistent set: each machine kind's vLLM pins the torch the project pins (scripts/vllm_torch_pins.toml, read from
the releases' metadata), `setup.sh --plan` shows what either kind of machine would install, installing nothing."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "scripts/vllm_torch_pins.toml"
EXTRAS = {"cpu": "vllm-cpu", "gpu": "vllm-gpu"}  # machine kind -> the extra holding its vLLM pin


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


def project_pins(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, Requirement]:
    """torch, transformers (both in the extra `train`) and each machine kind's vLLM, as pyproject.toml pins them
    (read here on its own, not through scripts/pins.py, which is what is checked)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    train = {Requirement(d).name: Requirement(d) for d in project["optional-dependencies"]["train"]}
    pins = {"torch": train["torch"], "transformers": train["transformers"]}  # the `train` extra: the core has no torch
    for kind, extra in EXTRAS.items():
        (pins[kind],) = [Requirement(r) for r in project["optional-dependencies"][extra]]
    return pins


def exact(req: Requirement) -> str:
    (spec,) = req.specifier
    assert spec.operator == "==", req
    return spec.version


def table_row(name: str, version: str) -> dict:
    rows = [r for r in tomllib.loads(TABLE.read_text())["release"] if (r["name"], r["version"]) == (name, version)]
    assert len(rows) == 1, f"{name}=={version}: {len(rows)} rows in {TABLE.name} (read its metadata, add one)"
    return rows[0]


def setup(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`bash scripts/setup.sh ARGS` as a user runs it, its colour codes taken out of stdout."""
    done = subprocess.run(["bash", "scripts/setup.sh", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    done.stdout = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)
    return done


def has_gpu() -> bool:
    """setup.sh's own test: nvidia-smi is there and answers."""
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi"], capture_output=True).returncode == 0


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_each_kinds_vllm_pins_the_projects_torch_and_fits_its_transformers(kind):
    pins = project_pins()
    row = table_row(pins[kind].name, exact(pins[kind]))
    # vllm-cpu pins the CPU build (2.13.0+cpu): the same torch release as the project's 2.13.0
    assert Version(row["torch"]).public == exact(pins["torch"]), (row, pins["torch"])
    assert exact(pins["transformers"]) in SpecifierSet(row["transformers"]), (row, pins["transformers"])


def has_dist(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_the_installed_vllm_is_the_pinned_one_and_agrees_with_the_table():
    installed = [name for name in ("vllm-cpu", "vllm") if has_dist(name)]
    if not installed:
        pytest.skip("no vllm or vllm-cpu installed here (bash scripts/setup.sh installs one)")
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        pytest.skip("the table holds the releases' linux x86_64 requirements")
    (name,) = installed
    dist = importlib.metadata.distribution(name)
    pinned = project_pins()["cpu" if name == "vllm-cpu" else "gpu"]
    assert dist.version == exact(pinned), f"installed {name} {dist.version}, pinned {pinned}"
    row = table_row(name, dist.version)
    # its own metadata, markers evaluated on this machine, says what the table says
    reqs = {r.name: r for r in map(Requirement, dist.requires or []) if r.marker is None or r.marker.evaluate()}
    assert reqs["torch"].specifier == SpecifierSet(f"=={row['torch']}"), (reqs["torch"], row)
    assert reqs["transformers"].specifier == SpecifierSet(row["transformers"]), (reqs["transformers"], row)
    # and the torch beside it is that torch
    assert importlib.metadata.version("torch") in SpecifierSet(f"=={row['torch']}")


def planned_base(stdout: str) -> Path:
    (base,) = re.findall(r"^\[setup\] cached environment (\S+)", stdout, flags=re.M)
    return Path(base)


def test_the_plan_shows_this_machines_install_and_the_other_kinds_and_installs_nothing():
    kind = "gpu" if has_gpu() else "cpu"
    other = "cpu" if kind == "gpu" else "gpu"
    pins = project_pins()
    before = sorted(p.name for p in (Path.home() / ".cache/rlvr").glob("venv-*"))
    done = setup("--plan")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "plan only: nothing is installed (" + ("GPU found" if kind == "gpu" else "no GPU") in out, out
    assert f"this machine ({kind}): {pins['torch']} and {pins[kind]}" in out, out
    here, there = out.split(f"on a {other.upper()} machine (bash scripts/setup.sh --plan --{other})")
    for section, k in ((here, kind), (there, other)):
        if f"cached environment {planned_base(out)} is complete" in section:
            continue  # this machine's environment is built: nothing to install in it
        # torch first and pinned, then this kind's vLLM, which pins that torch
        torch_at = section.index(f"pip install -q {pins['torch']}")
        assert section.index(f"pip install -q {pins[k]}") > torch_at, section
        assert f"requires torch=={table_row(pins[k].name, exact(pins[k]))['torch']}" in section, section
        assert ("uninstall -q -y torchvision" in section) == (k == "cpu"), section  # vllm-cpu's CUDA extras out
    assert "Docker: apt-get install" in here
    # it installed nothing: no new cached environment, and the planned one is still as it was
    assert sorted(p.name for p in (Path.home() / ".cache/rlvr").glob("venv-*")) == before


def test_the_cached_environment_gets_the_core_and_every_extra_but_the_other_vllm_and_trackio():
    """`pip install rlvr` is the light core (issue 42); setup installs everything as before: the core with every
    extra, except the vLLM extras (their pins go in on their own, torch first), trackio (it would move pillow),
    wandb (dev holds it) and serve, which goes in on its own: openenv-core without its dependencies (they hold gradio,
    which would move pillow as trackio would), then the rest of the extra."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras["wandb"]) <= set(extras["dev"])
    done = setup("--plan", "--cpu", "--no-docker")
    assert done.returncode == 0, done.stderr
    installs = re.findall(r"pip install -q \.\[([^\]]*)\]$", done.stdout, flags=re.M)
    assert len(installs) in (1, 2), done.stdout  # this machine's environment (unless built) and the other kind's
    for line in installs:
        assert set(line.split(",")) == set(extras) - {"vllm-cpu", "vllm-gpu", "trackio", "wandb", "serve"}, line
    assert {"train", "reasoning-gym", "datasets", "dev", "ray", "agent"} <= set(installs[0].split(","))
    (openenv,) = [r for r in extras["serve"] if r.startswith("openenv-core==")]
    rest = " ".join(r for r in extras["serve"] if r != openenv)
    assert len(re.findall(rf"pip install -q --no-deps {re.escape(openenv)}$", done.stdout, flags=re.M)) == len(installs)
    assert len(re.findall(rf"pip install -q {re.escape(rest)}$", done.stdout, flags=re.M)) == len(installs)


def installed_versions() -> dict[str, str]:
    """Every distribution the environment's python sees at start, by normalized name. Asked of a fresh interpreter:
    in this one, an earlier test's import may have put a vendored copy on sys.path (setuptools' _vendor holds a
    tomli 2.0.1 that would pass for the environment's)."""
    script = (
        "import importlib.metadata as m, json\n"
        "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version for d in m.distributions()}))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_the_serve_extra_is_complete_but_for_openenvs_web_ui_and_cli_and_keeps_pillow():
    """Where setup has run: openenv-core is installed at the extra's pin, and of its own requirements only gradio (its
    web UI, which rlvr never starts) and tomli/tomli-w (its CLI) are missing; pillow is not gradio's <13."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    versions = installed_versions()
    version = lambda name: versions.get(name.lower().replace("_", "-"))  # noqa: E731
    for req in map(Requirement, extras["serve"]):
        if version(req.name) is None:
            pytest.skip(f"{req.name} is not installed here (scripts/setup.sh installs the serve extra)")
        assert version(req.name) in req.specifier, req
    missing = []
    for req in map(Requirement, importlib.metadata.distribution("openenv-core").requires or []):
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            if version(req.name) is None:
                missing.append(req.name)
            else:
                assert version(req.name) in req.specifier, req
    assert sorted(missing) == ["gradio", "tomli", "tomli-w"], missing
    assert int(version("pillow").split(".")[0]) >= 13


@pytest.mark.parametrize("kind", ["gpu", "cpu"])
def test_the_plan_takes_the_kind_it_is_given(kind):
    other = "cpu" if kind == "gpu" else "gpu"
    pins = project_pins()
    done = setup("--plan", f"--{kind}", "--no-docker")
    assert done.returncode == 0, done.stderr
    assert f"({kind} machine: --{kind} given)" in done.stdout
    assert f"this machine ({kind}): {pins['torch']} and {pins[kind]}" in done.stdout
    assert f"on a {other.upper()} machine" in done.stdout and "Docker" not in done.stdout
    assert planned_base(done.stdout).name.endswith(f"-{kind}")  # one cached environment per kind


@pytest.mark.parametrize("answers", [True, False])
def test_the_plan_takes_a_machine_whose_nvidia_smi_answers_for_a_gpu_one(tmp_path, answers):
    # no GPU here: an nvidia-smi that answers as the H100 machine's does, or fails as one without a driver does
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3'\n" if answers else "#!/bin/sh\nexit 9\n")
    smi.chmod(0o755)
    path = f"{tmp_path}:{os.environ['PATH']}"
    done = subprocess.run(
        ["bash", "scripts/setup.sh", "--plan", "--no-docker"],
        cwd=ROOT,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    kind, why = ("gpu", "GPU found: NVIDIA H100 80GB HBM3") if answers else ("cpu", "no GPU: nvidia-smi fails")
    assert f"nothing is installed ({why})" in done.stdout and f"this machine ({kind}): " in done.stdout, done.stdout


def test_an_unknown_option_is_refused_in_one_line():
    done = setup("--plna")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "setup.sh: unknown option '--plna' (known: --no-docker --plan --gpu --cpu)"
    ]


def test_a_vllm_that_would_replace_the_projects_torch_is_refused_before_installing(tmp_path):
    # a user bumps the CUDA vllm to 0.33.0, which pins torch 2.14.0: setup stops, naming both torches
    for name in ("pyproject.toml", "scripts/setup.sh", "scripts/pins.py", "scripts/vllm_torch_pins.toml"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    pyproject = tmp_path / "pyproject.toml"
    gpu = str(project_pins()["gpu"])
    pyproject.write_text(pyproject.read_text().replace(f'"{gpu}"', '"vllm==0.33.0"'))
    assert project_pins(pyproject)["gpu"] == Requirement("vllm==0.33.0")
    done = setup("--plan", cwd=tmp_path)
    assert done.returncode == 1 and "pip install" not in done.stdout, done.stdout
    assert done.stderr.strip().splitlines() == [
        "setup: pins: vllm==0.33.0 (extra vllm-gpu) requires torch==2.14.0, the project pins torch=="
        f"{exact(project_pins()['torch'])}: pick a vllm whose torch is {exact(project_pins()['torch'])} from "
        "vllm_torch_pins.toml, or move both"
    ]
    # a release the table has not read is refused too
    pyproject.write_text(pyproject.read_text().replace('"vllm==0.33.0"', '"vllm==0.29.0"'))
    done = setup("--plan", cwd=tmp_path)
    assert done.returncode == 1 and "vllm==0.29.0 is not in vllm_torch_pins.toml" in done.stderr, done.stderr
