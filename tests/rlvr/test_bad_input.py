"""Bad input to the real `rlvr` CLI ends in one line on stderr, `rlvr COMMAND: error: ...` naming the
problem, and exit code 2, never a traceback. The checks run before any model or vLLM is loaded.
Where the subject is the command's answer (a bad --out, model directory or value, a full disk), the
CLI's entry point `rlvr.cli.main` runs in this process (a subprocess would pay its imports again, 5-10 s
a case); where it is the process (a plugin that exits at import, the current folder's `json.py`), it
is a subprocess of `python -m rlvr`. A full disk while checkpointing is real: a small tmpfs (ENOSPC;
needs root to mount) or a file-size rlimit (EFBIG; any user)."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.trainers import checkpoint as ckpt
from tests.conftest import read_only_dir, rlvr_here, tmpfs

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "trainers" / "assets" / "tiny"
# GuessNumber: a cheap environment that needs no SymPy; the model checks come after the env's.
ENV = ["--env", "rlvr/GuessNumber-v0"]
TRAIN = [
    "train",
    *ENV,
    "--steps",
    "1",
    "--tasks-per-step",
    "2",
    "--group-size",
    "2",
    "--max-tokens",
    "4",
    "--sampler",
    "hf",
    "--no-progress",
]
EVAL = ["eval", *ENV, "--tasks", "2", "--max-tokens", "4", "--sampler", "hf", "--no-progress"]


def rlvr(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """`python -m rlvr ARGV`, a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "rlvr", *map(str, argv)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def assert_one_line_error(done: subprocess.CompletedProcess, command: str, problem: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith(f"rlvr {command}: error: ") and problem in lines[0], lines
    return lines[0]


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """Paths for each kind of bad input. Read-only: as root, permission bits stop nothing, so it is
    a tmpfs mounted read-only (EROFS also for root); as another user, a directory without write bits."""
    root = tmp_path_factory.mktemp("bad")
    (root / "a_file").write_text("not a directory")
    no_weights, bad_json = root / "no_weights", root / "bad_json"
    shutil.copytree(TINY, no_weights, ignore=shutil.ignore_patterns("*.safetensors"))
    shutil.copytree(TINY, bad_json)
    (bad_json / "config.json").write_text('{"model_type": "qwen2",')  # cut short
    shutil.copytree(TINY, root / "no_tokenizer", ignore=shutil.ignore_patterns("tokenizer.json"))
    shutil.copytree(TINY, root / "cut_tokenizer")
    text = (TINY / "tokenizer.json").read_text()
    (root / "cut_tokenizer" / "tokenizer.json").write_text(text[: len(text) // 2])
    shutil.copytree(TINY, root / "no_chat_template", ignore=shutil.ignore_patterns("chat_template.jinja"))
    with read_only_dir(root / "read_only"):
        yield root


OUT_CASES = {  # --out -> the problem named
    "a_file": "is a file, not a directory",
    "a_file/run": "which is a file, not a directory",
    "read_only/run": "is read-only",
}
MODEL_CASES = {
    "no_weights": "has no weights",
    "bad_json": "config.json is not readable JSON",
    "no_tokenizer": "has no tokenizer",
    "cut_tokenizer": "tokenizer.json is not readable JSON",
    "no_chat_template": "has no chat template",
}
VALUE_CASES = [  # (command, flags, problem)
    ("train", ["--temperature", "inf"], "temperature must be a finite number, got inf"),
    ("train", ["--lr", "inf"], "lr must be a finite number, got inf"),
    ("train", ["--max-grad-norm", "inf"], "max_grad_norm must be a finite number, got inf"),
    ("train", ["--micro-batch-size", "0"], "micro_batch_size must be >= 1, got 0"),
    ("eval", ["--temperature", "nan"], "--temperature must be a finite number >= 0, got nan"),
    ("eval", ["--task-start", "-1"], "--task-start must be >= 0, got -1"),
]


@pytest.mark.parametrize("command", ["train", "eval"])
@pytest.mark.parametrize("out", OUT_CASES)
def test_bad_out(place, capsys, command, out):
    base = TRAIN if command == "train" else EVAL
    assert_one_line_error(rlvr_here(capsys, *base, "--out", place / out), command, OUT_CASES[out])


@pytest.mark.parametrize("command", ["train", "eval"])
@pytest.mark.parametrize("model", MODEL_CASES)
def test_bad_model_directory(place, tmp_path, capsys, command, model):
    base = TRAIN if command == "train" else EVAL
    done = rlvr_here(capsys, *base, "--model", place / model, "--out", tmp_path / "run")
    assert_one_line_error(done, command, MODEL_CASES[model])
    assert not (tmp_path / "run").exists()  # refused before anything was written


@pytest.mark.parametrize("command,flags,problem", VALUE_CASES)
def test_bad_value(tmp_path, capsys, command, flags, problem):
    base = TRAIN if command == "train" else EVAL
    assert_one_line_error(rlvr_here(capsys, *base, *flags, "--out", tmp_path / "run"), command, problem)
    assert not (tmp_path / "run").exists()


# ---- a full disk while saving a checkpoint ----------------------------------------------------
@pytest.fixture(scope="module")
def one_step_run(tmp_path_factory):
    """A finished 1-step run with its checkpoint; the tests resume it to step 2 on a disk too small."""
    out = tmp_path_factory.mktemp("trained") / "run"
    assert main([*TRAIN, "--save-every", "1", "--out", str(out)]) == 0
    return out


def resume_to_step_2(capsys, out: Path) -> str:
    done = rlvr_here(capsys, *TRAIN, "--steps", "2", "--save-every", "1", "--resume", "--out", out)
    # Loading and the metrics line print on stderr before the save fails: the error is its last line.
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and done.returncode == 2, done.stderr[-3000:]
    assert lines[-1].startswith("rlvr train: error: could not save checkpoint step 2")
    assert sum("error:" in line for line in lines) == 1
    assert [step for step, _ in ckpt.list_checkpoints(out)] == [1]  # the previous checkpoint is kept...
    assert ckpt.load_state(ckpt.latest_checkpoint(out))["step"] == 1  # ...intact,
    assert not [p for p in ckpt.checkpoint_dir(out).iterdir() if p.name.startswith(".tmp-")]  # and no leftovers
    return lines[-1]


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_disk_full_while_checkpointing(one_step_run, tmp_path, capsys):
    checkpoint = _size(ckpt.latest_checkpoint(one_step_run))
    # Room for the run as it is plus half a checkpoint (and 1 MiB for metrics and page rounding).
    with tmpfs(tmp_path / "disk", str(_size(one_step_run) + checkpoint // 2 + (1 << 20))) as disk:
        shutil.copytree(one_step_run, disk / "run")
        line = resume_to_step_2(capsys, disk / "run")
    assert "No space left on device" in line and "step-00000001 is kept" in line


def test_file_size_limit_while_checkpointing(one_step_run, tmp_path, capsys):
    shutil.copytree(one_step_run, tmp_path / "run")
    limit = 1 << 20  # the checkpoint's weights and optimizer state are larger; nothing else written is
    # This process's limit for the run (Python ignores SIGXFSZ: a write past it is EFBIG), restored after.
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        line = resume_to_step_2(capsys, tmp_path / "run")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert "File too large" in line


# ---- environments, plugins, config files, the current folder -------------------------------------
PLUGINS = {  # module file -> (its code, the problem named)
    "exits_3": ("import sys\nsys.exit(3)\n", "called sys.exit(3)"),
    "exits_0_at_once": ("import os\nos._exit(0)\n", "os._exit(0) called while importing"),
}
OLD_API_MODULE = """
import gymnasium
from rlvr.envs.tasks.guess_number import GuessNumberEnv


class OldApi(GuessNumberEnv):
    def respond(self, action):  # the 4-tuple of an earlier README, not a TurnResult
        r = super().respond(action)
        return r.reply, r.reward, r.done, r.verdict


gymnasium.register(id="old/OldApi-v0", entry_point=OldApi)
"""


@pytest.fixture()
def folder(tmp_path):
    """A user's current folder: a json.py that must not shadow the standard library, plugins."""
    (tmp_path / "json.py").write_text("raise ImportError('the json.py of the current folder was imported')\n")
    for name, (code, _) in PLUGINS.items():
        (tmp_path / f"{name}.py").write_text(code)
    (tmp_path / "old_api.py").write_text(OLD_API_MODULE)
    (tmp_path / "a_dir").mkdir()
    (tmp_path / "repeated.yaml").write_text("steps: 2\nlr: 0.001\nsteps: 3\n")
    return tmp_path


FOLDER_CASES = [  # (argv, problem named): each run from `folder`
    (["check-env", "rlvr/CodeDataset-v0", "--env-arg", "path=missing.jsonl"], "missing.jsonl"),
    (["check-env", "rlvr/CodeDataset-v0", "--env-arg", "path=a_dir"], "a_dir"),
    (["check-env", "exits_3:x/Never-v0"], PLUGINS["exits_3"][1]),
    (["check-env", "exits_0_at_once:x/Never-v0"], PLUGINS["exits_0_at_once"][1]),
    (["eval", "--env", "exits_3:x/Never-v0", "--out", "run"], PLUGINS["exits_3"][1]),
    (["train", "--env", "exits_0_at_once:x/Never-v0", "--out", "run"], PLUGINS["exits_0_at_once"][1]),
    (["train", "--config", "repeated.yaml", "--out", "run"], "'steps' is given twice (lines 1 and 3)"),
]


@pytest.mark.parametrize("argv,problem", FOLDER_CASES, ids=[" ".join(a[:3]) for a, _ in FOLDER_CASES])
def test_bad_input_from_a_users_folder(folder, argv, problem):
    assert_one_line_error(rlvr(*argv, cwd=folder), argv[0], problem)
    assert not (folder / "run").exists()


def test_a_json_py_in_the_current_folder_does_not_shadow_the_standard_library(folder):
    done = rlvr("check-env", "rlvr/Arithmetic-v0", "--seeds", "1", cwd=folder)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    console = Path(sys.executable).parent / "rlvr"  # the console script imports from the folder too
    if console.exists():
        done = subprocess.run([str(console), "envs"], capture_output=True, text=True, cwd=folder, timeout=300)
        assert done.returncode == 0 and "rlvr/Arithmetic-v0" in done.stdout, done.stderr[-3000:]


def test_check_env_failures_say_so_on_stderr(folder):
    done = rlvr("check-env", "old_api:old/OldApi-v0", "--seeds", "1", cwd=folder)
    assert done.returncode == 1 and "FAIL" in done.stdout and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("rlvr check-env: error: old_api:old/OldApi-v0 failed ") and "TurnResult" in line, line


# ---- a full disk while `rlvr eval` writes its episodes -------------------------------------------
def test_disk_full_during_eval(tmp_path, capsys):
    # tmpfs counts pages of 4 KiB: one for run.json, one for the lock, two for a few episode lines of
    # Arithmetic (~1 KiB each), not for 40 tasks'
    with tmpfs(tmp_path / "disk", "16k") as disk:
        done = rlvr_here(
            capsys, *EVAL, "--env", "rlvr/Arithmetic-v0", "--tasks", "40", "--chunk", "2", "--out", disk / "run"
        )
        line = assert_one_line_error(done, "eval", "No space left on device")
        assert "run again with the same --out" in line
        kept = (disk / "run" / "episodes.jsonl").read_text()
    assert kept.count("\n") >= 1  # the lines written before are kept, to resume from
