"""The sandbox's pools on Ray workers (sandbox.ray_pool): a real local Ray cluster (one per test
session), real Docker containers in the workers, workers killed under runs."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlvr import envs, sandbox
from rlvr.envs.tasks.code import builtin_tasks
from rlvr.sandbox import DockerSandbox, Limits, RaySandbox, Status, unavailable_reason
from rlvr.sandbox.hostile import CASES
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require

pytestmark = pytest.mark.docker

QUICK = Limits(timeout_s=5, memory_mb=128, output_bytes=4096, pids=32)
SLEEPER = {"main.py": "import time\ntime.sleep(2)\nprint('done')"}


@pytest.fixture(scope="module")
def docker_ready():
    reason = unavailable_reason()
    require(reason is None, reason or "")


@pytest.fixture(scope="module")
def pool(ray_cluster, docker_ready):
    """Two workers of two containers each, shared by the tests that do not kill workers."""
    with RaySandbox(2, pool_size=2, limits=QUICK) as pool:
        yield pool


def py(box, program: str, limits: Limits | None = None, stdin: str = ""):
    return box.run({"main.py": program}, ["python3", "main.py"], stdin=stdin, limits=limits)


def wait_for_run(pool: RaySandbox, timeout_s: float = 10.0) -> int:
    """The slot of the one run in flight, once the worker has had time to start it."""
    deadline = time.monotonic() + timeout_s
    while sum(pool.in_flight()) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.7)  # the call is on its way into the worker and its container
    (slot,) = [i for i, n in enumerate(pool.in_flight()) if n]
    return slot


def test_without_ray_and_bad_arguments():
    """`import sandbox` never imports Ray; a pool without Ray is a typed error."""
    script = (
        "import sys\nfrom rlvr import sandbox\nimport rlvr.sandbox.ray_pool\n"
        "assert 'ray' not in sys.modules\n"
        "try:\n    sandbox.RaySandbox(1)\n"
        "except sandbox.SandboxError as e:\n    print(type(e).__name__, e)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("RayPoolError Ray is not initialized"), done.stdout
    for bad in ({"workers": 0}, {"workers": 1, "pool_size": 0}, {"workers": 1, "max_replacements": -1}):
        with pytest.raises(ValueError):
            RaySandbox(**bad)


def test_runs_come_back_and_spread_over_the_workers(pool):
    assert isinstance(pool, sandbox.Sandbox)
    result = py(pool, "import sys\nprint(6 * 7, sys.stdin.read())\nsys.exit(3)", stdin="in")
    assert (result.status, result.exit_code, result.stdout) == (Status.OK, 3, "42 in\n")
    before = pool.runs_per_worker()

    def one(i: int):
        return i, py(pool, f"import time\ntime.sleep(0.2)\nprint({i} * 2)")

    with ThreadPoolExecutor(8) as threads:
        results = list(threads.map(one, range(16)))
    for i, result in results:
        assert result.ok and result.stdout == f"{i * 2}\n", result
    ran = [after - b for after, b in zip(pool.runs_per_worker(), before, strict=True)]
    assert sum(ran) == 16 and min(ran) >= 4, ran  # both workers took a fair share
    assert pool.in_flight() == [0, 0] and pool.replaced == 0


def test_bad_input_is_the_callers_typed_error(pool):
    with pytest.raises(TypeError, match="non-empty list"):
        pool.run({}, "python3 main.py")
    with pytest.raises(ValueError, match="relative path"):
        pool.run({"../escape.py": ""}, ["true"])
    assert py(pool, "print('fine')").stdout == "fine\n"


@pytest.mark.parametrize("name", ["endless loop", "gigabytes of output", "fork bomb"])
def test_hostile_programs_are_contained(pool, name):
    (case,) = [c for c in CASES if c.name == name]
    start = time.monotonic()
    result = pool.run(case.files(), list(case.command), limits=case.limits)
    elapsed = time.monotonic() - start
    assert result.status in case.expect, result
    assert case.verify is None or case.verify(result) is None, result
    assert elapsed < case.limits.timeout_s + 5, elapsed
    if result.status is Status.TIMEOUT:
        assert case.limits.timeout_s <= result.wall_time < case.limits.timeout_s + 2
    assert py(pool, "print('still here')").stdout == "still here\n"


def test_code_env_scores_the_same_as_a_local_sandbox(pool):
    tasks = builtin_tasks()[::5]  # every kind of test, each difficulty
    jobs = [(t, which) for t in tasks for which in ("reference", "wrong")]

    def scores(box) -> list[tuple]:
        env = envs.make("rlvr/Code-v0", sandbox=box)
        assert env.unwrapped.get_sandbox() is box
        out = []
        for task, which in jobs:
            env.reset(options={"task_id": task.task_id})
            _, reward, _, _, info = env.step(getattr(task, which))
            # not the count of tests passed: a wrong solution may pass a different number from run
            # to run (e.g. one ordering a set of strings, which depends on the program's hash seed)
            out.append((reward, info["verdict"].outcome))
        return out

    before = sum(pool.runs_per_worker())
    on_pool = scores(pool)
    assert sum(pool.runs_per_worker()) > before  # verified on the workers, not here
    with DockerSandbox(pool_size=2) as local:
        assert on_pool == scores(local)
    want = [Outcome.CORRECT if which == "reference" else Outcome.INCORRECT for _, which in jobs]
    assert [outcome for _, outcome in on_pool] == want


def test_a_killed_worker_is_replaced_and_the_run_done_again(ray_cluster, docker_ready):
    with RaySandbox(2, pool_size=1, limits=QUICK) as pool:
        assert all(py(pool, "print(1)").ok for _ in range(2))  # each worker has a warm container
        pids = pool.worker_pids()
        got = {}
        runner = threading.Thread(target=lambda: got.update(result=pool.run(SLEEPER, ["python3", "main.py"])))
        start = time.monotonic()
        runner.start()
        slot = wait_for_run(pool)
        ray_cluster.kill(pool.workers[slot])
        runner.join(timeout=30)
        result = got["result"]
        assert result.ok and result.stdout == "done\n", result
        assert time.monotonic() - start >= 2.5  # run again in full after the kill
        assert pool.replaced == 1 and sum(pool.runs_per_worker()) == 3  # the dead attempt is not counted
        now = pool.worker_pids()
        assert pids[slot] not in now and now[1 - slot] == pids[1 - slot]
        with ThreadPoolExecutor(4) as threads:
            after = list(threads.map(lambda i: py(pool, f"print({i})"), range(8)))
        assert [r.stdout for r in after] == [f"{i}\n" for i in range(8)]
        assert pool.replaced == 1 and sum(pool.runs_per_worker()) == 11


def test_a_run_whose_every_worker_dies_is_unavailable(ray_cluster, docker_ready):
    with RaySandbox(1, pool_size=1, max_replacements=0, limits=QUICK) as pool:
        got = {}
        runner = threading.Thread(target=lambda: got.update(result=pool.run(SLEEPER, ["python3", "main.py"])))
        runner.start()
        slot = wait_for_run(pool)
        ray_cluster.kill(pool.workers[slot])
        runner.join(timeout=30)
        result = got["result"]
        assert result.status is Status.UNAVAILABLE and result.exit_code is None and not result.ok
        assert "worker died under this run (deaths: 1" in result.detail and result.stdout == ""
        assert pool.replaced == 1 and pool.runs_per_worker() == [0]
        assert py(pool, "print('back')").stdout == "back\n"  # the pool kept its size


def test_copies_run_on_the_same_workers(pool, ray_cluster):
    pids = pool.worker_pids()
    copy = pickle.loads(pickle.dumps(pool))
    assert copy is not pool and copy.worker_pids() == pids
    assert py(copy, "print('copy')").stdout == "copy\n"
    assert sum(copy.runs_per_worker()) == 1  # its own counters

    @ray_cluster.remote(num_cpus=0)
    def verify_remotely(box) -> tuple:
        results = [py(box, f"print({i} + 1)") for i in range(4)]
        return [r.stdout for r in results], box.worker_pids(), box.runs_per_worker()

    stdouts, remote_pids, runs = ray_cluster.get(verify_remotely.remote(pool))
    assert stdouts == ["1\n", "2\n", "3\n", "4\n"] and remote_pids == pids and sum(runs) == 4
    copy.close()  # a copy ends only the workers it started: none
    assert copy.closed and not pool.closed
    assert py(copy, "print(1)").status is Status.UNAVAILABLE
    assert py(pool, "print('original')").stdout == "original\n" and pool.worker_pids() == pids


def test_use_shared_sandbox_puts_the_pool_in_place(pool):
    from rlvr.envs.tasks.code import CodeEnv

    previous = sandbox.use_shared_sandbox(pool)
    try:
        assert sandbox.shared_sandbox() is pool
        env = CodeEnv(difficulty=1)  # no sandbox of its own: the shared one at step time
        task = env.tasks[0]
        before = sum(pool.runs_per_worker())
        assert env.verify(task, task.reference).outcome is Outcome.CORRECT
        assert sum(pool.runs_per_worker()) == before + 1
    finally:
        assert sandbox.use_shared_sandbox(previous) is pool
    restored = sandbox.shared_sandbox()
    # the previous one again; or, when there was none or an earlier test closed it, a new local one
    assert restored is not pool and (previous is None or previous.closed or restored is previous)
    assert isinstance(restored, DockerSandbox)
