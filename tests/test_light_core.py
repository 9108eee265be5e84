"""The light core (issue 42): `pip install rlvr`, no extra, is the environments, the verifiers and the sandbox,
with no torch; `rlvr[train]` adds training. Built here for real: this repository installed alone (from a copy of
its source, as pip would from the registry) into a fresh virtual environment, which then runs a math and a code
verification (the code through the real Docker sandbox), an rlvr/Arithmetic-v0 episode, and the commands whose
extra is missing, each ending in the one line that names it. The in-process tests below check the same lines where
everything is installed (the suite's own environment), by hiding the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]
# What a distribution of rlvr is built from (pyproject's package-dir, the readme, the licence).
SOURCE = ("pyproject.toml", "README.md", "LICENSE", "rlvr", "envs", "verifiers", "sandbox", "trainers")
TRAIN_LINE = (
    "rlvr {command}: error: rlvr {command} needs the `train` extra (torch is not installed): pip install 'rlvr[train]'"
)


def clean_env() -> dict[str, str]:
    """This process's environment without what would let the new one see another's packages or this tree."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_NO_CACHE_DIR")
    }
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_PROGRESS_BAR": "off"}


@pytest.fixture(scope="module")
def core(tmp_path_factory) -> Path:
    """The bin folder of a fresh virtual environment holding rlvr without extras (pip's cache reused: about 25 s)."""
    work = tmp_path_factory.mktemp("light_core")
    source = work / "source"  # a copy: pip's build writes build/ and *.egg-info beside the sources
    for name in SOURCE:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
    done = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "-q", str(source)],
        cwd=work,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"pip install of the core failed:\n{done.stderr[-3000:]}"
    return venv / "bin"


def run_in(core: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """A program of the core's environment, run from a folder outside this tree (so `rlvr` is the installed one)."""
    return subprocess.run(
        [str(core / argv[0]), *argv[1:]],
        cwd=core.parent,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def python_in(core: Path, code: str, timeout: float = 120):
    """Run `code` with the core's Python; what it prints last, read as JSON."""
    done = run_in(core, "python", "-c", textwrap.dedent(code), timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_core_installs_without_torch_or_the_training_stack(core):
    installed = python_in(
        core,
        """
        import importlib.metadata, importlib.util, json
        names = sorted(d.metadata["Name"].lower() for d in importlib.metadata.distributions())
        print(json.dumps([names, importlib.util.find_spec("torch") is None, importlib.util.find_spec("rlvr").origin]))
        """,
    )
    names, no_torch, origin = installed
    assert no_torch, names
    assert not {"torch", "transformers", "peft", "tokenizers", "safetensors", "datasets", "reasoning-gym"} & set(names)
    assert {"rlvr", "gymnasium", "sympy", "docker"} <= set(names)
    assert str(core.parent) in origin  # the installed rlvr, not this tree's
    assert "ModuleNotFoundError: No module named 'torch'" in run_in(core, "python", "-c", "import torch").stderr


def test_a_math_verification_in_the_core(core):
    verdicts = python_in(
        core,
        r"""
        import json
        from rlvr.verifiers import math
        right = math.verify("Half of it: \\boxed{\\frac{1}{2}}", "0.5")
        wrong = math.verify("So \\boxed{3}", "0.5")
        math.shutdown()
        print(json.dumps([[v.score, str(v.outcome)] for v in (right, wrong)]))
        """,
    )
    assert verdicts == [[1.0, "correct"], [0.0, "incorrect"]]


def test_an_arithmetic_episode_in_the_core(core):
    episode = python_in(
        core,
        """
        import json
        from rlvr.envs import make
        env = make("rlvr/Arithmetic-v0")
        messages, info = env.reset(seed=7)
        _, reward, terminated, truncated, info = env.step(env.unwrapped.reference_action())
        env.reset(seed=7)
        _, wrong, _, _, _ = env.step(env.unwrapped.wrong_action())
        print(json.dumps([messages[-1]["role"], reward, terminated, truncated, str(info["verdict"].outcome), wrong]))
        """,
    )
    assert episode == ["user", 1.0, True, False, "correct", 0.0]


def test_a_code_verification_through_the_docker_sandbox_in_the_core(core):
    verdicts = python_in(
        core,
        """
        import json
        from rlvr import sandbox
        from rlvr.verifiers import code
        reason = sandbox.unavailable_reason(build=False)
        if reason is None:
            tests = [code.CallTest("add", (2, 3), 5), code.CallTest("add", (-1, 1), 0)]
            right = code.verify("```python\\ndef add(a, b):\\n    return a + b\\n```", tests)
            wrong = code.verify("```python\\ndef add(a, b):\\n    return a - b\\n```", tests)
            print(json.dumps([[v.score, str(v.outcome)] for v in (right, wrong)]))
        else:
            print(json.dumps(reason))
        """,
        timeout=300,
    )
    require(not isinstance(verdicts, str), f"the Docker sandbox is unavailable: {verdicts}")
    assert verdicts == [[1.0, "correct"], [0.0, "incorrect"]]


def test_the_core_commands_run_and_those_needing_an_extra_say_which_in_one_line(core):
    shown = run_in(core, "rlvr", "--help")
    assert shown.returncode == 0 and "train" in shown.stdout, shown.stderr
    listed = run_in(core, "rlvr", "envs")
    assert listed.returncode == 0 and "rlvr/Arithmetic-v0" in listed.stdout, listed.stderr
    for command, argv in (("train", ["--steps", "1"]), ("eval", ["--env", "rlvr/Arithmetic-v0"])):
        done = run_in(core, "rlvr", command, *argv)
        assert (done.returncode, done.stderr.splitlines()) == (2, [TRAIN_LINE.format(command=command)]), done.stderr
    served = run_in(core, "rlvr", "serve", "--env", "rlvr/Arithmetic-v0")  # the OpenEnv server: the serve extra
    line = "rlvr serve: error: rlvr serve needs the `serve` extra (openenv-core is not installed): pip install "
    line += "'rlvr[serve]'"
    assert (served.returncode, served.stderr.splitlines()) == (2, [line]), served.stderr
    # an environment whose own package is an extra of its own
    for argv, line in (
        (
            ["rlvr/ReasoningGym-v0"],
            "rlvr check-env: error: rlvr/ReasoningGym-v0 needs the `reasoning-gym` extra (reasoning-gym is not "
            "installed): pip install 'rlvr[reasoning-gym]'",
        ),
        (
            ["rlvr/MathDataset-v0", "--env-arg", "dataset=openai/gsm8k"],
            "rlvr check-env: error: dataset= needs the `datasets` extra (datasets is not installed): "
            "pip install 'rlvr[datasets]' (or pass path=)",
        ),
    ):
        done = run_in(core, "rlvr", "check-env", *argv)
        assert (done.returncode, done.stderr.splitlines()) == (2, [line]), done.stderr


# ---- the same lines where everything is installed, the package hidden ----------------------------------------


def test_rlvr_train_and_eval_without_torch_say_which_extra(monkeypatch, capsys):
    import rlvr.errors
    from rlvr.cli import main

    monkeypatch.setattr(rlvr.errors, "installed", lambda module: module != "torch")
    for command, argv in (("train", ["--steps", "1"]), ("eval", ["--env", "rlvr/Arithmetic-v0"])):
        capsys.readouterr()
        assert main([command, *argv]) == 2
        assert capsys.readouterr().err.splitlines() == [TRAIN_LINE.format(command=command)]
    monkeypatch.setattr(rlvr.errors, "installed", lambda module: module != "peft")
    assert main(["train"]) == 2
    assert "needs the `train` extra (peft is not installed)" in capsys.readouterr().err


def test_an_environment_without_its_extra_says_which(monkeypatch):
    from rlvr.envs import make
    from rlvr.envs.core import EnvError
    from rlvr.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # `import reasoning_gym` fails as if not installed
    with pytest.raises(MissingExtraError) as caught:
        make("rlvr/ReasoningGym-v0", dataset="chain_sum")
    assert isinstance(caught.value, EnvError) and str(caught.value) == (
        "rlvr/ReasoningGym-v0 needs the `reasoning-gym` extra (reasoning-gym is not installed): "
        "pip install 'rlvr[reasoning-gym]'"
    )
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(MissingExtraError, match=r"^dataset= needs the `datasets` extra \(datasets is not installed\)"):
        make("rlvr/MathDataset-v0", dataset="openai/gsm8k")
