"""`rlvr train`'s flags are generated from `TrainConfig` (fields, one-line descriptions, defaults):
every field has a flag and a help text, --help shows the defaults, a flag given overrides the YAML
file and a flag not given does not, and a bad value is one typed line with exit code 2."""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.cli import build_parser, main
from rlvr.commands.train import overrides_from_args
from rlvr.config_flags import flag_name, shown
from rlvr.trainers.config import TrainConfig

REPO = Path(__file__).resolve().parents[2]
FIELDS = dataclasses.fields(TrainConfig)
# The flags of `rlvr train` before they were generated; the README, tests and scripts use them.
OLD_FLAGS = {
    "--model": "tiny",
    "--env": "rlvr/GuessNumber-v0",
    "--algo": "rloo",
    "--steps": "3",
    "--group-size": "4",
    "--tasks-per-step": "2",
    "--minibatch-size": "4",
    "--micro-batch-size": "2",
    "--epochs": "2",
    "--lr": "0.001",
    "--lr-schedule": "cosine",
    "--warmup-steps": "5",
    "--max-grad-norm": "0.5",
    "--temperature": "0.7",
    "--top-p": "0.9",
    "--max-tokens": "16",
    "--sampler": "hf",
    "--old-logprobs": "sampler",
    "--value-model": "head",
    "--seed": "7",
    "--out": "runs/x",
    "--save-every": "10",
    "--keep-last": "3",
    "--eval-tasks": "20",
    "--eval-every": "5",
    "--time-limit": "60",
    "--threads": "1",
}


def train_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["train"]


def help_block(lines: list[str], flag: str) -> list[str]:
    """The lines of `flag` in --help: the one naming its option strings, and the indented ones after it."""
    for i, line in enumerate(lines):
        invocation = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]  # help text starts after 2+ spaces
        if line.startswith("  -") and flag in invocation.replace(",", " ").split():
            rest = lines[i + 1 :]
            end = next((j for j, nxt in enumerate(rest) if not nxt.startswith(" " * 4)), len(rest))
            return [line, *rest[:end]]
    raise AssertionError(f"{flag} is not in --help")


def default_of(f: dataclasses.Field):
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


def overrides(*argv: str) -> dict:
    return overrides_from_args(build_parser().parse_args(["train", *argv]))


def test_every_field_has_a_flag_with_a_description():
    actions = {a.dest: a for a in train_parser()._actions}
    for f in FIELDS:
        assert f.name in actions, f"no flag for TrainConfig.{f.name}"
        assert flag_name(f.name) in actions[f.name].option_strings
        assert f.metadata.get("help", "").strip(), f"TrainConfig.{f.name} has no description"
        assert "\n" not in f.metadata["help"]  # one line


def test_help_shows_every_default(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # argparse wraps at the terminal width: one line per flag
    with pytest.raises(SystemExit) as done:
        main(["train", "--help"])
    assert done.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    for f in FIELDS:
        assert f"(default: {shown(default_of(f))})" in " ".join(help_block(lines, flag_name(f.name))), f.name
    text = "\n".join(lines)
    assert "--max-tokens MAX_TOKENS" in text and "(default: 32)" in text
    assert "--sampler {vllm,hf}" in text and "--progress, --no-progress" in text


def test_algo_help_names_every_preset():
    from rlvr.trainers.algorithms import PRESETS

    help_text = next(f for f in FIELDS if f.name == "algo").metadata["help"]
    assert all(name in help_text for name in PRESETS)


def test_old_flags_still_parse():
    argv = [item for pair in OLD_FLAGS.items() for item in pair]
    values = overrides(*argv, "--env-arg", "difficulty=1", "--algo-arg", "kl_coef=0", "--resume", "--no-progress")
    assert values["steps"] == 3 and values["lr"] == 0.001 and values["time_limit"] == 60.0
    assert values["env_args"] == {"difficulty": 1} and values["algo_args"] == {"kl_coef": 0}
    assert values["resume"] is True and values["progress"] is False
    assert len(values) == len(OLD_FLAGS) + 4
    TrainConfig.from_dict(values)  # the converted values are TrainConfig's types


def test_no_flag_no_override():
    assert overrides() == {}


def test_flag_overrides_yaml_and_an_absent_flag_does_not(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        "steps: 3\nmax_tokens: 7\nsampler: hf\nprogress: false\nepochs: 2\n"
        "adam_betas: [0.8, 0.9]\nenv_args: {difficulty: 1}\n"
    )
    cfg = TrainConfig.load(path, overrides("--steps", "5", "--env-args", "render_mode=null"))
    assert cfg.steps == 5  # given: the flag wins
    assert (cfg.max_tokens, cfg.sampler, cfg.progress, cfg.epochs, cfg.adam_betas) == (7, "hf", False, 2, (0.8, 0.9))
    assert cfg.env_args == {"difficulty": 1, "render_mode": None}  # mappings merge, as before
    cfg = TrainConfig.load(path, overrides("--epochs", "none", "--adam-betas", "0.5", "0.6", "--max-tokens", "9"))
    assert (cfg.epochs, cfg.adam_betas, cfg.max_tokens) == (None, (0.5, 0.6), 9)


def test_flag_overrides_yaml_through_the_cli(tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text("algo: rloo\nsteps: 3\nmax_tokens: 7\n")
    rc = main(
        ["train", "--config", str(path), "--steps", "5", "--no-progress", "--out", str(tmp_path / "run"), "--check"]
    )
    out = capsys.readouterr().out
    assert rc == 0 and '"steps": 5' in out and '"max_tokens": 7' in out and '"progress": false' in out


@pytest.mark.parametrize(
    "argv, field, value",
    [
        (["--progress"], "progress", True),
        (["--no-progress"], "progress", False),
        (["--resume"], "resume", True),
        (["--no-resume"], "resume", False),
        (["--no-progress", "--progress"], "progress", True),  # the last one wins
    ],
)
def test_bool_flags_both_ways(tmp_path, argv, field, value):
    path = tmp_path / "run.yaml"
    path.write_text(f"{field}: {str(not value).lower()}\n")  # the YAML says the opposite
    assert overrides(*argv) == {field: value}
    assert getattr(TrainConfig.load(path, overrides(*argv)), field) is value
    assert getattr(TrainConfig.load(path, overrides()), field) is (not value)  # no flag: the YAML's


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["--steps", "many"], "--steps must be an integer, got 'many'"),
        (["--lr", "fast"], "--lr must be a number, got 'fast'"),
        (["--epochs", "two"], "--epochs must be an integer or none, got 'two'"),
        (["--adam-betas", "0.9", "x"], "--adam-betas must be a number, got 'x'"),
        (["--sampler", "tgi"], "sampler must be one of vllm, hf; got 'tgi'"),
        (["--lr-schedule", "step"], "lr_schedule must be one of constant, linear, cosine; got 'step'"),
        (["--env-arg", "difficulty"], "--env-arg must be KEY=VALUE"),
        (["--max-tokens", "0"], "max_tokens must be >= 1, got 0"),
    ],
)
def test_bad_value_is_one_typed_line(tmp_path, capsys, argv, problem):
    assert main(["train", *argv, "--out", str(tmp_path / "run")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlvr train: error: ") and problem in lines[0], lines
    assert not (tmp_path / "run").exists()


def test_bad_value_from_the_real_command(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "rlvr", "train", "--steps", "many", "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == ["rlvr train: error: --steps must be an integer, got 'many'"]


def test_eval_uses_the_defaults_train_evaluates_with():
    from rlvr import envs
    from rlvr.cli import build_parser
    from rlvr.envs.eval_tasks import plan
    from rlvr.trainers.config import TrainConfig

    args = build_parser().parse_args(["eval", "--out", "unused"])
    # --task-start None: for a generated env (the default one) the held-out seeds train evaluates on (issue 39)
    tasks = plan(envs.make(args.env), args.tasks, args.task_start)
    assert args.max_tokens == TrainConfig.max_tokens and tasks.start == TrainConfig.eval_seed_start


# ---- `rlvr eval`: its flags from EvalConfig, the shared ones from the same fields as `rlvr train`'s ----
# Every flag `rlvr eval` had when its flags were typed by hand: (argv, the value it set).
OLD_EVAL_FLAGS = [
    (["--model", "tiny"], "model", "tiny"),
    (["--env", "rlvr/GuessNumber-v0"], "env", "rlvr/GuessNumber-v0"),
    (["--env-arg", "n=8"], "env_args", {"n": 8}),
    (["--tasks", "3"], "tasks", 3),
    (["--k", "1,4"], "k", "1,4"),
    (["--samples", "5"], "samples", 5),
    (["--sampler", "hf"], "sampler", "hf"),
    (["--base-url", "http://h/v1"], "base_url", "http://h/v1"),
    (["--api", "chat"], "api", "chat"),
    (["--api-key", "sk"], "api_key", "sk"),
    (["--tokenizer", "tok"], "tokenizer", "tok"),
    (["--out", "runs/e"], "out", "runs/e"),
    (["--temperature", "0"], "temperature", 0.0),
    (["--top-p", "0.9"], "top_p", 0.9),
    (["--max-tokens", "12"], "max_tokens", 12),
    (["--seed", "3"], "seed", 3),
    (["--task-start", "7"], "task_start", 7),
    (["--chunk", "2"], "chunk", 2),
    (["--max-model-len", "256"], "max_model_len", 256),
    (["--no-progress"], "progress", False),
    (["--verbose"], "verbose", True),
]
# What they defaulted to (rlvr/commands/eval.py's add_argument calls before EvalConfig).
OLD_EVAL_DEFAULTS = {
    "model": "tiny",
    "env": "rlvr/Arithmetic-v0",
    "env_args": {},
    "tasks": 100,
    "k": "1",
    "samples": None,
    "sampler": None,
    "base_url": None,
    "api": "completions",
    "api_key": None,
    "tokenizer": None,
    "out": None,
    "temperature": 1.0,
    "top_p": 1.0,
    "max_tokens": 32,
    "seed": 0,
    "task_start": 1_000_000,
    "chunk": None,  # the --out run's, else sized to the tasks (rlvr.commands.eval_resume)
    "max_model_len": None,
    "progress": True,
    "verbose": False,
}


def eval_config(*argv: str):
    from rlvr.commands.eval_config import EvalConfig

    return EvalConfig.from_args(build_parser().parse_args(["eval", *argv]))


def test_eval_flags_keep_their_names_defaults_and_values():
    assert len(OLD_EVAL_FLAGS) == len(OLD_EVAL_DEFAULTS) == 21
    # --resume: new in issue 32; --tasks and --task-start None since issue 39 (every problem of a listed env once,
    # from 0; for a generated env still 100 tasks from the held-out seeds: tests/envs/test_eval_tasks.py)
    # --temperature None since issue 43: 0 (greedy) for one sample per task, else 1.0 (rlvr.envs.eval_sampling)
    new = {"resume": True, "tasks": None, "task_start": None, "temperature": None}
    assert dataclasses.asdict(eval_config()) == {**OLD_EVAL_DEFAULTS, **new}
    for argv, field, value in OLD_EVAL_FLAGS:
        assert getattr(eval_config(*argv), field) == value, argv
    args = build_parser().parse_args(["eval"])  # a flag not given holds its default in the namespace
    assert args.out is None and args.tasks is None and args.chunk is None and args.progress is True


def test_eval_shares_trains_fields_rather_than_retyping_them():
    """A setting both commands have is one field of CommonSettings: one name, default, description."""
    from rlvr.commands.eval_config import EvalConfig
    from rlvr.trainers.config import CommonSettings

    common = {f.name: f for f in dataclasses.fields(CommonSettings)}
    assert set(common) == {
        "model",
        "env",
        "env_args",
        "temperature",
        "top_p",
        "max_tokens",
        "seed",
        "progress",
        "verbose",
    }
    for cls in (TrainConfig, EvalConfig):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for name, f in common.items():
            if (cls, name) == (EvalConfig, "temperature"):  # on purpose: its default follows the samples (issue 43)
                assert fields[name].default is None and "greedy" in fields[name].metadata["help"]
                continue
            assert (fields[name].default, fields[name].metadata) == (f.default, f.metadata), (cls, name)
    own = {f.name for f in dataclasses.fields(EvalConfig)} - set(common)
    # the three that differ on purpose (rlvr/commands/eval_config.py): eval's sampler adds openai and has no fixed
    # default, its out no default folder, its resume is on by default; any other name in both must be a shared field
    assert own & {f.name for f in FIELDS} == {"sampler", "out", "resume"}


def test_eval_help_shows_every_default(capsys, monkeypatch):
    from rlvr.commands.eval_config import EvalConfig

    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    lines = capsys.readouterr().out.splitlines()
    for f in dataclasses.fields(EvalConfig):
        block = " ".join(help_block(lines, flag_name(f.name)))
        assert f"(default: {shown(default_of(f))})" in block and f.metadata["help"] in block, f.name
    assert "with --base-url, the name the server serves" in " ".join(help_block(lines, "--model"))


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["--tasks", "many"], "--tasks must be an integer or none, got 'many'"),
        (["--samples", "x"], "--samples must be an integer or none, got 'x'"),
        (["--sampler", "tgi"], "--sampler must be one of vllm, hf, openai; got 'tgi'"),
        (["--api", "grpc"], "--api must be one of completions, chat; got 'grpc'"),
        (["--temperature", "nan"], "--temperature must be a finite number >= 0, got nan"),
        (["--chunk", "0"], "--tasks, --chunk and --samples must be >= 1"),
        (["--top-p", "0"], "--top-p must be in (0, 1], got 0.0"),
    ],
)
def test_eval_bad_value_is_one_typed_line(tmp_path, capsys, argv, problem):
    assert main(["eval", *argv, "--out", str(tmp_path / "run")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlvr eval: error: ") and problem in lines[0], lines
    assert not (tmp_path / "run").exists()
