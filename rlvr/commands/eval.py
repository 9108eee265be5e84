"""`rlvr eval`: sample a model on an environment's tasks and report pass@k.

Writes DIR/episodes.jsonl as it goes (one line per episode) and DIR/summary.json at the end,
and prints the summary as a table. Run it again with the same arguments (--resume is the default,
spelled as for rlvr train) to resume an interrupted run: it ends as the uninterrupted run would have,
episode for episode. A finished run prints its saved table at once, without loading the model. Tasks are
sampled in chunks of --chunk, fixed from the start; a resumed run keeps the chunks written whole
and samples the others again whole (one cut short by the stop, or holding an `error` episode: the
grader failed, e.g. the sandbox was down; their old lines are replaced).
An environment with a fixed list of problems (a dataset, a benchmark) is evaluated on each of them
once, in order: all of them by default, the first --tasks with it, from problem --task-start (0).
Other environments' tasks are the reset seeds `--task-start`, `--task-start + 1`, ... (by default the
held-out seeds the trainer evaluates on), 100 of them by default (`rlvr.envs.eval_tasks`).
Without --out, DIR is a new runs/eval/ENV-YYYYmmdd-HHMMSS (ENV: the id, its `/` and `:` as `_`),
printed at the start and at the end: pass it as --out to resume that run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlvr.commands.eval_config import ALIASES, HELP_EXTRA, EvalConfig
from rlvr.commands.eval_resume import default_chunk, interrupted_line, resuming_line
from rlvr.config_flags import add_flags
from rlvr.errors import RlvrError
from rlvr.extras import require_train
from rlvr.run_lock import run_lock
from rlvr.startup import collector_paused
from rlvr.usage import UsageError  # bad arguments, or an --out that holds another run


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "eval",
        help="evaluate a model on an environment: pass@k, outcomes, speed",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # one flag per EvalConfig field (its shared fields are rlvr train's), holding its default when not given
    add_flags(p, EvalConfig, ALIASES, defaults=True, help_extra=HELP_EXTRA)
    p.set_defaults(func=lambda args: run(EvalConfig.from_args(args)))


def default_out(env_id: str, now: float | None = None) -> str:
    """`runs/eval/<env id>-<YYYYmmdd-HHMMSS>`, the id's `/` and `:` (and anything else that does not
    belong in a folder name) as `_`: `rlvr/Arithmetic-v0` -> `runs/eval/rlvr_Arithmetic-v0-20250101-120000`."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", env_id).strip("._") or "env"
    return os.path.join("runs", "eval", f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}")


def parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        raise UsageError(f"--k must be comma-separated integers, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise UsageError(f"--k values must be >= 1, got {text!r}")
    return ks


def sampler_kind(args: argparse.Namespace) -> str:
    """vllm, hf, openai (token-id completions) or openai-chat (`--api chat`: evaluation only)."""
    kind = args.sampler or ("openai" if args.base_url else "vllm")
    if (kind == "openai") != bool(args.base_url):
        raise UsageError("--base-url goes with --sampler openai, and --sampler openai needs --base-url")
    api = getattr(args, "api", "completions")
    if api != "completions" and kind != "openai":
        raise UsageError(f"--api {api} goes with --base-url")
    if kind == "openai" and api == "completions" and served_tokenizer_source(args) is None:
        raise UsageError(
            f"--base-url with --api completions sends token ids, so it needs the served model's "
            f"tokenizer, and --model {args.model!r} is not a local directory: pass --tokenizer DIR, "
            "or use --api chat"
        )
    return "openai-chat" if api == "chat" else kind


def served_tokenizer_source(args: argparse.Namespace) -> str | None:
    """With --base-url: --tokenizer, else --model when it names a local model ('tiny' or a directory)."""
    if args.tokenizer:
        return args.tokenizer
    from rlvr.trainers.models import TINY

    return args.model if args.model == TINY or os.path.isdir(os.path.expanduser(args.model)) else None


def model_label(args: argparse.Namespace) -> str:
    """The model as recorded in episodes and the summary: its resolved directory, or name @ server."""
    from rlvr.trainers.models import resolve_model

    if args.base_url:  # the chat API's episodes are not token-exact: never pooled with the other's
        return f"{args.model} @ {args.base_url}" + (" (chat)" if sampler_kind(args) == "openai-chat" else "")
    return str(resolve_model(args.model))


def sampler_spec(args: argparse.Namespace) -> Any:
    """The `SamplerSpec` of the evaluated model: the sampler `rlvr train` would build (the same
    factory, `trainers.samplers.factory`), with the engine's defaults for what this command does not set."""
    from rlvr.trainers.models import resolve_model
    from rlvr.trainers.samplers.protocol import SamplerSpec

    kind = sampler_kind(args)
    if kind in ("openai", "openai-chat"):
        return SamplerSpec(
            kind,
            args.model,
            tokenizer=served_tokenizer_source(args),
            base_url=args.base_url,
            api_key=args.api_key or os.environ.get("OPENAI_API_KEY") or None,
        )
    path = str(resolve_model(args.model))  # a LoRA checkpoint: vllm serves its base with the adapter merged
    return SamplerSpec(kind, path, tokenizer=args.tokenizer, seed=args.seed, max_model_len=args.max_model_len)


def build_sampler(args: argparse.Namespace) -> tuple[Any, Any]:
    """(sampler, tokenizer): the tokenizer is the sampler's own (the chat sampler's remembers each
    prompt's messages, so the rollout must template with it)."""
    from rlvr.trainers.samplers.factory import build_sampler as build

    sampler = build(sampler_spec(args))
    return sampler, sampler.tokenizer


def _identity(env_id: str, env_args: dict, model: str, sampling: dict, group_size: int, chunk: int) -> dict[str, Any]:
    """What two runs must share for their episodes to be pooled: the chunk too, as a task's samples
    may depend on the tasks batched with it (`rlvr.envs.episode_log`)."""
    return {
        "env": env_id,
        "env_args": env_args,
        "model": model,
        "sampling": sampling,
        "samples": group_size,
        "chunk": chunk,
    }


def _check_same_run(out: Path, identity: dict[str, Any]) -> None:
    run_file = out / "run.json"
    if run_file.exists():
        previous = json.loads(run_file.read_text())
        current = json.loads(json.dumps(identity))
        if previous != current:
            differ = ", ".join(
                f"{k}: {previous.get(k)!r} there, {current.get(k)!r} here"
                for k in sorted(previous.keys() | current.keys())
                if previous.get(k) != current.get(k)
            )
            raise UsageError(f"{out} holds episodes of another run ({differ}); pass a new --out")
    else:
        run_file.write_text(json.dumps(identity, indent=2))


# The command's errors (UsageError, ConfigError, EnvError, ModelError, ...) become one line in rlvr.cli.
def run(args: EvalConfig) -> int:
    require_train("rlvr eval")  # no torch (`pip install rlvr`, the light core): one line naming the extra
    from rlvr.env_loading import make_env
    from rlvr.envs.eval_tasks import EvalTasksError, plan
    from rlvr.trainers.preflight import check_model_dir, check_out_dir, check_tokenizer_dir

    # The checks that need no heavy import first, so that they fail in a blink.
    ks = parse_ks(args.k)
    group_size = args.samples or ks[-1]
    if group_size < ks[-1]:
        raise UsageError(f"--samples {group_size} is smaller than the largest k ({ks[-1]})")
    from rlvr.envs.eval_sampling import temperature_for

    args.temperature = temperature_for(args.temperature, group_size)  # none asked: greedy for one sample
    out_given = args.out is not None  # else the line a stop ends with names the new folder
    if args.out is None:
        args.out = default_out(args.env)
    check_out_dir(args.out)

    from rlvr.trainers import quiet

    quiet.configure(args.verbose)  # before torch, transformers and vLLM load
    with collector_paused():  # the imports (rlvr.startup); _run_locked uses the envs modules loaded here
        import rlvr.envs.episode_log  # noqa: F401 - loaded now, while the collector is paused
        import rlvr.envs.evaluate  # noqa: F401
        import rlvr.trainers.evaluation  # noqa: F401 - the chunks rlvr eval samples (its rollout)
        from rlvr.envs.sampler import SamplingSettings
        from rlvr.trainers.models import resolve_model

    from rlvr.trainers.run_folder import resolved

    if args.base_url is None:  # a run folder: its last checkpoint, named in one line (trainers.run_folder)
        args.model, line = resolved(args.model, "--model")
        if line is not None:
            print(line, flush=True)
    env_args = args.env_args
    env = make_env(args.env, env_args)  # a bad id, module or argument fails now, before the model loads
    try:
        tasks = plan(env, args.tasks, args.task_start)  # every listed problem once, or reset seeds
    except EvalTasksError as e:
        raise UsageError(f"--task-start {args.task_start}: {e}") from None
    finally:
        env.close()
    try:
        sampling = SamplingSettings(
            temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens, seed=args.seed
        )
    except ValueError as e:
        raise UsageError(str(e)) from None

    kind, model = sampler_kind(args), model_label(args)
    if not kind.startswith("openai"):
        check_model_dir(resolve_model(args.model))
    if kind != "openai-chat":  # the prompts are templated here: a tokenizer with a chat template
        check_tokenizer_dir(resolve_model(args.tokenizer or served_tokenizer_source(args) or args.model))
    out = Path(args.out)
    with run_lock(out, "rlvr eval"):  # one run per --out: a second ends at once, naming this one
        if args.chunk is None:  # the --out run's, else sized to the tasks (rlvr.commands.eval_resume)
            args.chunk = default_chunk(tasks.count, out)
        return _run_locked(args, out, ks, group_size, env_args, sampling, kind, model, tasks, out_given)


def _run_locked(
    args, out: Path, ks: list[int], group_size: int, env_args: dict, sampling, kind: str, model: str, tasks, out_given
) -> int:
    """The evaluation proper, holding the lock on `out`."""
    from tqdm.auto import tqdm

    from rlvr.envs.episode_log import append_records, chunk_bounds, load_whole_chunks, sort_by_group
    from rlvr.envs.evaluate import format_table
    from rlvr.trainers.evaluation import rollout_chunk

    print(f"results go to {out}/ (episodes.jsonl as it goes, summary.json at the end)", flush=True)
    if tasks.note:
        print(tasks.note, flush=True)
    log = out / "episodes.jsonl"
    sampling_dict = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "seed": args.seed,
        "task_start": tasks.start,
    }
    if not args.resume and (out / "run.json").exists():
        raise UsageError(f"{out} already holds an evaluation: drop --no-resume to continue it, or pass a new --out")
    rerun = (out / "run.json").exists()
    with _writing(out):
        identity = _identity(args.env, env_args, model, sampling_dict, group_size, args.chunk)
        if tasks.listed:  # by problem, from the env's list (never pooled with a run that drew by seed)
            identity["problems"] = len(tasks.problems)
        _check_same_run(out, identity)
        # Resume by whole chunks, each sampled again as the uninterrupted run samples it (the module's docstring)
        records, todo = load_whole_chunks(log, chunk_bounds(tasks.count, args.chunk), group_size)
    left = sum(b - a for a, b in todo)  # tasks still to sample
    if rerun:
        print(resuming_line(tasks.count - left, tasks.count, args.chunk, log), flush=True)
    if not todo:  # every task is in the log already: the summary needs no model (no engine start-up)
        return _finished(args, out, log, records, ks, group_size, env_args, kind, model, sampling_dict, tasks)
    try:
        with collector_paused():  # the model and the engine, apart: the engine's own collections skip the imports
            sampler, tokenizer = build_sampler(args)
    except KeyboardInterrupt:  # while the model loads
        raise KeyboardInterrupt(interrupted_line(tasks.count - left, tasks.count, args.chunk, out, out_given)) from None

    tokens, seconds = 0, 0.0
    sampled: list = []  # this run's episodes: all of them errors means the environment cannot work
    try:
        with tqdm(
            total=tasks.count,
            initial=tasks.count - sum(b - a for a, b in todo),
            disable=not args.progress,
            desc="tasks",
            unit="task",
        ) as bar:
            for chunk in todo:
                t0 = time.perf_counter()
                groups = rollout_chunk(
                    args.env, env_args, sampler, tokenizer, tasks, chunk, group_size, sampling, model
                )
                seconds += time.perf_counter() - t0
                new = [ep for g in groups for ep in g.episodes]
                tokens += sum(sum(ep.loss_mask) for ep in new)
                with _writing(out):
                    append_records(log, [_record(ep, tokenizer, chunk) for ep in new])
                records += [ep.to_dict() for ep in new]
                bar.update(chunk[1] - chunk[0])
                sampled += new
                _stop_if_only_errors(sampled, log)
    except KeyboardInterrupt:  # Ctrl-C: rlvr.cli prints this line, exit 130. What is kept: what the log holds whole
        _, todo = load_whole_chunks(log, chunk_bounds(tasks.count, args.chunk), group_size)
        kept = tasks.count - sum(b - a for a, b in todo)
        raise KeyboardInterrupt(interrupted_line(kept, tasks.count, args.chunk, out, out_given)) from None
    finally:
        sampler.close()  # every backend has close (trainers.samplers.protocol.SamplerBackend)

    with _writing(out):
        sort_by_group(log)  # a chunk sampled again after later ones: where the uninterrupted run has it
    summary = _summary(args, records, ks, group_size, env_args, kind, model, sampling_dict, tasks, seconds, tokens)
    with _writing(out):
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(format_table(summary))
    print(f"results in {out}/summary.json, episodes in {log}")
    return 0


# What only the run that sampled the episodes knows: its speed. A rerun keeps the saved figures.
_SPEED = ("tokens", "seconds", "tokens_per_second")


def _summary(
    args, records, ks, group_size, env_args, kind, model, sampling_dict, tasks, seconds=None, tokens=None
) -> dict:
    """summary.json of these records, in task order as the uninterrupted run has them (the
    bootstrap's intervals follow the order); the speed only when this run sampled something; for an
    environment with a list, how many problems it lists (the table's "164 of 164 problems")."""
    from rlvr.envs.episode_log import episode_from_record
    from rlvr.envs.evaluate import summarize

    episodes = [episode_from_record(r) for r in sorted(records, key=lambda r: int(r["group_id"]))]
    return summarize(
        episodes,
        ks,
        env_id=args.env,
        env_args=env_args,
        model=model,
        seconds=seconds,
        tokens=tokens,
        seed=args.seed,
        sampler=kind,
        samples_per_task=group_size,
        sampling=sampling_dict,
        **({"problems": len(tasks.problems)} if tasks.listed else {}),
    )


def _finished(args, out: Path, log: Path, records, ks, group_size, env_args, kind, model, sampling_dict, tasks) -> int:
    """Every chunk of the run is in the log whole: print the summary without building the sampler.
    The saved summary.json when it is this summary (then with the speed of the run that sampled);
    otherwise (e.g. other --k, or fewer --tasks than the log holds) the summary of these episodes,
    written, without a speed."""
    from rlvr.envs.evaluate import format_table

    summary = json.loads(
        json.dumps(_summary(args, records, ks, group_size, env_args, kind, model, sampling_dict, tasks))
    )
    saved_file = out / "summary.json"
    try:
        saved = json.loads(saved_file.read_text())
    except (OSError, ValueError):
        saved = None
    same = isinstance(saved, dict) and {k: v for k, v in saved.items() if k not in _SPEED} == {
        k: v for k, v in summary.items() if k not in _SPEED
    }
    if same:
        print(f"this evaluation is complete: its saved result ({saved_file}), no model loaded", flush=True)
        summary = saved
    else:
        print(f"every task is in {log} already: its summary, no model loaded", flush=True)
        with _writing(out):
            saved_file.write_text(json.dumps(summary, indent=2))
    print(format_table(summary))
    print(f"results in {saved_file}, episodes in {log}")
    return 0


class OutputError(RlvrError, OSError):
    """--out could not be written (a full disk, a quota, a file-size limit)."""


@contextlib.contextmanager
def _writing(out: Path) -> Iterator[None]:
    """A write into `out` that fails (ENOSPC, EDQUOT, EFBIG, EIO, ...) ends the run with one line: the
    lines written before are whole (append_records writes whole lines; a torn last one is dropped on
    resume), so the run resumes once there is room."""
    try:
        yield
    except OSError as exc:
        raise OutputError(
            f"could not write to {out}: {exc.strerror or exc} ({getattr(exc, 'filename', None) or out}); "
            "the episodes written so far are kept: run again with the same --out, once there is room, "
            "to resume"
        ) from None


def _stop_if_only_errors(episodes: list, log: Path) -> None:
    """Every episode sampled so far (a chunk or more) is an `error`: the environment or its grader
    cannot work, and the rest would fail alike. Stop with the first error; the tasks are sampled
    again when the run is resumed (`load_whole_chunks`)."""
    from rlvr.trainers.outage import NothingProduced, all_errors, error_message

    if all_errors(episodes):
        raise NothingProduced(
            f"every one of the {len(episodes)} episodes sampled was an error, so there is nothing "
            f"to score. The first: {error_message(episodes[0])} (episodes in {log}; run again "
            "with the same --out once fixed: error tasks are sampled again)"
        )


def _record(ep, tokenizer, chunk: tuple[int, int]) -> dict[str, Any]:
    """An episode line: readable prompt and completion text first, then the exact episode and the
    chunk it was sampled in (a resume keeps it only as part of that chunk)."""
    from rlvr.envs.episode_log import CHUNK

    return {
        "prompt": tokenizer.decode(ep.prompt_ids),
        "completion": tokenizer.decode(ep.completion_ids),
        **ep.to_dict(),
        CHUNK: list(chunk),
    }
