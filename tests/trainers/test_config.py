"""`TrainConfig`: YAML plus overrides, and bad settings failing at start with a clear message,
before any model is loaded (each check here returns in well under a second)."""

from __future__ import annotations

import pytest

from rlvr.cli import main
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.preflight import check_run


def test_defaults_are_the_main_job():
    cfg = TrainConfig()
    assert (cfg.model, cfg.env, cfg.algo, cfg.sampler) == ("tiny", "rlvr/Arithmetic-v0", "grpo", "vllm")
    assert cfg.batch_size == cfg.tasks_per_step * cfg.group_size


def test_yaml_then_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        "algo: rloo\nsteps: 7\nlr: 1e-4\nenv_args: {difficulty: 1}\nalgo_args: {kl_coef: 0}\nadam_betas: [0.9, 0.95]\n"
    )
    cfg = TrainConfig.load(path, {"steps": 9, "env_args": {"render_mode": None}})
    assert (cfg.algo, cfg.steps, cfg.lr) == ("rloo", 9, 1e-4)  # the flag wins over the file
    assert cfg.env_args == {"difficulty": 1, "render_mode": None}  # mappings merge
    assert cfg.adam_betas == (0.9, 0.95) and cfg.algo_args == {"kl_coef": 0}
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg  # round trip (what checkpoints store)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"stepz": 3}, r"unknown setting\(s\) stepz; known: .*steps"),
        ({"steps": "many"}, "steps must be int"),
        ({"steps": 0}, "steps must be >= 1"),
        ({"tasks_per_step": 4, "group_size": 6, "minibatch_size": 5}, "minibatch_size 5 must divide .* 24 episodes"),
        ({"minibatch_size": 8, "micro_batch_size": 3}, "micro_batch_size 3 must divide minibatch_size 8"),
        ({"sampler": "tgi"}, "sampler must be one of vllm, hf"),
        ({"old_logprobs": "guess"}, "old_logprobs must be one of auto, recompute, sampler"),
        ({"max_staleness": -1}, "max_staleness must be >= 0"),
        ({"max_staleness": 1, "old_logprobs": "recompute"}, "needs the decoupled objective"),
        ({"max_staleness": 1, "sampler": "hf"}, "needs the vllm sampler"),
        ({"lr": 0}, "lr must be > 0"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"adam_betas": [0.9]}, "adam_betas must be two numbers"),
    ],
)
def test_settings_errors(values, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_dict(values)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"algo": "grpoo"}, r"unknown algorithm 'grpoo'; known: .*grpo.*ppo.*reinforce.*rloo"),
        ({"algo_args": {"clip_eps": 0.1}}, r"unknown AlgoConfig field\(s\) clip_eps"),
        ({"algo": "ppo", "value_model": "none"}, "ppo needs values: use value_model 'head' or 'critic'"),
        ({"algo": "grpo", "group_size": 1}, "group_size must be >= 2"),
        ({"algo": "rloo", "group_size": 1}, "group_size must be >= 2"),
        ({"model": "/nonexistent/model"}, "not 'tiny' and not a local directory"),
        ({"env": "rlvr/Arithmetc-v0"}, "unknown environment .*Did you mean 'rlvr/Arithmetic-v0'"),
        ({"env_args": {"difficulty": 9}}, "difficulty must be 1..5"),
        ({"env_args": {"level": 2}}, "unexpected keyword argument.*level.*accepts: difficulty"),
    ],
)
def test_checks_that_look_things_up(values, message):
    cfg = TrainConfig.from_dict(values)
    with pytest.raises(ConfigError, match=message):
        check_run(cfg)


def test_settings_are_checked_before_the_model():
    """A bad algorithm is reported even when the model is missing too: nothing was loaded first."""
    with pytest.raises(ConfigError, match="unknown algorithm"):
        check_run(TrainConfig.from_dict({"algo": "nope", "model": "/nonexistent"}))


def test_reinforce_with_group_size_one_is_fine():
    assert check_run(TrainConfig.from_dict({"algo": "reinforce", "group_size": 1})).name == "reinforce"


def test_cli_fails_at_start_with_a_clear_message(capsys, tmp_path):
    rc = main(["train", "--algo", "nope", "--device", "cpu", "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "unknown algorithm 'nope'" in err and "grpo" in err
    rc = main(["train", "--algo", "ppo", "--value-model", "none", "--device", "cpu", "--out", str(tmp_path)])
    assert rc == 2 and "needs values" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was started


def test_cli_reads_yaml_and_flags(capsys, tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("algo: rloo\nsteps: 3\ngroup_size: 4\n")
    rc = main(
        [
            "train",
            "--config",
            str(path),
            "--steps",
            "5",
            "--env-arg",
            "difficulty=1",
            "--algo-arg",
            "kl_coef=0",
            "--set",
            "keep_last=3",
            "--check",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert '"steps": 5' in out and '"algo": "rloo"' in out and '"difficulty": 1' in out and '"keep_last": 3' in out
