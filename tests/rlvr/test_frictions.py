"""What a new user tripped over, each fixed and kept fixed: `rlvr eval` without --out, the `rlvr`
console script importing a module from the current folder, plain `gymnasium.make` on a plugin's
id after `import envs`, a task's id being its reset seed, and `rlvr --help`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

from rlvr import envs
from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]
RLVR = Path(sys.executable).parent / "rlvr"  # the console script of this interpreter's environment
PLUGIN_SRC = ROOT / "tests" / "plugins" / "rlvr_demo_plugin"

MODULE = '''
import gymnasium as gym
import numpy as np
from rlvr.envs import ProceduralTasks, SingleTurnEnv, Task
from rlvr.verifiers import Outcome, Verdict


class EchoEnv(ProceduralTasks, SingleTurnEnv):
    """Repeat a number."""

    def make_task(self, seed):
        n = int(np.random.default_rng(seed).integers(1000))
        return Task(str(seed), [{"role": "user", "content": f"Say {n}."}], str(n), str(n), str(n + 1))

    def verify(self, task, response):
        ok = response.strip() == task.answer
        return Verdict(float(ok), Outcome.CORRECT if ok else Outcome.INCORRECT)


gym.register(id="friction/Echo-v0", entry_point=EchoEnv)
'''


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TOKENIZERS_PARALLELISM": "false", **env},
    )


# ---- 1. `rlvr eval` without --out ---------------------------------------------------------------


def test_eval_out_defaults_to_a_new_folder_named_after_env_and_time():
    from rlvr.cli import build_parser
    from rlvr.commands.eval import default_out

    assert build_parser().parse_args(["eval", "--env", "rlvr/Arithmetic-v0"]).out is None  # not required
    when = time.mktime((2025, 1, 2, 3, 4, 5, 0, 0, -1))
    assert default_out("rlvr/Arithmetic-v0", when) == os.path.join("runs", "eval", "rlvr_Arithmetic-v0-20250102-030405")
    assert default_out("my_mod:mine/Count-v0", when) == os.path.join(
        "runs", "eval", "my_mod_mine_Count-v0-20250102-030405"
    )


def test_eval_without_out_writes_there_and_says_so(tmp_path, monkeypatch, capsys):
    from rlvr.cli import main

    monkeypatch.chdir(tmp_path)
    rc = main(["eval", "--sampler", "hf", "--tasks", "2", "--max-tokens", "4", "--no-progress"])
    assert rc == 0
    [out] = (tmp_path / "runs" / "eval").glob("rlvr_Arithmetic-v0-*")
    assert re.fullmatch(r"rlvr_Arithmetic-v0-\d{8}-\d{6}", out.name)
    assert (out / "summary.json").is_file() and (out / "episodes.jsonl").is_file()
    printed = capsys.readouterr().out
    rel = os.path.join("runs", "eval", out.name)
    assert f"results go to {rel}/" in printed and f"results in {rel}/summary.json" in printed


# ---- 2. the console script imports `module` of `module:ns/Id-v0` from the current folder ---------


@pytest.mark.parametrize("launcher", ["console script", "python -m"])
def test_check_env_imports_a_module_from_the_current_folder(tmp_path, launcher):
    require(RLVR.exists() or launcher == "python -m", f"no console script {RLVR}")
    (tmp_path / "friction_mod.py").write_text(MODULE)
    argv = [str(RLVR)] if launcher == "console script" else [sys.executable, "-m", "rlvr"]
    done = _run([*argv, "check-env", "friction_mod:friction/Echo-v0"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"friction_mod:friction/Echo-v0: (\d+)/\1 checks passed", done.stdout)


def test_main_with_argv_leaves_sys_path_alone(tmp_path, monkeypatch, capsys):
    from rlvr.cli import main

    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    main(["envs"])
    assert sys.path == before  # only a program run (argv None) adds the current folder
    capsys.readouterr()


# ---- 3. `import envs` loads plugins, so plain `gymnasium.make` finds them ----------------------


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    work = tmp_path_factory.mktemp("plugin")
    shutil.copytree(PLUGIN_SRC, work / "src")
    site = work / "site"
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
            str(site),
            str(work / "src"),
        ],
        check=True,
        timeout=120,
    )
    return site


PLAIN_MAKE = """
import warnings
warnings.simplefilter("always")
import gymnasium
from rlvr import envs
for env_id in ("rlvrdemo/Upper-v0", "rlvrdemo/ReverseWord-v0", "rlvr/Arithmetic-v0"):
    env = gymnasium.make(env_id)
    print(env_id, env.reset(seed=3)[1]["task_id"])
"""


def _pythonpath(site: Path) -> str:
    return os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


def test_import_envs_makes_plugin_ids_known_to_gymnasium(plugin_site, tmp_path):
    done = _run([sys.executable, "-c", PLAIN_MAKE], tmp_path, PYTHONPATH=_pythonpath(plugin_site))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["rlvrdemo/Upper-v0 3", "rlvrdemo/ReverseWord-v0 3", "rlvr/Arithmetic-v0 3"]
    assert "was not loaded" not in done.stderr


def test_a_broken_plugin_warns_on_import_and_the_others_still_load(plugin_site, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(plugin_site, site)
    eps = next(site.glob("rlvr_demo_plugin-*.dist-info")) / "entry_points.txt"
    eps.write_text(eps.read_text() + "broken = rlvr_demo_plugin.does_not_exist\n")
    done = _run([sys.executable, "-c", PLAIN_MAKE], tmp_path, PYTHONPATH=_pythonpath(site))
    assert done.returncode == 0, done.stderr
    assert "rlvrdemo/Upper-v0 3" in done.stdout
    assert re.search(
        r"RuntimeWarning: rlvr.envs plugin 'broken' \(rlvr_demo_plugin.does_not_exist\) was not "
        r"loaded: ModuleNotFoundError",
        done.stderr,
    ), done.stderr


def test_load_plugins_warns_only_when_asked(monkeypatch, recwarn):
    from rlvr.envs import registry

    class Broken:
        name, value = "broken", "nowhere.at_all"

        def load(self):
            raise ImportError("nope")

    monkeypatch.setattr(registry, "entry_points", lambda group: [Broken()])
    assert [f.name for f in registry.load_plugins()] == ["broken"]
    assert not [w for w in recwarn if "broken" in str(w.message)]
    with pytest.warns(RuntimeWarning, match="plugin 'broken' .* ImportError: nope"):
        registry.load_plugins(warn=True)


# ---- 4. a procedural task's id is its reset seed -------------------------------------------------


@pytest.mark.parametrize("env_id", ["rlvr/Arithmetic-v0", "rlvr/SymbolicMath-v0", "rlvr/GuessNumber-v0"])
def test_reset_seed_is_the_task_id(env_id):
    env = envs.make(env_id)
    for seed in (0, 1, 12345, 1_000_000):
        messages, info = env.reset(seed=seed)
        assert info["task_id"] == str(seed)
        assert env.unwrapped.task == env.unwrapped.make_task(seed)
        assert env.reset(options={"task_id": str(seed)})[0] == messages  # the same task, by id
    # Without a seed, the next task is drawn from the env's seeded RNG: reproducible after a seed.
    env.reset(seed=7)
    drawn = [env.reset()[1]["task_id"] for _ in range(3)]
    env.reset(seed=7)
    assert [env.reset()[1]["task_id"] for _ in range(3)] == drawn
    assert len(set(drawn)) == 3
    env.close()


def test_readme_example_task_id_is_its_seed():
    """The README's CountLettersEnv says "reset(seed=s) makes task s: a task's id is its seed"."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "reset(seed=s) makes task s: a task's id is its seed" in readme
    env = gym.make("rlvr/Arithmetic-v0")
    assert env.reset(seed=0)[1]["task_id"] == "0"


def test_seed_wins_over_nothing_but_task_id_option_wins_over_seed():
    env = envs.make("rlvr/Arithmetic-v0")
    assert env.reset(seed=5, options={"task_id": "9"})[1]["task_id"] == "9"
    assert env.reset(seed=5, options={})[1]["task_id"] == "5"


# ---- 5. `rlvr --help` ---------------------------------------------------------------------------


def test_top_level_help_is_a_description_and_one_line_per_command(capsys):
    from rlvr.cli import COMMANDS, build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    description = text.split("\n\n")[1]
    assert "\n" not in description and description.endswith(".") and "`" not in description
    assert "rlvr.commands" not in text  # no developer docstring
    epilog = text.split("commands:\n", 1)[1].split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in epilog] == [c.replace("_", "-") for c in COMMANDS]
    assert all(len(line.split(None, 1)[1]) > 10 for line in epilog)
    for command in COMMANDS:  # each command once: in the epilog, not again under positional arguments
        assert len(re.findall(rf"^  {command.replace('_', '-')}\b", text, flags=re.M)) == 1
