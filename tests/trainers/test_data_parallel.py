"""Data-parallel trainer ranks (`trainers.data_parallel`, `trainers.ray_trainer`): two ranks, this
process and a Ray actor, each backwarding its share of every minibatch, make the update one rank
makes on the same batch (float32, 1e-5), for the fused on-policy path, PPO's epochs and
minibatches with a value head, packed micro-batches, and minibatches too small to share."""

from __future__ import annotations

import copy
import dataclasses
import json
import time

import pytest
import torch

from rlvr.trainers.algorithms import resolve
from rlvr.trainers.batch import collate
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.data_parallel import RankAddress, RankGroup, TrainerRankError, rendezvous
from rlvr.trainers.model_set import build_models
from rlvr.trainers.optimizer import build_optimizer
from rlvr.trainers.phases import compute_advantages, old_and_ref_logprobs
from rlvr.trainers.preflight import check_run
from rlvr.trainers.update import run_update, trainable_parameters
from tests.tolerances import assert_adam_runs_agree, gradient_bound
from tests.trainers.test_update import make_episodes

CASES = {
    # one epoch of one minibatch: the old logprobs come from the update's own forward
    "grpo fused": dict(algo="grpo"),
    # two epochs of two minibatches, a value head and GAE; each rank's 3 rows in a ragged 2 + 1
    "ppo": dict(algo="ppo", epochs=2, minibatch_size=6, micro_batch_size=2),
    # padding-free packed micro-batches, token-mean aggregation
    "dapo packed": dict(algo="dapo", micro_batch_tokens=24, algo_args={"dynamic_sampling": False}),
    # only a LoRA adapter trains; its random start must be rank 0's on every rank
    "grpo lora": dict(algo="grpo", lora_rank=4, epochs=2),
    # one episode per optimizer step: one rank has no rows each time
    "rloo one row": dict(algo="rloo", minibatch_size=1),
}


# Two ranks on the CPU: they talk over gloo (NCCL would want a GPU per rank), and the test cluster has no GPUs.
RANKS = dict(device="cpu", threads=1, ray=True, trainer_ranks=2)


def step_tensors(cfg: TrainConfig):
    algo = resolve(check_run(cfg), cfg.max_tokens)
    models = build_models(cfg, algo.needs_reference, algo.needs_value_head, None)
    if models.value_head is not None:  # zero-initialised: give the value loss something to move
        torch.nn.init.normal_(models.value_head.linear.weight, std=0.1)
    batch = collate(make_episodes(), models.pad_token_id)
    t = old_and_ref_logprobs(models, algo, cfg, batch)
    return algo, models, t.with_advantages(compute_advantages(algo, t))


@pytest.mark.parametrize("case", list(CASES))
def test_two_ranks_make_the_update_of_one(ray_cluster, case):
    from rlvr.trainers.ray_trainer import RayTrainerRanks

    cfg = TrainConfig.from_dict(dict(RANKS, tasks_per_step=3, group_size=4, temperature=0.8, **CASES[case]))
    algo, models, t = step_tensors(cfg)
    before = [p.detach().clone() for p in trainable_parameters(models)]
    alone = copy.deepcopy(models)
    one = run_update(alone, build_optimizer(cfg, alone), algo, cfg, t, shuffle_seed=5)

    optimizer = build_optimizer(cfg, models)
    ranks = RayTrainerRanks(cfg.to_dict(), algo, models, optimizer, 2, None)
    try:
        pending = ranks.launch(t, 5, [g["lr"] for g in optimizer.param_groups])
        two = run_update(models, optimizer, algo, cfg, t, 5, ranks.group)
        ranks.finish(pending)
        (other,) = ranks.weights()
    finally:
        ranks.close()
    tokens = int(t.batch.loss_mask.sum())
    for a, b, c, start in zip(trainable_parameters(models), trainable_parameters(alone), other, before):
        assert not torch.equal(a, start)  # the update moved it
        # the last optimizer step's (clipped) gradient, summed over the ranks: the same sums in
        # another order (tests.tolerances), and the weights after every step, as Adam allows
        atol = gradient_bound(models.policy.config, tokens, b.grad)
        torch.testing.assert_close(a.grad, b.grad, atol=atol, rtol=0)
        assert_adam_runs_agree(a, b, lr=cfg.lr, steps=one["optimizer_steps"])  # two ranks: one rank's update
        torch.testing.assert_close(c, a.detach(), atol=1e-6, rtol=0)  # and both ranks hold it
    assert two["optimizer_steps"] == one["optimizer_steps"]
    for key in ("policy_loss", "grad_norm", "clip_frac", "approx_kl", "value_loss", "entropy", "logprob_gap_mean"):
        if key in one:  # the metrics cover both shares
            assert two[key] == pytest.approx(one[key], rel=1e-4, abs=1e-6), key


def test_a_rank_without_rows_adds_nothing_and_a_gradient_nobody_has_stays_none():
    """One rank, worked by hand: shares of a minibatch, and the summed-gradient bookkeeping."""
    address, store = rendezvous(1, "gloo", host="127.0.0.1")
    group = RankGroup(address, 0, store)
    assert group.share(torch.tensor([4, 2, 7])).tolist() == [4, 2, 7]
    a, b = torch.nn.Parameter(torch.zeros(2, 2)), torch.nn.Parameter(torch.zeros(3))
    a.grad = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    group.sum_gradients([a, b])
    assert a.grad.tolist() == [[1.0, 2.0], [3.0, 4.0]] and b.grad is None
    group.close()


def test_shares_are_contiguous_and_near_equal():
    address = RankAddress("127.0.0.1", 0, 3, "gloo")
    rows = torch.tensor([9, 4, 1, 7, 3, 0, 5])
    shares = [torch.tensor_split(rows, address.world_size)[r].tolist() for r in range(3)]
    assert shares == [[9, 4, 1], [7, 3], [0, 5]]


def test_a_rank_that_fails_fails_the_step_with_its_error_at_once(ray_cluster):
    """A rank whose update raises leaves the group: rank 0's collective fails now (not at its
    10-minute timeout) with a typed error naming the rank's own failure."""
    from rlvr.trainers.ray_trainer import RayTrainerRanks

    cfg = TrainConfig.from_dict(dict(RANKS, tasks_per_step=3, group_size=4))
    algo, models, t = step_tensors(cfg)
    optimizer = build_optimizer(cfg, models)
    ranks = RayTrainerRanks(cfg.to_dict(), algo, models, optimizer, 2, None)
    broken = dataclasses.replace(t, advantages=None)  # the rank's loss cannot be computed
    started = time.monotonic()
    pending = ranks.launch(broken, 5, [g["lr"] for g in optimizer.param_groups])
    with pytest.raises(TrainerRankError) as failed:
        run_update(models, optimizer, algo, cfg, t, 5, ranks.group)
    error = ranks.failure(pending, failed.value)
    assert "a trainer rank failed to update" in str(error) and "advantages" in str(error), str(error)
    assert time.monotonic() - started < 60


@pytest.mark.parametrize(
    "settings, problem",
    [
        ({"trainer_ranks": 2}, "runs on Ray"),
        ({"verifier_workers": 1}, "runs on Ray"),
        ({"ray": True, "trainer_ranks": 0}, "trainer_ranks must be >= 1"),
        ({"ray": True, "verifier_workers": -1}, "verifier_workers must be >= 0"),
        ({"ray": {"trainer_ranks": 2, "gpus": 1}}, "unknown ray setting"),
        ({"ray": {"trainer_ranks": 2}, "trainer_ranks": 3}, "both in the ray section"),
    ],
)
def test_bad_data_parallel_settings_are_config_errors(settings, problem):
    with pytest.raises(ConfigError, match=problem):
        TrainConfig.from_dict(settings)


def test_a_config_files_ray_section_sets_the_ray_settings():
    cfg = TrainConfig.from_dict(
        {"ray": {"address": "auto", "rollout_workers": 3, "verifier_workers": 2, "trainer_ranks": 2}}
    )
    assert (cfg.ray, cfg.ray_address, cfg.rollout_workers, cfg.verifier_workers, cfg.trainer_ranks) == (
        True,
        "auto",
        3,
        2,
        2,
    )


def test_training_on_two_ranks_with_a_generate_worker_is_the_one_rank_run_and_resumes_exactly(ray_cluster, tmp_path):
    """`rlvr train --ray --trainer-ranks 2`, three steps, stopped after step 2's checkpoint and
    resumed (new ranks take the checkpoint's weights and optimizer state): the rewards and the final
    weights are those of the uninterrupted single-process run (the ranks stay in step, the sampler
    gets rank 0's weights, and the resume goes on exactly: a resume that lost the optimizer state or
    a rank's weights would leave Adam's bound far behind). `--sampler hf`: the rollout worker samples
    with `generate` on its own copy of the model, which takes the trainer's weights at every sync (the
    sampler/trainer gap stays at float32 noise, one version per update) and evaluates the held-out
    tasks (this was test_ray_rollout's test_workers_can_sample_with_hugging_face_generate, whose own
    run of 2 workers cost 13 s more; vLLM on the workers: tests/trainers/samplers/test_ray_pool.py)."""
    from tests.trainers.samplers.test_ray_pool import train

    settings = dict(ray=True, rollout_workers=1, trainer_ranks=2, sampler="hf", eval_tasks=4)  # train(): on the CPU
    train(tmp_path / "ranks", **settings, steps=2, save_every=2)
    ranks, summary, ranks_metrics = train(tmp_path / "ranks", **settings, resume=True)
    one, _, one_metrics = train(tmp_path / "one", sampler="hf", eval_tasks=4)  # held-out tasks set the train seeds
    assert summary["start_step"] == 2 and [m["step"] for m in ranks_metrics] == [1, 2, 3]
    assert [m["reward_mean"] for m in ranks_metrics] == [m["reward_mean"] for m in one_metrics]
    assert all(m["logprob_gap_max"] < 1e-4 for m in ranks_metrics), [m["logprob_gap_max"] for m in ranks_metrics]
    assert ranks.sampler.version == sum(not m.get("skipped") for m in ranks_metrics)  # one per update
    assert summary["eval_after"]["tasks"] == 4
    for a, b in zip(trainable_parameters(ranks.models), trainable_parameters(one.models)):
        assert_adam_runs_agree(a, b, lr=1e-3, steps=3)  # train()'s lr and steps


def test_a_ray_run_killed_with_sigkill_resumes_and_leaves_no_ray_behind(ray_cluster, tmp_path, capsys):
    """The driver (rank 0 and the rollout workers' owner) killed with SIGKILL mid-run: its local Ray
    cluster, workers and ranks go with it, and `--resume` goes on from the last checkpoint with new
    ones, no step missing and none twice. `--sampler hf` (train_command's): the subject is the
    processes, not the engine (no vLLM import or engine start in the driver and its worker). The
    killed run is a process of its own; the resume is `rlvr train` in this process, on the test
    session's cluster (new ranks and workers all the same), sparing a second start of Python's
    imports and of a local Ray cluster."""
    import os
    import subprocess

    from rlvr.cli import main
    from rlvr.trainers import checkpoint as ckpt
    from tests.trainers.test_checkpoint_resume import sigkill_after_checkpoint, train_command

    def ray_processes() -> set[int]:
        ps = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout.splitlines()[1:]
        return {int(line.split()[0]) for line in ps if "raylet" in line or "gcs_server" in line}

    before = ray_processes()
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    ray_flags = ("--ray", "--rollout-workers", "1", "--trainer-ranks", "2")
    proc = subprocess.Popen(
        train_command(tmp_path, 1000, *ray_flags), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    sigkill_after_checkpoint(proc, tmp_path, 2)
    step = ckpt.load_state(ckpt.latest_checkpoint(tmp_path))["step"]
    code = main(train_command(tmp_path, step + 2, *ray_flags, "--resume")[3:])  # past `python -m rlvr`
    assert code == 0, capsys.readouterr().err[-3000:]
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, step + 3))
    deadline = time.monotonic() + 30  # Ray's own reaper ends a dead driver's cluster
    while ray_processes() - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not ray_processes() - before


def test_a_run_without_ray_imports_no_ray(tmp_path):
    """Ray is an optional extra: a training run without `--ray` never imports it."""
    import subprocess
    import sys

    program = (
        "import sys\n"
        "from rlvr.trainers.config import TrainConfig\n"
        "from rlvr.trainers.loop import Trainer\n"
        f"cfg = TrainConfig.from_dict(dict(sampler='hf', steps=1, tasks_per_step=2, group_size=2, max_tokens=4, "
        f"threads=1, progress=False, out={str(tmp_path)!r}))\n"
        "Trainer(cfg).train()\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
