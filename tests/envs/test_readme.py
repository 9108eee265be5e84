"""The README's "Write your own environment" example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.conftest import require

README = Path(__file__).resolve().parents[2] / "README.md"


def _section_code(lang: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Write your own environment", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)


def test_readme_example_checks_and_evaluates(tmp_path):
    (tmp_path / "count_letters.py").write_text(_section_code("python")[0], encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "count_letters.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    # The printed mean is the share of the 50 tasks whose count really is 2.
    sys.path.insert(0, str(tmp_path))
    try:
        import count_letters

        env = count_letters.CountLettersEnv()
        want = np.mean([env.reset(seed=s)[0] and env.task.answer == "2" for s in range(50)])
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("count_letters", None)
    assert f"guess_two: mean reward {want:.2f} on 50 tasks" in out.stdout


def test_readme_check_env_command(tmp_path):
    try:
        from rlvr.cli import build_parser

        build_parser()
        cli_ready = True
    except ImportError:
        cli_ready = False
    require(cli_ready, "rlvr.cli cannot import all its subcommands yet")
    (tmp_path / "count_letters.py").write_text(_section_code("python")[0], encoding="utf-8")
    command = next(line for line in _section_code("bash")[0].splitlines() if "check-env" in line)
    out = subprocess.run(
        command.replace("python", sys.executable, 1).split(), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "8/8 checks passed" in out.stdout
