"""Pre-flight checks of a run: everything that can be known to fail before a model loads, checked in
about a second instead of after minutes of loading. `check_run(config)` for `rlvr train`; the
directory checks (`check_out_dir`, `check_model_dir`, `check_tokenizer_dir`) for `rlvr eval` too.

A module of its own, apart from the settings (`trainers.config`): these checks look up the
algorithm (and the preset's combinations with the run's settings, `check_settings`), the
environment, model directories, tokenizers, the device and LoRA targets, and each of those modules
imports `ConfigError` from `trainers.config`; were the checks in `config.py`, the two would import
each other. Here the arrows go one way: preflight -> (algorithms, models, device,
lora, envs) -> config. The heavy ones (torch) are imported inside `check_run`, after the cheap
checks, so that a bad --out fails in a blink."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlvr.errors import RlvrError
from rlvr.trainers.config import ConfigError, TrainConfig

if TYPE_CHECKING:
    from rlvr.trainers.algorithms import AlgoConfig


def check_run(config: TrainConfig) -> AlgoConfig:
    """All checks of a training run, including those that look up the algorithm, the environment and
    the model (all cheap: nothing is loaded). Returns the resolved `AlgoConfig`."""
    config.validate()
    check_out_dir(config.out)  # before the imports below (torch): a bad --out fails in a blink
    from rlvr.trainers.trackers.opening import check_installed

    check_installed(config.report_to)  # --report-to wandb without wandb: one line now, not after loading

    from rlvr.envs import make  # the registry's typed errors: UnknownEnvError, EnvArgumentError
    from rlvr.trainers.algorithms import get_algorithm
    from rlvr.trainers.checkpoint import latest_checkpoint
    from rlvr.trainers.models import resolve_model

    if not config.resume and latest_checkpoint(config.out) is not None:
        raise ConfigError(
            f"{config.out} already holds checkpoints of a run: pass --resume to continue it, or choose another --out"
        )
    try:
        algo = get_algorithm(config.algo, **config.algo_args)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"algorithm {config.algo!r}: {_message(exc)}") from None
    check_settings(algo, config)  # the preset with this run's epochs, minibatches, sampling
    if algo.group_relative and config.group_size < 2:
        raise ConfigError(
            f"{config.algo} compares samples within a group: group_size must be >= 2, got {config.group_size}"
        )
    if algo.needs_value_head and config.value_model == "none":
        raise ConfigError(f"{config.algo} needs values: use value_model 'head' or 'critic', not 'none'")
    try:
        make(config.env, **config.env_args).close()
    except Exception as exc:  # UnknownEnvError / EnvArgumentError / the env's own ValueError
        raise ConfigError(f"environment {config.env!r} with {config.env_args}: {_message(exc)}") from None
    try:
        path = resolve_model(config.model)
    except Exception as exc:  # the models module's typed error; re-raised as a setting error
        raise ConfigError(_message(exc)) from None  # its message names the model already
    check_model_dir(path)
    check_tokenizer_dir(path)
    from rlvr.trainers.device import resolve_device

    resolve_device(config.device)  # a GPU this machine lacks fails now (DeviceError), not after loading
    if config.lora_rank:  # a module name the model lacks fails now, not after loading
        from rlvr.trainers.lora import check_targets

        check_targets(path, config.lora_targets)
    if config.teacher:  # check_settings above: set exactly when the algorithm distills
        check_teacher(config.teacher, path)
    return algo


def check_settings(algo: AlgoConfig, cfg: TrainConfig) -> None:
    """Combinations of the preset with the run's settings that cannot work; `ConfigError`."""
    epochs = cfg.epochs or algo.ppo_epochs
    if algo.loss_type == "pg" and (epochs > 1 or cfg.num_minibatches > 1):
        raise ConfigError(
            f"algorithm {algo.name!r} uses loss_type 'pg' (REINFORCE: no importance ratio, no clip), "
            f"which is only correct on fresh samples: it needs epochs 1 and minibatch_size equal to the "
            f"batch ({cfg.batch_size} episodes), got epochs {epochs} and minibatch_size "
            f"{cfg.minibatch_size or cfg.batch_size}; to reuse samples, set algo_args loss_type: clipped"
        )
    if algo.needs_teacher and not cfg.teacher:
        raise ConfigError(
            f"algorithm {algo.name!r} distills from a teacher: set teacher (--teacher DIR), the model "
            f"directory whose logprobs of the student's tokens are the reward"
        )
    if cfg.teacher and not algo.needs_teacher:
        raise ConfigError(
            f"teacher {cfg.teacher!r} is set, but algorithm {algo.name!r} does not use one: use "
            f"--algo distill (or algo_args advantage: teacher_kl), or leave teacher unset"
        )
    if cfg.decoupled and cfg.top_p < 1:
        raise ConfigError(
            f"old_logprobs 'sampler' (or max_staleness > 0) weights each token by pi_old / pi_sampler, which is "
            f"biased when the sampler draws from a top_p-truncated distribution: use top_p 1 (got {cfg.top_p}) "
            f"or old_logprobs 'recompute' with max_staleness 0"
        )


def task_split(config: TrainConfig):
    """Which tasks the run trains on and which its held-out evaluation visits (`envs.held_out`),
    an environment that cannot be made or split being a `ConfigError`."""
    from rlvr.envs.held_out import HeldOutError, split_tasks

    try:
        return split_tasks(config.env, config.env_args, config.eval_env_args, config.eval_tasks, config.eval_seed_start)
    except HeldOutError:
        raise
    except Exception as exc:  # the registry's typed errors, the env's own ValueError
        raise ConfigError(
            f"the held-out evaluation's environment {config.env!r} with "
            f"{ {**config.env_args, **config.eval_env_args} }: {_message(exc)}"
        ) from None


def check_out_dir(out: str | os.PathLike, flag: str = "--out") -> None:
    """`out` can be created (or is already a directory) and written to, without creating it:
    it is not a file, not under a file, and its nearest existing ancestor is writable."""
    path = Path(out).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {out} is a file, not a directory")
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"{flag} {out} is under {existing}, which is a file, not a directory")
    # access() reports a read-only file system (EROFS) also to root, whom permission bits don't stop
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {out} cannot be written: {existing} is read-only")


WEIGHT_PATTERNS = ("*.safetensors", "*.bin")  # single or sharded; what transformers and vLLM read


def check_model_dir(path: str | os.PathLike) -> None:
    """A model directory that transformers and vLLM can load: config.json is a JSON object and
    weights are there (checked now, so that a bad directory fails before minutes of loading). A
    LoRA adapter directory (a checkpoint of `--lora-rank`) passes when its adapter_config.json names
    a base model that passes and its adapter weights are there."""
    path = Path(path)
    if (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
        _check_adapter_dir(path)
        return
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"model {path}: config.json is not readable JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"model {path}: config.json must hold a JSON object, got {type(config).__name__}")
    if not any(any(path.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        raise ConfigError(f"model {path} has no weights (no *.safetensors or *.bin file)")


TOKENIZER_VOCABULARIES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")


def check_tokenizer_dir(path: str | os.PathLike) -> None:
    """A tokenizer that rlvr can use is in directory `path`: a vocabulary file, its JSON files whole
    (a cut-short tokenizer.json fails here, not as a JSONDecodeError deep in transformers), and a
    chat template (environments speak in chat messages; without one, transformers fails only at
    the first prompt, after the model has loaded)."""
    path = Path(path)
    if not any((path / name).is_file() for name in TOKENIZER_VOCABULARIES):
        raise ConfigError(f"model {path} has no tokenizer (none of {', '.join(TOKENIZER_VOCABULARIES)})")
    parsed: dict[str, Any] = {}
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.json"):
        if (path / name).is_file():
            try:
                parsed[name] = json.loads((path / name).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ConfigError(f"model {path}: {name} is not readable JSON ({exc})") from None
            if not isinstance(parsed[name], dict):
                raise ConfigError(f"model {path}: {name} must hold a JSON object, got {type(parsed[name]).__name__}")
    templates = [parsed.get(name, {}).get("chat_template") for name in ("tokenizer_config.json", "chat_template.json")]
    if not any(templates) and not (path / "chat_template.jinja").is_file():
        raise ConfigError(
            f"model {path} has no chat template (no chat_template.jinja, and no chat_template in "
            "tokenizer_config.json): environments give chat messages, so rlvr needs a chat model's "
            "tokenizer (or add the template to it)"
        )


def _check_adapter_dir(path: Path) -> None:
    from rlvr.trainers.models import adapter_base_dir

    try:
        base = adapter_base_dir(path)
    except RlvrError as exc:  # the models module's typed errors, as a setting error
        raise ConfigError(f"model {path} (a LoRA adapter): {exc}") from None
    check_model_dir(base)
    if not any(any(path.glob(pattern)) for pattern in ("adapter_model.safetensors", "adapter_model.bin")):
        raise ConfigError(f"model {path} (a LoRA adapter) has no adapter weights (adapter_model.safetensors)")


def check_teacher(teacher: str, student: Path) -> None:
    """The teacher is a loadable model directory ("tiny" allowed) that scores the student's token
    ids as the same tokens: the same tokenizer vocabulary (tokenizer.json's, or else the same
    vocab_size), and logits for every id the student can sample (vocab_size at least the
    student's; larger, padded output layers are fine, as between Qwen sizes)."""
    from rlvr.trainers.models import resolve_model

    try:
        path = resolve_model(teacher)
    except Exception as exc:  # the models module's typed error; re-raised as a setting error
        raise ConfigError(f"teacher {teacher!r}: {_message(exc)}") from None
    try:
        check_model_dir(path)
    except ConfigError as exc:
        raise ConfigError(f"teacher: {exc}") from None
    s_vocab, t_vocab = _tokenizer_vocabulary(student), _tokenizer_vocabulary(path)
    s_size, t_size = _vocab_size(student), _vocab_size(path)
    if s_vocab is not None and t_vocab is not None and s_vocab != t_vocab:
        differ = sorted(i for i in set(s_vocab) | set(t_vocab) if s_vocab.get(i) != t_vocab.get(i))
        i = differ[0]
        raise ConfigError(
            f"teacher {teacher!r} has another tokenizer than the student {str(student)!r} ({len(t_vocab)} vs "
            f"{len(s_vocab)} tokens; {len(differ)} ids differ, first id {i}: {t_vocab.get(i)!r} vs "
            f"{s_vocab.get(i)!r}): distillation scores the student's token ids with the teacher, so both need "
            f"the same vocabulary"
        )
    if (s_vocab is None or t_vocab is None) and None not in (s_size, t_size) and s_size != t_size:
        raise ConfigError(
            f"teacher {teacher!r} has vocab_size {t_size}, the student {s_size}: distillation needs "
            f"the same tokenizer vocabulary"
        )
    if None not in (s_size, t_size) and t_size < s_size:
        raise ConfigError(
            f"teacher {teacher!r} has vocab_size {t_size}, less than the student's {s_size}: it "
            f"cannot score every token id the student may sample"
        )


def _vocab_size(path: Path) -> int | None:
    """config.json's vocab_size (the output layer's width), or its text model's; None if absent."""
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    size = config.get("vocab_size", (config.get("text_config") or {}).get("vocab_size"))
    return size if isinstance(size, int) else None


def _tokenizer_vocabulary(path: Path) -> dict[int, str] | None:
    """id -> token of a fast tokenizer's tokenizer.json (its model's vocabulary and its added
    tokens), read as JSON without loading the tokenizer; None when absent or of an unknown form."""
    try:
        data = json.loads((path / "tokenizer.json").read_text(encoding="utf-8"))
        vocab = data["model"]["vocab"]
        if isinstance(vocab, dict):  # BPE, WordPiece, WordLevel: token -> id
            ids = {int(i): str(tok) for tok, i in vocab.items()}
        else:  # Unigram: [[token, score], ...], the id is the position
            ids = {i: str(entry[0]) for i, entry in enumerate(vocab)}
        ids.update({int(t["id"]): str(t["content"]) for t in data.get("added_tokens") or ()})
        return ids
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError):
        return None


def _message(exc: BaseException) -> str:
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
