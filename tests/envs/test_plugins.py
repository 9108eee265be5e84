"""Third-party environments: a real pip-installed package declares `rlvr.envs` entry points and
rlvr finds its environments without code changes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from rlvr import envs

PLUGIN_SRC = Path(__file__).resolve().parents[1] / "plugins" / "rlvr_demo_plugin"
PLUGIN_IDS = ["rlvrdemo/ReverseWord-v0", "rlvrdemo/Upper-v0"]


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory):
    """pip-install the demo package into a private target and put it on sys.path."""
    work = tmp_path_factory.mktemp("plugin")
    src = work / "src"
    shutil.copytree(PLUGIN_SRC, src)  # build outside the repo: pip writes build/ next to the sources
    target = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(src),
        ],
        check=True,
        timeout=120,
    )
    sys.path.insert(0, str(target))
    yield target
    sys.path.remove(str(target))
    for env_id in PLUGIN_IDS:
        gym.registry.pop(env_id, None)
    for name in [m for m in sys.modules if m.startswith("rlvr_demo_plugin")]:
        del sys.modules[name]


def test_plugin_envs_are_discovered_listed_made_and_checked(installed_plugin):
    assert not any(i in gym.registry for i in PLUGIN_IDS)
    assert envs.load_plugins() == []
    assert all(i in gym.registry for i in PLUGIN_IDS)
    rows = {r.id: r for r in envs.list_envs()}
    assert rows["rlvrdemo/ReverseWord-v0"].description == "Spell a word backwards; exact match scores 1."
    assert rows["rlvrdemo/Upper-v0"].kind == "single-step"
    for env_id in PLUGIN_IDS:
        env = envs.make(env_id)
        assert all(r.ok for r in envs.check_env(env))
    assert envs.load_plugins() == []  # loading again is harmless


def test_make_loads_plugins_on_demand(installed_plugin):
    gym.registry.pop("rlvrdemo/ReverseWord-v0", None)
    env = envs.make("rlvrdemo/ReverseWord-v0")
    obs, _ = env.reset(seed=1)
    word = obs[0]["content"].split("'")[1]
    assert env.step(word[::-1])[1] == 1.0


def test_a_broken_plugin_is_reported_not_raised(installed_plugin):
    dist = next(installed_plugin.glob("rlvr_demo_plugin-*.dist-info"))
    eps = dist / "entry_points.txt"
    original = eps.read_text()
    eps.write_text(original + "broken = rlvr_demo_plugin.does_not_exist\n")
    try:
        failures = envs.load_plugins()
        rows = {r.id: r for r in envs.list_envs()}
    finally:
        eps.write_text(original)
    assert [(f.name, f.value) for f in failures] == [("broken", "rlvr_demo_plugin.does_not_exist")]
    assert "ModuleNotFoundError" in failures[0].error
    assert rows["<plugin broken>"].kind == "unavailable"
    assert "rlvrdemo/ReverseWord-v0" in rows  # the working entry points still load
