"""Sample completions (trainers/samples.py): which episodes are shown (the best and the worst of the
first group with a reward spread), their policy version, the console lines, `samples.jsonl` written
whole and, on a resume, without the redone steps twice; and a real `rlvr train` run that shows them
on the console between its lines and writes them to samples.jsonl and its TensorBoard events."""

from __future__ import annotations

import re

from rlvr.envs.episode import Episode
from rlvr.trainers.metrics import MetricsLogger, read_jsonl
from rlvr.trainers.samples import COLUMNS, Sample, console_lines, pick, policy_version, samples_of
from tests.conftest import train_device

FIELDS = {"step", "policy_version", "rank", "reward", "outcome", "task_id", "group_id", "prompt", "completion"}


def episode(group: int, reward: float, outcome: str = "correct", tag: str = "", versions=(), n: int = 2) -> Episode:
    return Episode(
        env_id="rlvr/Arithmetic-v0",
        task_id=f"t{group}",
        group_id=group,
        prompt_ids=[1, 2],
        completion_ids=list(range(3, 3 + n)),
        loss_mask=[1] * n,
        logprobs=[0.0] * n,
        turn_rewards=[reward],
        outcome=outcome,
        messages=[],
        finish_reason="stop",
        metadata={"tag": tag},
        versions=list(versions),
    )


def tags(chosen) -> list[tuple[str, str]]:
    return [(rank, ep.metadata["tag"]) for rank, ep in chosen]


def test_pick_takes_best_and_worst_of_the_first_group_with_a_reward_spread():
    flat = [episode(0, 1.0, tag="a"), episode(0, 1.0, tag="b")]  # no spread: skipped
    spread = [
        episode(1, 0.0, "incorrect", "c"),
        episode(1, 1.0, tag="d"),
        episode(1, 1.0, tag="e"),
        episode(1, 0.0, "incorrect", "f"),
    ]
    later = [episode(2, 0.0, "incorrect", "g"), episode(2, 1.0, tag="h")]
    # best: the first of the highest reward; worst: the last of the lowest
    assert tags(pick(flat + later + spread)) == [("best", "d"), ("worst", "f")]
    assert tags(pick(flat)) == [("best", "a"), ("worst", "b")]  # no group has a spread: the first group
    assert tags(pick([episode(4, 0.5, tag="x")])) == [("best", "x")]  # one episode: shown once
    assert pick([]) == []


def test_an_agent_episode_is_shown_by_its_last_segment():
    planner, solver = episode(0, 1.0, tag="planner"), episode(0, 1.0, tag="solver")
    planner.metadata.update(segment=0, segments=2)
    solver.metadata.update(segment=1, segments=2)
    other = episode(0, 0.0, "incorrect", "other")
    assert tags(pick([planner, solver, other])) == [("best", "solver"), ("worst", "other")]


def test_pick_leaves_errors_out_unless_there_is_nothing_else():
    error = episode(0, 0.0, "error", "err")
    assert tags(pick([error, episode(1, 0.0, "incorrect", "i"), episode(1, 1.0, tag="c")])) == [
        ("best", "c"),
        ("worst", "i"),
    ]
    assert tags(pick([error, episode(0, 0.0, "error", "err2")])) == [("best", "err")]  # errors alone: the first


def test_policy_version_is_the_oldest_tracked_model_token_else_the_fallback():
    ep = episode(0, 1.0, versions=[5, 4, -1], n=3)
    ep.loss_mask[2] = 0  # an environment token
    assert policy_version(ep, fallback=9) == 4
    assert policy_version(episode(0, 1.0), fallback=9) == 9  # untracked (hf sampler)


def test_samples_and_console_lines_decode_and_shorten():
    eps = [episode(0, 1.0, tag="a", n=200), episode(0, 0.0, "incorrect", tag="b")]

    def decode(ids):
        return "<s>" + "x" * 70 + "\nQ?\n" if ids == [1, 2] else "<s>" + " ".join(map(str, ids))

    samples = samples_of(7, eps, decode, version=3)
    assert [(s.rank, s.reward, s.outcome, s.policy_version, s.step) for s in samples] == [
        ("best", 1.0, "correct", 3, 7),
        ("worst", 0.0, "incorrect", 3, 7),
    ]
    assert samples[0].prompt == decode([1, 2]) and samples[1].completion == "<s>3 4"  # exact text in the file
    assert set(samples[0].to_dict()) == FIELDS and len(samples[0].row()) == len(COLUMNS)
    header, best, worst = console_lines(samples, strip=lambda t: t.replace("<s>", ""))
    assert header == "samples at step 7 (policy version 3, task t0):"
    assert best.startswith("  best  reward 1.000 correct: ...") and best.endswith("...")
    prompt_tail = best.split(": ", 1)[1].split(" => ")[0]
    assert prompt_tail == "..." + ("x" * 70 + "\\nQ?")[-60:]  # the prompt's end, one line, special tokens gone
    assert len(best.split(" => ")[1]) == 160 + 3
    assert worst == "  worst reward 0.000 incorrect: " + prompt_tail + " => 3 4"


def sample(step: int, rank: str = "best") -> Sample:
    return Sample(step, step - 1, rank, 1.0, "correct", "7", 0, "Compute 1 + 2.", "\\boxed{3}")


def test_samples_jsonl_is_read_back_and_a_resume_appends_without_duplicates(tmp_path, capsys):
    logger = MetricsLogger(tmp_path, total_steps=4, progress=False, report_to="none")
    for step in (2, 4):
        logger.log_samples(step, [sample(step), sample(step, "worst")])
    logger.close()
    with (tmp_path / "samples.jsonl").open("a") as f:
        f.write('{"step": 6, "rank": "be')  # a crash mid-line
    assert [(r["step"], r["rank"]) for r in read_jsonl(tmp_path / "samples.jsonl")] == [
        (2, "best"),
        (2, "worst"),
        (4, "best"),
        (4, "worst"),
    ]
    err = capsys.readouterr().err  # both samples of a step rewarded 1: every group's rewards were equal
    assert "samples at step 4 (policy version 3, task 7), all rewards equal in every group (nothing to learn " in err

    resumed = MetricsLogger(tmp_path, total_steps=6, start_step=2, progress=False, report_to="none")
    for step in (4, 6):  # the resumed run redoes step 4
        resumed.log_samples(step, [sample(step)])
    resumed.close()
    records = read_jsonl(tmp_path / "samples.jsonl")
    assert [(r["step"], r["rank"]) for r in records] == [(2, "best"), (2, "worst"), (4, "best"), (6, "best")]
    assert all(set(r) == FIELDS for r in records)
    assert (tmp_path / "samples.jsonl").read_text().endswith("}\n")  # the torn line is gone

    MetricsLogger(tmp_path, total_steps=1, progress=False, report_to="none").close()  # a fresh run starts empty
    assert read_jsonl(tmp_path / "samples.jsonl") == []


# ---- a real run ---------------------------------------------------------------------------------
# --no-skip-zero-signal: every step updates, so the policy versions below are the steps' (a 2 x 2 step
# of the tiny model often has no reward variance, and would otherwise take no update: trainers.zero_signal)
RUN = ["--sampler", "hf", "--tasks-per-step", "2", "--group-size", "2", "--no-progress", "--log-every", "1"]
RUN += ["--no-skip-zero-signal", "--threads", "1"]  # 1 thread: 2 on 2 busy cores measured 10-19 s a step, not 0.3
HEADER = re.compile(r"^samples at step (\d+) \(policy version (\d+), task \d+\)(?:, all rewards equal .*)?:$", re.M)
LINE = re.compile(r"^  (best |worst) reward \d\.\d{3} [a-z_]+: .+ => .*$", re.M)


def test_rlvr_train_shows_samples_between_its_lines_and_writes_them(tmp_path, capsys):
    """The console shows them every N steps, samples.jsonl holds them, the TensorBoard events too
    (`rlvr train` through its entry point in this process)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    from tests.trainers.test_learning import rlvr_train

    out = tmp_path / "run"
    _, err = rlvr_train(
        ["train", *RUN, "--device", train_device(), "--steps", "4", "--sample-every", "2", "--out", str(out)], capsys
    )
    assert [int(s) for s, _ in HEADER.findall(err)] == [2, 4]
    assert [int(v) for _, v in HEADER.findall(err)] == [1, 3]  # hf: the weights before the step's update
    assert len(LINE.findall(err)) in range(2, 5)  # one or two samples a step
    assert err.index("step 2/4 |") < err.index("samples at step 2") < err.index("step 3/4 |")
    records = read_jsonl(out / "samples.jsonl")
    assert sorted({r["step"] for r in records}) == [2, 4] and all(set(r) == FIELDS for r in records)
    assert all(r["prompt"].startswith("<|im_start|>user\nCompute ") for r in records)
    assert all(
        r["rank"] in ("best", "worst") and r["outcome"] in ("correct", "incorrect", "format_error", "truncated")
        for r in records
    )

    events = EventAccumulator(str(out / "tensorboard"), size_guidance={"tensors": 0})
    events.Reload()
    tables = {
        e.step: tensor_util.make_ndarray(e.tensor_proto).item().decode() for e in events.Tensors("samples/text_summary")
    }
    assert sorted(tables) == [2, 4]
    for r in records:  # each sample's completion is in its step's table
        assert r["completion"].replace("|", "\\|").replace("\n", "<br>") in tables[r["step"]]
