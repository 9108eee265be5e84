"""The training loop: one function per phase of a step.

    rollout -> filter -> old/reference logprobs (+ the sampler/trainer gap) -> values
      -> advantages -> update (epochs x minibatches x micro-batches) -> sync -> log -> checkpoint

Before any optimizer step, the step's tokens show that the sampler held the trained weights (their
policy versions, and the sampler/trainer logprob gap under its bound), or the run stops with
`WeightSyncError` (`trainers.weight_sync`): a sync that failed silently is never trained on.

With `max_staleness` K > 0 (asynchronous RL) the rollout phase runs ahead in a producer thread
(`trainers.producer`), at most K updates ahead, and the sync stages the weights for it to load
between two engine steps; the loss then corrects for the stale samples (decoupled PPO).

The `Trainer` holds the policy, the optional frozen reference model, the optional value head or
separate critic, the optimizer, the scheduler and the sampler. With the vLLM sampler the new
weights are pushed into the engine in place after each step; the HF sampler shares the policy
object, so its sync is free. Dropout stays off (`eval()` mode) throughout: the importance
ratios must compare the policy with itself, not with a randomly thinned copy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlvr.envs.episode import TruncationReason
from rlvr.envs.eval_tasks import EvalTasks
from rlvr.envs.evaluate import context_cut_warning
from rlvr.envs.held_out import TaskSplit
from rlvr.envs.rollout import RolloutRequest
from rlvr.envs.sampler import SamplingSettings
from rlvr.envs.seeds import SEED_SPACE
from rlvr.trainers import checkpoint as ckpt
from rlvr.trainers.algorithms import AlgoConfig, check_settings, filter_loss_mask, keep_groups, resolve, shape_rewards
from rlvr.trainers.batch import collate, is_truncated
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.data_parallel import TrainerRankError
from rlvr.trainers.device import model_device
from rlvr.trainers.flops import flop_meter, row_lengths
from rlvr.trainers.interrupt import Aborted, InterruptGuard, TrainingInterrupted, interrupted_line
from rlvr.trainers.memory_plan import memory_safe
from rlvr.trainers.metrics import MetricsLogger, read_jsonl, update_counts
from rlvr.trainers.model_set import Models, build_models
from rlvr.trainers.optimizer import build_optimizer
from rlvr.trainers.outage import ErrorStreak, NothingProduced, all_errors, error_message
from rlvr.trainers.peak_memory import memory_metrics
from rlvr.trainers.phases import (
    PreUpdateSums,
    StepTensors,
    compute_advantages,
    old_and_ref_logprobs,
    per_micro_batch,
)
from rlvr.trainers.policy import forward
from rlvr.trainers.preflight import check_run, task_split
from rlvr.trainers.producer import ProducerError, RolloutProducer
from rlvr.trainers.ray_trainer import start_trainer_ranks
from rlvr.trainers.rollout_correction import staleness_stats
from rlvr.trainers.samplers.protocol import TrainerSampler
from rlvr.trainers.samplers.registry import backend
from rlvr.trainers.samplers.sizing import max_model_len
from rlvr.trainers.samplers.training import start_sampler
from rlvr.trainers.samples import samples_of, special_token_stripper
from rlvr.trainers.update import run_update
from rlvr.trainers.weight_sync import SyncCheck, WeightSyncError, sync_gap
from rlvr.trainers.zero_signal import SignalStreak, no_signal
from rlvr.verifiers.verdict import Outcome


@dataclass
class Rollout:
    """What one step sampled: the episodes kept for training plus counts for the metrics."""

    episodes: list
    all_episodes: list  # of every round
    errors: int
    groups_total: int  # the groups a step asks for: the first round's (tasks_per_step)
    groups_kept: int  # the groups trained on (at most groups_total)
    seconds_sampling: float
    seconds_scoring: float
    rounds: int = 1  # sampling rounds: 1 + the refills of dynamic sampling
    groups_sampled: int = 0  # over all rounds


def collect_groups(sample_round, keep, target: int, max_extra_rounds: int) -> tuple[list[list], list, int]:
    """Sample rounds of groups until `target` groups are kept, at most `1 + max_extra_rounds`
    rounds (DAPO's dynamic sampling, refilled as in its paper and verl's recipe: a shrunken batch
    would weigh the remaining groups differently from step to step). `sample_round(r)` returns
    round r's groups, each a list of episodes; `keep(groups)` returns those to train on, in order.
    Returns the first `target` kept groups, every episode sampled, and the number of rounds."""
    kept: list[list] = []
    every: list = []
    rounds = 0
    while rounds <= max_extra_rounds and len(kept) < target:
        groups = sample_round(rounds)
        rounds += 1
        every += [ep for g in groups for ep in g]
        kept += keep(groups)
    return kept[:target], every, rounds


class Trainer:
    """`overlap`: sample the next steps in a producer thread while training (asynchronous RL,
    `trainers.producer`); None: when `max_staleness` > 0. At max_staleness 0 the producer waits
    for each update, so `overlap=True` then gives the synchronous loop's numbers (a test checks)."""

    def __init__(
        self,
        config: TrainConfig,
        algo: AlgoConfig | None = None,
        overlap: bool | None = None,
        tasks: TaskSplit | None = None,
    ):
        self.config = config
        # which tasks train and which evaluate, never the same (envs.held_out); rlvr train plans it for its start line
        self.tasks = tasks if tasks is not None else task_split(config)
        self.overlap = config.max_staleness > 0 if overlap is None else overlap
        self.algo = resolve(algo if algo is not None else check_run(config), config.max_tokens)
        check_settings(self.algo, config)
        # on CUDA, micro-batches bounded by tokens unless the config sizes them (trainers.memory_plan)
        config = self.config = memory_safe(config, self.algo)
        if config.threads:
            torch.set_num_threads(config.threads)
        self.out = Path(config.out)
        self.step = 0
        # Updates done: the policy version the sampler holds. Not `step`: a step that trains on
        # nothing (every episode an error, every group filtered) leaves the weights as they were.
        self.version = 0
        resume_from = self._resume_point()
        if resume_from is None:
            _seed_everything(config.seed)
        self.models: Models = build_models(config, self.algo.needs_reference, self.algo.needs_value_head, resume_from)
        self.policy = self.models.policy
        # every step shows that the sampler holds the trained weights, or the run stops (trainers.weight_sync)
        self.sync_check = SyncCheck.from_config(config, self.models.lora)
        self.optimizer = build_optimizer(config, self.models)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        if resume_from is not None:
            self._restore(resume_from)
            print(f"resuming from {resume_from} (step {self.step})", file=sys.stderr)
        if self.overlap and not backend(config.sampler).overlaps:
            raise ConfigError(
                f"overlapped sampling needs a sampler that loads weights between engine steps "
                f"(vllm), got {config.sampler!r}"
            )
        # here or on the Ray rollout workers, holding the policy as `version` (the updates done)
        self.sampler: TrainerSampler = start_sampler(config, self.models, resume_from, self.version)
        # data-parallel ranks 1 .. N-1 (this process is rank 0), holding its weights and optimizer state
        self.ranks = start_trainer_ranks(config, self.algo, self.models, self.optimizer, resume_from)
        self.flops = flop_meter(self.models, self.algo, config)  # `mfu`, `tflops`: CUDA only (trainers.flops)
        self.producer: RolloutProducer | None = None
        self._saved_step = self.step  # the step of the last checkpoint (resumed from, or saved)
        self.logger: MetricsLogger | None = None
        self._warned_context = False  # the context-cut warning is given once per run
        self.interrupts = InterruptGuard()  # Ctrl-C waits while a step changes the weights (trainers.interrupt)

    # ---- the run ---------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Run steps until `config.steps`; returns a summary (held-out accuracy before/after if asked)."""
        cfg = self.config
        self.logger = MetricsLogger(
            self.out,
            cfg.steps,
            start_step=self.step,
            progress=cfg.progress,
            log_every=cfg.log_every,
            report_to=cfg.report_to,
            config=cfg.to_dict(),
            verbose=cfg.verbose,
        )
        summary: dict[str, Any] = {"start_step": self.step}
        streak = ErrorStreak(cfg.max_error_steps)  # steps in a row whose every episode was an error
        flat = SignalStreak()  # steps in a row without reward variance: one warning per streak (trainers.zero_signal)
        try:
            if cfg.eval_tasks and self.step == 0:
                summary["eval_before"] = self.evaluate_and_log(step=0)
            elif cfg.eval_tasks:  # resumed: the run's first evaluation, as logged
                before = self.logger.first_eval()
                if before is not None and before.get("tasks") == self.tasks.evaluate.count:
                    summary["eval_before"] = before
            started = time.monotonic()
            if self.overlap:
                self._start_producer()
            while self.step < cfg.steps:
                sampled_by = self.version  # the policy the sampler holds for this step (synchronous sampling)
                metrics, episodes = self._train_step_saving_on_failure()
                self.step += 1
                out_of_time = cfg.time_limit is not None and time.monotonic() - started > cfg.time_limit
                last = self.step == cfg.steps or out_of_time
                if cfg.eval_every and self.step % cfg.eval_every == 0 and not last:
                    with self._engine():
                        metrics["eval_accuracy"] = self.evaluate_and_log(self.step)["accuracy"]
                metrics["time_elapsed"] = time.monotonic() - started
                self.logger.log(self.step, metrics)
                if cfg.sample_every and self.step % cfg.sample_every == 0:
                    self._log_samples(episodes, sampled_by)
                self._note_errors(streak, episodes)  # stops the run at max_error_steps steps of errors alone
                self._warn(flat.observe(self.step, bool(metrics["zero_signal"])))
                if self.step % cfg.save_every == 0 or last:
                    self.save()
                if self.producer is not None:
                    self.producer.advance(self.step)  # the producer may now sample step + max_staleness
                self.interrupts.release()  # the step is whole (logged, saved if due): a Ctrl-C held stops here
                if out_of_time:
                    summary["stopped"] = f"time limit of {cfg.time_limit:g} s reached"
                    break
            self._stop_producer()
            self._warn(streak.end())
            if cfg.eval_tasks:
                summary["eval_after"] = self.evaluate_and_log(self.step)
            summary["reward_png"] = str(self.logger.plot())
        except KeyboardInterrupt as exc:
            raise self._interrupted(exc) from None
        finally:
            self.interrupts.release(raise_pending=False)
            self._stop_producer()
            self.logger.close()
        summary["steps"] = self.step
        summary.update(update_counts(read_jsonl(self.logger.metrics_path)))
        summary["memory"] = memory_metrics(model_device(self.models.policy))  # the run's peak, evaluations included
        latest = ckpt.latest_checkpoint(self.out)
        summary["checkpoint"] = None if latest is None else str(latest)
        return summary

    def close(self) -> None:
        """End the sampler (its engine, or the Ray workers) and the data-parallel ranks now rather
        than at exit: a notebook or a test session goes on."""
        for part in (self.ranks, self.sampler):
            if part is not None:
                part.close()

    # ---- overlapped sampling (asynchronous RL) ---------------------------------------------------
    def _start_producer(self) -> None:
        threads = torch.get_num_threads()

        def produce(step: int) -> Rollout:
            # A new thread starts with OpenMP's default thread count, and vLLM-CPU's attention
            # refuses to run with another count than the one its engine was built with.
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)
            return self.rollout(step)

        self.producer = RolloutProducer(
            produce, self.step, self.config.steps, self.config.max_staleness, version=self.step
        )
        self.sampler.start_producing(self.producer.in_own_thread_and_stopping)

    def _stop_producer(self) -> None:
        """Stop the producer (a rollout in progress ends at its next engine step) and drop what it
        sampled ahead: the engine is the trainer's again."""
        if self.producer is not None:
            self.producer.close()
            self.producer = None
            self.sampler.stop_producing()  # a rollout stopped part-way leaves none of its requests

    def _engine(self):
        """A context in which this thread may drive the engine (the producer is paused)."""
        return self.producer.paused() if self.producer is not None else contextlib.nullcontext()

    def _interrupted(self, exc: KeyboardInterrupt) -> TrainingInterrupted:
        """Ctrl-C: save the last finished step (unless a second Ctrl-C aborted a half-done one), and
        the line naming how to continue. A Ctrl-C during this save aborts it (the save is atomic)."""
        self.interrupts.release(raise_pending=False)  # a second Ctrl-C now interrupts the save
        self._stop_producer()
        aborted = isinstance(exc, Aborted)
        saved = None
        if not aborted and self.step and self._saved_step != self.step:
            saved = self.save()
        elif self.step or self.config.resume:
            saved = ckpt.latest_checkpoint(self.out)
        return TrainingInterrupted(interrupted_line(self.step, saved, aborted))

    def _note_errors(self, streak: ErrorStreak, episodes: list) -> None:
        """Count the steps in a row whose every episode was an error (`trainers.outage`): warn when
        such an outage ends, stop the run at `max_error_steps` of them, first saving what was
        trained (the skipped steps changed nothing), so that the run resumes once the cause is fixed."""
        try:
            self._warn(streak.observe(self.step, episodes))
        except NothingProduced:
            if self.version and self._saved_step != self.step:
                self.save()
            raise

    def _log_samples(self, episodes: list, version: int) -> None:
        """The step's best and worst completion of one group (`trainers.samples`): to samples.jsonl,
        the trackers and the console."""
        tokenizer = self.models.tokenizer
        chosen = samples_of(self.step, episodes, tokenizer.decode, version)
        self.logger.log_samples(self.step, chosen, special_token_stripper(tokenizer))

    def _warn(self, text: str | None) -> None:
        if text is None:
            return
        if self.logger is not None:
            self.logger.write(text)
        else:
            print(text, file=sys.stderr)

    def _train_step_saving_on_failure(self) -> tuple[dict[str, Any], list]:
        """`train_step` and every episode it sampled; when the producer failed, or the sampler was
        found not to hold the trained weights (before this step trained), first save the last
        finished step, to resume from."""
        try:
            return self.step_with_episodes()
        except (ProducerError, WeightSyncError):
            if self.step and self._saved_step != self.step:
                self.save()
            raise

    def train_step(self) -> dict[str, Any]:
        """One step: its metrics."""
        metrics = self.step_with_episodes()[0]
        self.interrupts.release()  # a Ctrl-C held during the update is raised now, the step done
        return metrics

    def step_with_episodes(self) -> tuple[dict[str, Any], list]:
        """One step: its metrics, and every episode it sampled (errors included)."""
        started = time.perf_counter()
        if self.producer is not None:
            rollout = self.producer.get(self.step)
            waited = time.perf_counter() - started  # for the producer: how far sampling is behind training
            metrics = {**self.rollout_metrics(rollout), "time_waiting": waited}
        else:
            rollout = self.rollout(self.step)
            metrics = self.rollout_metrics(rollout)
        self._warn_context_cuts(rollout.all_episodes)
        tensors = None
        flat = False  # no reward variance in any group
        if rollout.episodes:
            t0 = time.perf_counter()
            tensors = self.prepare(rollout)
            metrics.update(tensors.stats)
            b = tensors.batch
            flat = no_signal(self.algo, b.rewards, b.group_ids, tensors.advantages, b.loss_mask)
            if flat and self.config.skip_zero_signal:
                metrics.update(self._check_without_update(tensors))
                tensors = None  # no optimizer step: Adam would turn the float-noise gradient into a full step
        # every episode an error: not a lack of signal (trainers.outage says so); else nothing left to learn from
        metrics["zero_signal"] = int(flat or (tensors is None and rollout.errors < metrics["episodes"]))
        if tensors is not None:
            self.interrupts.hold()  # the weights change from here: Ctrl-C waits for the step's end (train)
            metrics.update(self.update(tensors))
            self.scheduler.step()  # the schedule counts optimizer updates: a skipped step does not advance it
            metrics["time_training"] = time.perf_counter() - t0
            if self.flops is not None:
                metrics.update(self.flops.metrics(row_lengths(tensors.batch.attention_mask), metrics["time_training"]))
            self.version += 1
            metrics["time_syncing"] = self.sync(self.version)
        else:  # every group was dropped (errors, or no signal under dynamic sampling), or no signal
            metrics.update(skipped=1, optimizer_steps=0, time_training=0.0, time_syncing=0.0)
        elapsed = time.perf_counter() - started
        metrics["time_step"] = elapsed
        metrics["tokens_per_second"] = metrics["tokens_generated"] / max(elapsed, 1e-9)
        metrics["lr"] = self.scheduler.get_last_lr()[0]
        metrics.update(memory_metrics(model_device(self.models.policy)))  # the peak so far (trainers.peak_memory)
        return metrics, rollout.all_episodes

    # ---- phases ----------------------------------------------------------------------------
    def rollout(self, step: int) -> Rollout:
        """Sample `tasks_per_step` groups of `group_size`, score them, and drop what must not train
        (error episodes; with dynamic sampling, groups without signal, refilled from more rounds)."""
        cfg = self.config
        self.sampler.reset_clock()
        t0 = time.perf_counter()

        def sample_round(r: int) -> list[list]:
            seed = _mix(cfg.seed, step) if r == 0 else _mix(cfg.seed, step, 3, r)
            sampling = self._sampling(cfg.temperature, seed=seed)
            tasks = self.tasks.training_tasks(training_seeds(cfg, step, r))
            groups = self._roll(tasks, cfg.group_size, sampling, r * cfg.tasks_per_step)
            return [g.episodes for g in groups]

        extra = self.algo.max_refill_rounds if self.algo.dynamic_sampling else 0
        kept, all_episodes, rounds = collect_groups(sample_round, self._keep, cfg.tasks_per_step, extra)
        total = time.perf_counter() - t0
        return Rollout(
            episodes=[ep for g in kept for ep in g],
            all_episodes=all_episodes,
            errors=sum(ep.is_error for ep in all_episodes if ep.segment == 0),  # an agent episode once
            groups_total=cfg.tasks_per_step,
            groups_kept=len(kept),
            rounds=rounds,
            groups_sampled=len({ep.group_id for ep in all_episodes}),
            seconds_sampling=self.sampler.seconds,
            seconds_scoring=max(0.0, total - self.sampler.seconds),
        )

    def _keep(self, groups: list[list]) -> list[list]:
        """The groups to train on, without their error episodes: those with a valid episode, and
        (dynamic sampling) whose rewards differ."""
        valid = [[ep for ep in g if not ep.is_error] for g in groups]
        valid = [g for g in valid if g]
        if not valid:
            return []
        rewards_B = torch.tensor([ep.reward for g in valid for ep in g])
        group_ids_B = torch.tensor([ep.group_id for g in valid for ep in g])
        keep_B = keep_groups(self.algo, rewards_B, group_ids_B).tolist()
        kept_ids = {g for g, k in zip(group_ids_B.tolist(), keep_B) if k}
        return [g for g in valid if g[0].group_id in kept_ids]

    @torch.no_grad()
    def prepare(self, rollout: Rollout) -> StepTensors:
        """Old and reference logprobs, the sampler/trainer gap, values and advantages. Each phase
        returns its result (frozen); none changes a batch in place (`trainers.phases`)."""
        collated = collate(rollout.episodes, self.models.pad_token_id)
        # the length penalty sees what the model generated; the filter then drops truncated rows
        rewards_B, turn_rewards_BT = shape_rewards(
            self.algo, collated.rewards, collated.turn_rewards, collated.loss_mask
        )
        batch = dataclasses.replace(
            collated,
            rewards=rewards_B,
            turn_rewards=turn_rewards_BT,
            loss_mask=filter_loss_mask(self.algo, collated.loss_mask, collated.truncated),
        )
        self.sync_check.check_versions(batch.versions, batch.loss_mask, self.version, step=self.step + 1)
        stats = (
            {}
            if batch.versions is None
            else staleness_stats(batch.versions, batch.loss_mask, self.version, self.config.max_staleness)
        )
        if self.algo.overlong_buffer_frac > 0:
            stats["overlong_penalty_mean"] = float((rewards_B - collated.rewards).mean())
        t = old_and_ref_logprobs(self.models, self.algo, self.config, batch).with_stats(stats)  # and values
        if t.old_logprobs_BT is not None:  # else the update's own forward measures it, before its optimizer step
            gap = sync_gap(t.old_logprobs_BT, batch.sampler_logprobs, batch.loss_mask, batch.versions, self.version)
            self.sync_check.check_gap(gap, self.version, step=self.step + 1)
            t = t.with_stats(gap.metrics())
        if self.models.critic is not None:
            (values_BT,) = per_micro_batch(
                t.batch, self.config.micro_batch, lambda mb: (self.models.critic(mb),), self.config.micro_batch_tokens
            )
            t = dataclasses.replace(t, old_values_BT=values_BT)
        return t.with_advantages(compute_advantages(self.algo, t))

    @torch.no_grad()
    def _check_without_update(self, t: StepTensors) -> dict[str, float]:
        """A step without signal, of an algorithm whose update's own forward measures the sampler/trainer
        gap: that forward without gradients, so that the weight sync is still checked every step and
        the gap, entropy and KL logged. Other algorithms measured them in `prepare`."""
        if t.old_logprobs_BT is not None:
            return {}
        cfg, batch = self.config, t.batch

        def policy(mb):
            out = forward(self.policy, mb, cfg.temperature, with_entropy=True)
            return out.logprobs, out.entropy

        old_BT, entropy_BT = per_micro_batch(batch, cfg.micro_batch, policy, cfg.micro_batch_tokens)
        sums = PreUpdateSums()
        sums.add(old_BT, entropy_BT, batch, t.ref_logprobs_BT)
        gap = sync_gap(old_BT, batch.sampler_logprobs, batch.loss_mask, batch.versions, self.version)
        self.sync_check.check_gap(gap, self.version, step=self.step + 1)
        return {**sums.stats(), **gap.metrics()}

    def update(self, t: StepTensors) -> dict[str, float]:
        """Epochs over shuffled minibatches; one optimizer step per minibatch, its gradient
        accumulated over micro-batches whose loss denominators are the minibatch's (global);
        with data-parallel ranks, each backwards its share (`trainers.update`)."""
        seed = _mix(self.config.seed, self.step, 1)  # reproducible on resume
        check = self.sync_check.before_optimizer_step(self.version, step=self.step + 1)
        if self.ranks is None:
            return run_update(self.models, self.optimizer, self.algo, self.config, t, seed, before_step=check)
        pending = self.ranks.launch(t, seed, [g["lr"] for g in self.optimizer.param_groups])
        try:
            stats = run_update(self.models, self.optimizer, self.algo, self.config, t, seed, self.ranks.group, check)
        except TrainerRankError as exc:
            raise self.ranks.failure(pending, exc) from None
        self.ranks.finish(pending)
        return stats

    def sync(self, version: int) -> float:
        """Push the new weights (policy `version`) into the sampler: in place for vLLM, nothing to
        do for HF; with the producer running, staged for it to load between engine steps (Ray
        workers: after the chunk each is sampling)."""
        t0 = time.perf_counter()
        params = self.models.sampler_weights()  # LoRA: the merged weights of the adapted blocks
        if self.producer is not None:
            self.sampler.stage(params, version)
        else:
            self.sampler.update_weights(params, version)
        return time.perf_counter() - t0

    def rollout_metrics(self, r: Rollout) -> dict[str, Any]:
        segments = [ep for ep in r.all_episodes if not ep.is_error]
        valid = [ep for ep in segments if ep.segment == 0]  # an agent episode once, whatever its segments
        rewards = np.array([ep.reward for ep in valid], dtype=np.float64)
        lengths = [sum(ep.loss_mask) for ep in segments]
        outcomes = [ep.outcome for ep in valid]
        n = max(len(valid), 1)
        return {
            "reward_mean": float(rewards.mean()) if len(rewards) else 0.0,
            "reward_std": float(rewards.std()) if len(rewards) else 0.0,
            "pass_rate": outcomes.count(Outcome.CORRECT) / n,
            "format_error_rate": outcomes.count(Outcome.FORMAT_ERROR) / n,
            "truncated_rate": sum(is_truncated(ep) for ep in valid) / n,  # budget or context cut
            # outcome `truncated`, by reason: out of turns, context full, max_tokens budget
            **{f"truncated_{r}_rate": sum(ep.truncation is r for ep in valid) / n for r in TruncationReason},
            "response_length": float(np.mean(lengths)) if lengths else 0.0,
            "tokens_generated": int(sum(lengths)),
            "episodes": sum(ep.segment == 0 for ep in r.all_episodes),
            "errors": r.errors,
            "episodes_trained": len(r.episodes),
            "groups_kept": r.groups_kept,
            "groups_total": r.groups_total,
            "sampling_rounds": r.rounds,
            "groups_sampled": r.groups_sampled,
            "time_sampling": r.seconds_sampling,
            "time_scoring": r.seconds_scoring,
        }

    def _roll(
        self,
        tasks: dict[str, list],
        group_size: int,
        sampling: SamplingSettings,
        group_id_start: int = 0,
        env_args: dict[str, Any] | None = None,
    ) -> list:
        """This run's environment rolled out by its sampler (here, or on the Ray rollout workers) on
        `tasks`, `{"seeds": [...]}` or `{"task_ids": [...]}`; `env_args`: the environment's (default the run's)."""
        cfg = self.config
        ids = tasks.get("task_ids")
        return self.sampler.rollout(
            RolloutRequest(
                cfg.env,
                cfg.env_args if env_args is None else env_args,
                tuple(tasks.get("seeds", ())),
                group_size,
                sampling,
                model_info=self._model_info(),
                max_length=max_model_len(self.models.policy),
                group_id_start=group_id_start,
                task_ids=None if ids is None else tuple(ids),
            )
        )

    # ---- evaluation and checkpoints --------------------------------------------------------
    def evaluate(self, n: int | None = None, temperature: float | None = None) -> dict[str, Any]:
        """Accuracy on the first `n` (default all) held-out tasks of the run's split (`envs.held_out`),
        one sample each: reset seeds training never draws, or listed rows training never draws."""
        cfg = self.config
        plan = self.tasks.evaluate or EvalTasks(n or cfg.eval_tasks, cfg.eval_seed_start)
        n = min(n or plan.count, plan.count) if plan.listed else (n or plan.count)
        tasks = plan.rollout_tasks(0, n) if plan.listed else {"seeds": list(range(plan.start, plan.start + n))}
        sampling = self._sampling(cfg.eval_temperature if temperature is None else temperature, seed=_mix(cfg.seed, 7))
        env_args = {**cfg.env_args, **self.tasks.eval_env_args}
        groups = self._roll(tasks, 1, sampling, env_args=env_args)
        every = [ep for g in groups for ep in g.episodes if ep.segment == 0]  # an agent episode once
        episodes = [ep for ep in every if not ep.is_error]
        self._warn_context_cuts(episodes)
        k = max(len(episodes), 1)
        results = {
            "accuracy": sum(ep.outcome is Outcome.CORRECT for ep in episodes) / k,
            "reward_mean": sum(ep.reward for ep in episodes) / k,
            "tasks": n,
            "errors": len(every) - len(episodes),
        }
        if plan.listed:  # which rows: a user (and a test) can see that none was trained on
            results["task_ids"] = tasks["task_ids"]
        if all_errors(every):
            results["first_error"] = error_message(every[0])
        return results

    def _warn_context_cuts(self, episodes: list) -> None:
        """Once per run: say so when more than 20% of a rollout's episodes did not fit in the context."""
        if self._warned_context:
            return
        text = context_cut_warning(episodes, max_model_len(self.models.policy), self.config.max_tokens)
        if text is not None:
            self._warned_context = True
            if self.logger is not None:
                self.logger.write(text)
            else:
                print(text, file=sys.stderr)

    def evaluate_and_log(self, step: int) -> dict[str, Any]:
        results = self.evaluate()
        if results.get("first_error") is not None:  # every episode an error: the accuracy measured nothing
            text = (
                f"the held-out evaluation at step {step}: every one of its {results['tasks']} episodes was an "
                f"error. The first: {results['first_error']}"
            )
            if step == 0:  # before training: the environment cannot work, and the steps would all fail alike
                raise NothingProduced(text)
            self._warn(f"warning: {text}")
        if self.logger is not None:
            self.logger.log_eval(step, results)
            self.logger.write(f"step {step}: held-out accuracy {results['accuracy']:.3f} on {results['tasks']} tasks")
        return results

    def save(self) -> Path:
        state = {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": ckpt.rng_state(),
            "config": self.config.to_dict(),
            "version": self.version,
            **self.models.extra_state(),
        }
        path = ckpt.save_checkpoint(self.out, self.step, self.models.save, state, self.config.keep_last)
        self._saved_step = self.step
        return path

    def _resume_point(self) -> Path | None:
        if not self.config.resume:
            return None
        ckpt.remove_partial(self.out)
        return ckpt.latest_checkpoint(self.out)  # None: nothing saved yet, start fresh

    def _restore(self, path: Path) -> None:
        state = ckpt.load_state(path)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.models.load_extra_state(state)
        ckpt.set_rng_state(state["rng"])
        self.step = int(state["step"])
        # a checkpoint older than the version's bookkeeping: as many updates as steps then
        self.version = int(state.get("version", self.step))

    # ---- helpers ---------------------------------------------------------------------------
    def _lr_factor(self, step: int) -> float:
        cfg = self.config
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
        if cfg.lr_schedule == "linear":
            return max(0.0, 1.0 - progress)
        if cfg.lr_schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    def _sampling(self, temperature: float, seed: int) -> SamplingSettings:
        return SamplingSettings(
            temperature=temperature, top_p=self.config.top_p, max_tokens=self.config.max_tokens, seed=seed
        )

    def _model_info(self) -> dict[str, Any]:
        return {"model": str(self.models.path), "model_step": self.step}


def training_seeds(cfg: TrainConfig, step: int, refill: int = 0) -> list[int]:
    """The step's reset seeds (of its `refill`-th extra round of dynamic sampling): a function of (seed,
    step, refill) alone, so a resumed run draws the same tasks, and never one of the held-out
    evaluation seeds."""
    held_out = cfg.eval_tasks
    rng = np.random.default_rng([cfg.seed, step] + ([refill] if refill else []))  # round 0: as before refills
    seeds = rng.integers(0, SEED_SPACE - held_out, size=cfg.tasks_per_step)
    return [int(s) + held_out if s >= cfg.eval_seed_start else int(s) for s in seeds]


def _mix(*parts: int) -> int:
    """A stable 31-bit seed from integers (numpy's seed sequence mixes them well)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0] & 0x7FFFFFFF)


def _seed_everything(seed: int) -> None:
    import random

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
