"""`EvalConfig`: every setting of `rlvr eval`, from which its flags are generated (`rlvr.config_flags`,
as `rlvr train`'s from `TrainConfig`). What both commands set (the model, the environment, sampling,
the seed, progress and verbosity) is `trainers.config.CommonSettings`, declared once for both: the
same name, default and description, so the two commands cannot drift apart.

Differences from `rlvr train`, each on purpose: `sampler` adds `openai` (a served model) and has no
fixed default (vllm, or openai with --base-url); `temperature` may be 0 (greedy evaluation), and by
default is 0 for one sample per task and 1.0 for several (`rlvr.envs.eval_sampling`);
`out` has no default folder (a new, dated one: `rlvr.commands.eval.default_out`); `resume` is on by
default: an evaluation's episodes are its whole state, so rerunning the command continues it (a
finished one only prints its table) with no flag to forget, and `--resume` is accepted as the
spelling users know from `rlvr train`; `--no-resume` asks for a fresh run and refuses an --out that
holds episodes (train's default refusal, where a second run would overwrite checkpoints). A bad value is a
`UsageError` naming the flag: one line and exit code 2."""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass

from rlvr.config_flags import given_values
from rlvr.envs.seeds import HELD_OUT_SEED_START
from rlvr.trainers.config import CommonSettings, setting
from rlvr.trainers.samplers.registry import SAMPLER_CHOICES
from rlvr.usage import UsageError

SAMPLERS = SAMPLER_CHOICES  # vllm, hf, openai: the registry's (openai-chat is --api chat)
APIS = ("completions", "chat")
ALIASES = {"env_args": ["--env-arg"]}  # the option string the flag had before it was generated
# A command's own sentence after a shared field's description in --help.
HELP_EXTRA = {"model": "with --base-url, the name the server serves"}


@dataclass
class EvalConfig(CommonSettings):
    tasks: int | None = setting(
        None,
        "number of tasks; none: every problem of an environment with a fixed list of them (a "
        "dataset, a benchmark: each once, in order), else 100",
    )
    k: str = setting("1", "comma-separated k for pass@k")
    samples: int | None = setting(None, "samples per task; none: the largest k")
    sampler: str | None = setting(
        None, "vllm, hf, or openai (implied by --base-url); none: vllm, or openai with --base-url", choices=SAMPLERS
    )
    base_url: str | None = setting(
        None,
        "evaluate a served model: an OpenAI-compatible server, e.g. "
        "http://127.0.0.1:8000/v1 (--model is then the name it serves). With --api "
        "completions (the default) prompts are sent as token ids to /v1/completions, "
        "which needs a server that takes them (vLLM does) and the model's tokenizer here; "
        "--api chat works with any chat server",
    )
    api: str = setting(
        "completions",
        "with --base-url: 'completions': token ids in and out of /v1/completions, "
        "token-exact with vLLM; 'chat': messages to /v1/chat/completions, text back, logprobs when "
        "the server gives them. Chat samples' token ids are the text re-tokenized here, NOT the "
        "model's own tokens: for evaluation only, never training",
        choices=APIS,
    )
    api_key: str | None = setting(None, "bearer token for --base-url; none: $OPENAI_API_KEY, if set")
    tokenizer: str | None = setting(
        None,
        "with --base-url, the served model's tokenizer directory; none: --model "
        "when it is 'tiny' or a local directory. The completions API needs one; --api "
        "chat without one counts UTF-8 bytes as tokens",
    )
    out: str | None = setting(
        None, "output directory; run again with the same --out to resume; none: a new runs/eval/<env>-<YYYYmmdd-HHMMSS>"
    )
    resume: bool = setting(
        True,
        "continue the run that --out holds (the chunks it holds whole are kept; a finished run prints its "
        "table at once); an --out holding no run starts fresh, as with rlvr train --resume. "
        "--no-resume: refuse an --out that already holds episodes",
    )
    task_start: int | None = setting(
        None,
        "first task: for an environment with a fixed list of problems, the index of the first one "
        "(none: 0); otherwise the first reset seed, the tasks being the seeds task_start, task_start + 1, "
        f"... (none: {HELD_OUT_SEED_START:_}, the held-out seeds rlvr train evaluates on)",
    )
    chunk: int | None = setting(
        None,
        "tasks per rollout call: the unit of resuming (a stop keeps whole chunks), fixed for the life of --out; "
        "none: the --out run's, else 32, or a quarter of the tasks when that is fewer",
    )
    max_model_len: int | None = setting(None, "vLLM context length; none: the model's")
    # Not CommonSettings' 1.0: the default follows the samples asked for (rlvr.envs.eval_sampling)
    temperature: float | None = setting(
        None,
        "sampling temperature; none: 0 (greedy) with one sample per task (pass@1, as benchmarks report it), "
        "else 1.0 (pass@k needs samples that differ)",
    )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EvalConfig:
        """The settings of a parsed `rlvr eval` command line (`add_flags(..., defaults=True)`), checked."""
        config = cls(**given_values(args, cls, ALIASES))
        config.validate()
        return config

    def validate(self) -> None:
        """What needs no file and no model: choices, and numbers in range (nan and inf included)."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if "choices" in f.metadata and value is not None and value not in f.metadata["choices"]:
                raise UsageError(
                    f"--{f.name.replace('_', '-')} must be one of {', '.join(f.metadata['choices'])}; got {value!r}"
                )
        if (
            (self.tasks is not None and self.tasks < 1)
            or (self.chunk is not None and self.chunk < 1)
            or (self.samples is not None and self.samples < 1)
        ):
            raise UsageError("--tasks, --chunk and --samples must be >= 1")
        if (
            self.task_start is not None and self.task_start < 0
        ):  # task seeds are reset seeds, which Gymnasium wants >= 0
            raise UsageError(f"--task-start must be >= 0, got {self.task_start}")
        if self.max_tokens < 1 or (self.max_model_len is not None and self.max_model_len < 1):
            raise UsageError("--max-tokens and --max-model-len must be >= 1")
        if self.temperature is not None and not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise UsageError(f"--temperature must be a finite number >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise UsageError(f"--top-p must be in (0, 1], got {self.top_p}")
