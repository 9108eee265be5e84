"""The README's "Python API" example runs as written: its one python block, extracted from README.md
and run in a fresh interpreter in an empty folder, trains, evaluates and rolls out, and prints
rlvr's own lines only (the libraries' warnings and loading bars stay hidden, as in `rlvr train`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
HEADING = "## Python API"


def example() -> str:
    text = README.read_text(encoding="utf-8")
    assert text.count(f"\n{HEADING}\n") == 1, f"the README has no single {HEADING!r} section"
    section = re.split(r"\n## ", text.split(f"\n{HEADING}\n", 1)[1], maxsplit=1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M)
    assert len(blocks) == 1, "the Python API section should hold exactly one python block"
    return blocks[0]


def test_the_python_api_example_runs_as_written(tmp_path):
    script = tmp_path / "notebook.py"
    script.write_text(example(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "TRANSFORMERS_", "TORCH_CPP", "HF_HUB"))}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    # what the README says it prints is what it prints: the steps, and the optimizer steps they took
    said = re.search(r"It prints `(trained 2 steps \(\d+ optimizer steps?\))`", README.read_text()).group(1)
    assert re.search(rf"^{re.escape(said)}$", out, re.M), (said, out)
    # evaluate's table names the run's last checkpoint, and its numbers are printed typed
    assert re.search(r"^model\s+runs/add/checkpoints/step-00000002$", out, re.M), out
    assert re.search(r"^tasks / episodes\s+4 / 8 \(8 valid\)$", out, re.M), out
    assert re.search(r"^pass@1 \d\.\d{3}, mean reward \d\.\d{3}$", out, re.M), out
    # the rolled-out episode: the environment's prompt, the model's answer, its reward and outcome
    assert re.search(r"^user: What is \d \+ \d\? Answer as \\boxed\{n\}\.$", out, re.M), out
    assert re.search(r"^assistant: ", out, re.M), out
    assert re.search(r"^reward (0\.0|1\.0), outcome (correct|incorrect|format_error|truncated)$", out, re.M), out
    assert (tmp_path / "runs/add/metrics.jsonl").is_file()
    # quiet: no library warnings or loading bars, only the run's progress line
    for noise in ("Warning", "Loading weights", "it/s]"):
        assert noise not in done.stderr, done.stderr[-3000:]
