"""The README's multi-turn example ("### Multi-turn environments") runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"
HEADING = "### Multi-turn environments"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    assert text.count(HEADING) == 1, f"the README has no single {HEADING!r} section"
    section = re.split(r"\n#{2,3} ", text.split(HEADING, 1)[1], maxsplit=1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the multi-turn section should hold exactly one python block"
    return blocks[0]


def _replay(module, max_turns: int) -> float:
    """The mean return of the example's own policy, played here step by step."""
    env, returns = module.CrackTheCodeEnv(max_turns=max_turns), []
    for seed in range(50):
        messages, _ = env.reset(seed=seed)
        total = 0.0
        for _ in range(max_turns):
            action = module.bisect(messages)
            reply, reward, terminated, truncated, _ = env.step(action)
            messages += [{"role": "assistant", "content": action}] + reply
            total += reward
            if terminated or truncated:
                break
        returns.append(total)
    return float(np.mean(returns))


def test_readme_multiturn_example_runs_as_written(tmp_path):
    (tmp_path / "crack_the_code.py").write_text(_example(), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "crack_the_code.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        import crack_the_code as module

        want = {t: _replay(module, t) for t in (3, 4)}
        # what the section says: it is a MultiTurnEnv whose respond returns TurnResult; state is reset
        env = module.CrackTheCodeEnv()
        env.reset(seed=0)
        env.step("111")
        assert env.tried and env.turns == 1
        env.reset(seed=0)
        assert env.tried == set() and env.turns == 0
        assert isinstance(env.respond("999"), module.TurnResult)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("crack_the_code", None)
    lines = out.stdout.splitlines()
    assert lines == [f"bisect, max_turns={t}: mean reward {want[t]:.2f} on 50 episodes" for t in (3, 4)], out.stdout
    assert want[4] == 1.0 and 0 < want[3] < 1  # the README's prose: 1.00 with 4 guesses, less with 3
    text = README.read_text(encoding="utf-8")
    assert f"({want[3]:.2f}\nwith 3 guesses" in text or f"({want[3]:.2f} with 3 guesses" in text


def test_readme_multiturn_env_passes_the_cli_checker(tmp_path):
    (tmp_path / "crack_the_code.py").write_text(_example(), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "rlvr", "check-env", "crack_the_code:mine/CrackTheCode-v0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "8/8 checks passed" in out.stdout
