"""The rollout producer of asynchronous RL on its own: pacing by staleness, pausing, failures and
closing, with a plain function standing in for the rollout (the trainer's runs are in
tests/trainers/test_train_async.py)."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from rlvr.trainers.producer import ProducerError, ProducerStopped, RolloutProducer, StagedWeights


class Recorder:
    """A rollout that records the trainer's version when it starts (what pacing bounds)."""

    def __init__(self):
        self.started: list[tuple[int, int]] = []
        self.version = 0
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, step: int) -> str:
        self.started.append((step, self.version))
        assert self.gate.wait(10)
        return f"rollout {step}"


def run_trainer(producer: RolloutProducer, recorder: Recorder, steps: range) -> list[str]:
    got = []
    for step in steps:
        got.append(producer.get(step))
        time.sleep(0.01)  # "training": the producer may run ahead meanwhile
        recorder.version = step + 1
        producer.advance(step + 1)
    return got


@pytest.mark.parametrize("k", [0, 1, 2])
def test_pacing_keeps_every_rollout_within_k_versions(k):
    recorder = Recorder()
    producer = RolloutProducer(recorder, 0, 8, k, version=0)
    try:
        assert run_trainer(producer, recorder, range(8)) == [f"rollout {s}" for s in range(8)]
    finally:
        producer.close()
    assert [s for s, _ in recorder.started] == list(range(8))
    assert all(0 <= step - version <= k for step, version in recorder.started)
    if k == 0:  # exactly the synchronous order: each rollout starts after the previous update
        assert all(step == version for step, version in recorder.started)
    else:  # and it does run ahead
        assert any(step - version == k for step, version in recorder.started)


def test_a_failure_reaches_the_trainer_with_its_step():
    def produce(step):
        if step == 2:
            raise OSError("the sandbox is gone")
        return step

    producer = RolloutProducer(produce, 0, 5, 1, version=0)
    try:
        assert producer.get(0) == 0
        producer.advance(1)
        assert producer.get(1) == 1
        producer.advance(2)
        with pytest.raises(ProducerError, match="step 3 failed: OSError: the sandbox is gone") as e:
            producer.get(2)
        assert isinstance(e.value.__cause__, OSError)
    finally:
        producer.close()


def test_paused_waits_for_the_rollout_in_progress_and_starts_none():
    recorder = Recorder()
    recorder.gate.clear()
    producer = RolloutProducer(recorder, 0, 3, 2, version=0)
    try:
        deadline = time.monotonic() + 5
        while not recorder.started and time.monotonic() < deadline:
            time.sleep(0.01)
        entered = threading.Event()

        def pause():
            with producer.paused():
                entered.set()
                time.sleep(0.1)
                assert len(recorder.started) == 1  # nothing new started while paused

        t = threading.Thread(target=pause)
        t.start()
        time.sleep(0.1)
        assert not entered.is_set()  # the rollout of step 0 is still running
        recorder.gate.set()
        t.join(5)
        assert entered.is_set() and not t.is_alive()
        assert producer.get(2) == "rollout 2"
    finally:
        producer.close()


def test_close_ends_the_thread_and_a_stopped_rollout_is_no_failure():
    started, stop_seen = threading.Event(), threading.Event()
    holder = {}

    def produce(step):
        started.set()
        while "producer" not in holder:  # the constructor starts the thread before it returns
            time.sleep(0.01)
        while not holder["producer"].in_own_thread_and_stopping():
            time.sleep(0.01)
        stop_seen.set()
        raise ProducerStopped()

    producer = holder["producer"] = RolloutProducer(produce, 0, 3, 1, version=0)
    assert started.wait(5)
    assert not producer.in_own_thread_and_stopping()  # not in its thread, not stopping
    producer.close(timeout=5)
    assert stop_seen.is_set()
    assert not any(t.name == "rlvr-rollout-producer" and t.is_alive() for t in threading.enumerate())
    with pytest.raises(ProducerError, match="stopped"):
        producer.get(0)


def test_staged_weights_are_a_copy_and_the_newest_wins():
    w = torch.zeros(3)
    staged = StagedWeights()
    staged.stage([("w", w)], version=1)
    w += 1  # the trainer goes on updating its own tensor
    staged.stage([("w", w)], version=2)
    taken = staged.take()
    assert taken.version == 2 and torch.equal(taken.tensors[0][1], torch.ones(3))
    assert staged.take() is None
    with pytest.raises(ValueError):
        RolloutProducer(lambda s: s, 0, 1, -1, version=0)
