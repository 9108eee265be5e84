"""The Trainer: one step, and the run of steps around it.

    rollout -> filter -> old/reference logprobs (+ the sampler/trainer gap) -> values
      -> advantages -> update (epochs x minibatches x micro-batches) -> sync -> log -> checkpoint

The step's parts live in their own modules: which tasks and groups (`trainers.step_rollout`), the
batch made ready (`trainers.step_prepare`), the update (`trainers.update`), where the rollout comes
from and the weights go (`trainers.drivers`: synchronous, or overlapped for asynchronous RL with
`max_staleness` K > 0), Ctrl-C, streaks and the time limit (`trainers.run_control`) and the held-out
evaluation (`trainers.evaluation`).

Before any optimizer step, the step's tokens show that the sampler held the trained weights (their
policy versions, and the sampler/trainer logprob gap under its bound), or the run stops with
`WeightSyncError` (`trainers.weight_sync`): a sync that failed silently is never trained on.

The `Trainer` holds the policy, the optional frozen reference model, the optional value head or
separate critic, the optimizer, the scheduler and the sampler. Dropout stays off (`eval()` mode)
throughout: the importance ratios must compare the policy with itself, not with a thinned copy. It
changes no process-wide setting: `rlvr train` applies `config.threads` (`torch.set_num_threads`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from rlvr.envs.eval_tasks import EvalTasks
from rlvr.envs.evaluate import context_cut_warning
from rlvr.envs.held_out import TaskSplit
from rlvr.envs.rollout import RolloutRequest
from rlvr.envs.sampler import SamplingSettings
from rlvr.trainers import checkpoint as ckpt
from rlvr.trainers.algorithms import AlgoConfig, resolve
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.data_parallel import TrainerRankError
from rlvr.trainers.device import model_device
from rlvr.trainers.drivers import OverlapDriver, SyncDriver
from rlvr.trainers.evaluation import check_held_out, held_out_results, held_out_tasks
from rlvr.trainers.flops import flop_meter, row_lengths
from rlvr.trainers.memory_plan import memory_safe
from rlvr.trainers.metrics import MetricsLogger, read_jsonl, update_counts
from rlvr.trainers.model_set import Models, build_models
from rlvr.trainers.optimizer import build_optimizer, build_scheduler
from rlvr.trainers.peak_memory import memory_metrics
from rlvr.trainers.phases import StepTensors
from rlvr.trainers.preflight import check_run, check_settings, task_split
from rlvr.trainers.ray_trainer import start_trainer_ranks
from rlvr.trainers.run_control import RunControl
from rlvr.trainers.samplers.protocol import TrainerSampler
from rlvr.trainers.samplers.registry import backend
from rlvr.trainers.samplers.sizing import max_model_len
from rlvr.trainers.samplers.training import start_sampler
from rlvr.trainers.samples import samples_of, special_token_stripper
from rlvr.trainers.seeding import mix, seed_everything
from rlvr.trainers.step_prepare import check_without_update, prepare
from rlvr.trainers.step_rollout import Rollout, rollout_metrics, sample_step
from rlvr.trainers.update import run_update
from rlvr.trainers.weight_sync import SyncCheck
from rlvr.trainers.zero_signal import no_signal


class Trainer:
    """`overlap`: sample the next steps in a producer thread while training (asynchronous RL,
    `trainers.drivers.OverlapDriver`); None: when `max_staleness` > 0."""

    def __init__(
        self,
        config: TrainConfig,
        algo: AlgoConfig | None = None,
        overlap: bool | None = None,
        tasks: TaskSplit | None = None,
    ):
        # which tasks train and which evaluate, never the same (envs.held_out); rlvr train plans it for its start line
        self.tasks = tasks if tasks is not None else task_split(config)
        self.overlap = config.max_staleness > 0 if overlap is None else overlap
        self.algo = resolve(algo if algo is not None else check_run(config), config.max_tokens)
        check_settings(self.algo, config)
        # on CUDA, micro-batches bounded by tokens unless the config sizes them (trainers.memory_plan)
        config = self.config = memory_safe(config, self.algo)
        self.out = Path(config.out)
        # Updates done (the policy version the sampler holds), not `step`: a step that trains on
        # nothing (every episode an error, every group filtered) leaves the weights as they were.
        self.step = self.version = 0
        resume_from = ckpt.resume_point(self.out) if config.resume else None
        if resume_from is None:
            seed_everything(config.seed)
        self.models: Models = build_models(config, self.algo.needs_reference, self.algo.needs_value_head, resume_from)
        self.policy = self.models.policy
        # every step shows that the sampler holds the trained weights, or the run stops (trainers.weight_sync)
        self.sync_check = SyncCheck.from_config(config, self.models.lora)
        self.optimizer = build_optimizer(config, self.models)
        self.scheduler = build_scheduler(config, self.optimizer)
        if resume_from is not None:
            self._restore(resume_from)
            print(f"resuming from {resume_from} (step {self.step})", file=sys.stderr)
        if self.overlap and not backend(config.sampler).overlaps:
            raise ConfigError(
                "overlapped sampling needs a sampler that loads weights between engine steps "
                f"(vllm), got {config.sampler!r}"
            )
        # here or on the Ray rollout workers, holding the policy as `version` (the updates done)
        self.sampler: TrainerSampler = start_sampler(config, self.models, resume_from, self.version)
        # data-parallel ranks 1 .. N-1 (this process is rank 0), holding its weights and optimizer state
        self.ranks = start_trainer_ranks(config, self.algo, self.models, self.optimizer, resume_from)
        self.flops = flop_meter(self.models, self.algo, config)  # `mfu`, `tflops`: CUDA only (trainers.flops)
        self.driver: SyncDriver | OverlapDriver = SyncDriver(self.sampler, self.rollout)
        self.control = RunControl(config.max_error_steps, config.time_limit, config.resume)
        self.saved_step = self.step  # the step of the last checkpoint (resumed from, or saved)
        self.logger: MetricsLogger | None = None
        self._warned_context = False  # the context-cut warning is given once per run

    # ---- the run ---------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Run steps until `config.steps`; returns a summary (held-out accuracy before/after if asked)."""
        cfg = self.config
        logged = dict(progress=cfg.progress, log_every=cfg.log_every, report_to=cfg.report_to, verbose=cfg.verbose)
        self.logger = MetricsLogger(self.out, cfg.steps, start_step=self.step, config=cfg.to_dict(), **logged)
        summary: dict[str, Any] = {"start_step": self.step}
        try:
            if cfg.eval_tasks and self.step == 0:
                summary["eval_before"] = self.evaluate_and_log(step=0)
            elif cfg.eval_tasks and (before := self.logger.first_eval()) is not None:  # resumed: as logged
                if before.get("tasks") == self.tasks.evaluate.count:
                    summary["eval_before"] = before
            self.control.start()
            if self.overlap:
                self.driver = OverlapDriver(self.sampler, self.rollout, cfg.steps, cfg.max_staleness)
                self.driver.start(self.step)
            out_of_time = False
            while self.step < cfg.steps and not out_of_time:
                out_of_time = self._one_step()
            if out_of_time:
                summary["stopped"] = self.control.stop_line()
            self.driver.stop()
            self._warn(self.control.errors.end())
            if cfg.eval_tasks:
                summary["eval_after"] = self.evaluate_and_log(self.step)
            summary["reward_png"] = str(self.logger.plot())
        except KeyboardInterrupt as exc:
            self.control.interrupts.release(raise_pending=False)  # a second Ctrl-C now interrupts the save
            self.driver.stop()
            raise self.control.interrupted(self, exc) from None
        finally:
            self.control.interrupts.release(raise_pending=False)
            self.driver.stop()
            self.driver = SyncDriver(self.sampler, self.rollout)
            self.logger.close()
        summary["steps"] = self.step
        summary.update(update_counts(read_jsonl(self.logger.metrics_path)))
        summary["memory"] = memory_metrics(model_device(self.models.policy))  # the run's peak, evaluations included
        latest = ckpt.latest_checkpoint(self.out)
        summary["checkpoint"] = None if latest is None else str(latest)
        return summary

    def _one_step(self) -> bool:
        """A step of the run, logged, evaluated and saved when due; True when the time limit is reached."""
        cfg = self.config
        sampled_by = self.version  # the policy the sampler holds for this step (synchronous sampling)
        with self.control.saving_on_failure(self):
            metrics, episodes = self.step_with_episodes()
        self.step += 1
        out_of_time = self.control.out_of_time()
        last = self.step == cfg.steps or out_of_time
        if cfg.eval_every and self.step % cfg.eval_every == 0 and not last:
            with self.driver.engine():
                metrics["eval_accuracy"] = self.evaluate_and_log(self.step)["accuracy"]
        metrics["time_elapsed"] = self.control.elapsed()
        self.logger.log(self.step, metrics)
        if cfg.sample_every and self.step % cfg.sample_every == 0:
            chosen = samples_of(self.step, episodes, self.models.tokenizer.decode, sampled_by)
            self.logger.log_samples(self.step, chosen, special_token_stripper(self.models.tokenizer))
        self.control.observe(self, episodes, bool(metrics["zero_signal"]), self._warn)  # may stop the run
        if self.step % cfg.save_every == 0 or last:
            self.save()
        self.driver.advance(self.step)  # overlapped: the producer may now sample step + max_staleness
        self.control.interrupts.release()  # the step is whole (logged, saved if due): a Ctrl-C held stops here
        return out_of_time

    def close(self) -> None:
        """End the sampler (its engine, or the Ray workers) and the data-parallel ranks now rather
        than at exit: a notebook or a test session goes on."""
        for part in (self.ranks, self.sampler):
            if part is not None:
                part.close()

    # ---- the step --------------------------------------------------------------------------
    def train_step(self) -> dict[str, Any]:
        """One step: its metrics."""
        metrics = self.step_with_episodes()[0]
        self.control.interrupts.release()  # a Ctrl-C held during the update is raised now, the step done
        return metrics

    def step_with_episodes(self) -> tuple[dict[str, Any], list]:
        """One step: its metrics, and every episode it sampled (errors included)."""
        started = time.perf_counter()
        rollout, waiting = self.driver.rollout(self.step)
        metrics = {**rollout_metrics(rollout), **waiting}
        self._warn_context_cuts(rollout.all_episodes)
        tensors, flat = None, False  # flat: no reward variance in any group
        if rollout.episodes:
            t0 = time.perf_counter()
            tensors = self.prepare(rollout)
            metrics.update(tensors.stats)
            b = tensors.batch
            flat = no_signal(self.algo, b.rewards, b.group_ids, tensors.advantages, b.loss_mask)
            if flat and self.config.skip_zero_signal:
                metrics.update(
                    check_without_update(
                        self.policy, self.config, self.sync_check, self.version, self.step + 1, tensors
                    )
                )
                tensors = None  # no optimizer step: Adam would turn the float-noise gradient into a full step
        # every episode an error: not a lack of signal (trainers.outage says so); else nothing left to learn from
        metrics["zero_signal"] = int(flat or (tensors is None and rollout.errors < metrics["episodes"]))
        if tensors is not None:
            self.control.interrupts.hold()  # the weights change from here: Ctrl-C waits for the step's end
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
        metrics.update(time_step=elapsed, tokens_per_second=metrics["tokens_generated"] / max(elapsed, 1e-9))
        metrics["lr"] = self.scheduler.get_last_lr()[0]
        metrics.update(memory_metrics(model_device(self.models.policy)))  # the peak so far (trainers.peak_memory)
        return metrics, rollout.all_episodes

    def rollout(self, step: int) -> Rollout:
        """Step `step`'s groups, scored, without what must not train (`trainers.step_rollout`)."""
        cfg = self.config

        def roll(tasks: dict[str, list], seed: int, group_id_start: int) -> list:
            return self._roll(tasks, cfg.group_size, self._sampling(cfg.temperature, seed), group_id_start)

        return sample_step(cfg, self.algo, self.tasks, self.sampler, roll, step)

    def prepare(self, rollout: Rollout) -> StepTensors:
        """The rollout's tensors for the coming update (`trainers.step_prepare`)."""
        return prepare(self.models, self.algo, self.config, self.sync_check, self.version, self.step + 1, rollout)

    def update(self, t: StepTensors) -> dict[str, float]:
        """Epochs over shuffled minibatches; one optimizer step per minibatch, its gradient
        accumulated over micro-batches whose loss denominators are the minibatch's (global);
        with data-parallel ranks, each backwards its share (`trainers.update`)."""
        seed = mix(self.config.seed, self.step, 1)  # reproducible on resume
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
        """Push the new weights (policy `version`) into the sampler, as the driver does (`trainers.drivers`)."""
        t0 = time.perf_counter()
        self.driver.push(self.models.sampler_weights(), version)  # LoRA: the merged weights of the adapted blocks
        return time.perf_counter() - t0

    def _roll(
        self,
        tasks: dict[str, list],
        group_size: int,
        sampling: SamplingSettings,
        group_id_start: int = 0,
        env_args=None,
    ):
        """This run's environment rolled out by its sampler (here, or on the Ray rollout workers) on
        `tasks`, `{"seeds": [...]}` or `{"task_ids": [...]}`; `env_args`: the environment's (default the run's)."""
        cfg, ids = self.config, tasks.get("task_ids")
        request = RolloutRequest(
            cfg.env,
            cfg.env_args if env_args is None else env_args,
            tuple(tasks.get("seeds", ())),
            group_size,
            sampling,
            model_info={"model": str(self.models.path), "model_step": self.step},
            max_length=max_model_len(self.models.policy),
            group_id_start=group_id_start,
            task_ids=None if ids is None else tuple(ids),
        )
        return self.sampler.rollout(request)

    # ---- evaluation and checkpoints --------------------------------------------------------
    def evaluate(self, n: int | None = None, temperature: float | None = None) -> dict[str, Any]:
        """Accuracy on the first `n` (default all) held-out tasks of the run's split (`envs.held_out`),
        one sample each: reset seeds training never draws, or listed rows training never draws."""
        cfg = self.config
        tasks, n = held_out_tasks(self.tasks.evaluate or EvalTasks(n or cfg.eval_tasks, cfg.eval_seed_start), n)
        sampling = self._sampling(cfg.eval_temperature if temperature is None else temperature, mix(cfg.seed, 7))
        groups = self._roll(tasks, 1, sampling, env_args={**cfg.env_args, **self.tasks.eval_env_args})
        every = [ep for g in groups for ep in g.episodes if ep.segment == 0]  # an agent episode once
        self._warn_context_cuts([ep for ep in every if not ep.is_error])
        return held_out_results(every, tasks, n)

    def evaluate_and_log(self, step: int) -> dict[str, Any]:
        results = self.evaluate()
        self._warn(check_held_out(results, step))  # errors alone: before training, the run stops
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
        self.saved_step = self.step
        return path

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
    def _sampling(self, temperature: float, seed: int) -> SamplingSettings:
        cfg = self.config
        return SamplingSettings(temperature=temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=seed)

    def _warn_context_cuts(self, episodes: list) -> None:
        """Once per run: say so when more than 20% of a rollout's episodes did not fit in the context."""
        if not self._warned_context:
            text = context_cut_warning(episodes, max_model_len(self.models.policy), self.config.max_tokens)
            self._warned_context = text is not None
            self._warn(text)

    def _warn(self, text: str | None) -> None:
        if text is not None:
            (self.logger.write if self.logger is not None else lambda t: print(t, file=sys.stderr))(text)
