"""Programs that try to turn a code verdict into `error` (left out of training and pass@k, so a
way to dodge a 0) by attacking the sandbox: their own verdict, or an innocent neighbour's in the
same container. Each goes through `verifiers.code.verify` and the real `DockerSandbox` (a pool of
one container, so the next program lands where the last one ran). Issue #26, section 4."""

from __future__ import annotations

import json
import os
import re
import threading
import time

import gymnasium as gym
import pytest

from rlvr import envs  # noqa: F401 - registers rlvr/ environments
from rlvr.envs.tasks.code import fenced
from rlvr.sandbox import DockerSandbox, Limits, Status, unavailable_reason
from rlvr.sandbox.hostile import OOM_SCORE, SYSCALLS, _oom_floor, _syscalls_refused
from rlvr.verifiers import code
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require

pytestmark = pytest.mark.docker

TESTS = [code.CallTest("add", (1, 2), 3), code.CallTest("add", (20, 22), 42)]
CORRECT = "def add(a, b):\n    return a + b\n"
KILL_MARK = "rlvr-kill-me"  # the process name the container killer below looks for


@pytest.fixture(scope="module")
def box():
    reason = unavailable_reason()
    require(reason is None, reason or "")
    with DockerSandbox(pool_size=1) as sandbox:
        yield sandbox


def verdict(box, program: str):
    return code.verify(fenced(program), TESTS, box, scoring="fraction")


def assert_charged(result, why: str) -> None:
    """Scored 0 as the program's own failure, never the grader's `error`."""
    assert result.outcome is Outcome.INCORRECT and result.score == 0.0, (why, result)
    assert {t["status"] for t in result.info["tests"]} <= {"wrong_answer", "runtime_error", "skipped", "timeout"}


def assert_innocent_passes(box) -> None:
    result = verdict(box, CORRECT)
    assert result.outcome is Outcome.CORRECT and result.score == 1.0, result


FLOOD = """import os
for where in (".", "/tmp", "/dev/shm"):
    try:
        for i in range(100000):  # the inode bound of each tmpfs stops it long before
            os.mkdir(os.path.join(where, f"flood{i}"))
    except OSError:
        pass
"""
INODE_FLOOD = FLOOD + "def add(a, b):\n    return a + b + 1\n"  # wrong: scored on its answer


def test_empty_directory_flood_is_scored_zero_never_error(box):
    """Empty directories cost kernel memory and no bytes: without an inode bound they filled the
    container and the runner died (4 of 5 runs `error`). Five runs: each one the program's 0."""
    for run in range(5):
        assert_charged(verdict(box, INODE_FLOOD), f"run {run}")
    assert_innocent_passes(box)


def test_a_program_starts_at_oom_score_1000_and_cannot_lower_it_below_the_runner(box):
    result = box.run({"main.py": OOM_SCORE}, ["python3", "main.py"])
    assert result.ok, result
    assert _oom_floor(result) is None, result.stdout
    report = json.loads(result.stdout)
    if report["runner"] == "-1000":  # the engine granted CAP_SYS_RESOURCE: the floor holds
        assert report["lowered"] == "Permission denied" and report["now"] == "1000", report


def test_lowering_the_oom_score_then_flooding_memory_is_the_programs_zero(box):
    """Where the engine cannot keep the floor (no CAP_SYS_RESOURCE) a program can write its score
    back; whatever the OOM killer then takes, the verdict is the program's 0."""
    program = (
        "import os, time\n"
        "def add(a, b):\n"
        "    try:\n"
        "        open('/proc/self/oom_score_adj', 'w').write('0')\n"
        "    except OSError:\n"
        "        pass\n"
        "    children = []\n"
        "    for _ in range(6):  # each under its own limit, together over the container's\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            block = b'x' * (150 << 20)\n"
        "            time.sleep(1)\n"
        "            os._exit(0)\n"
        "        children.append(pid)\n"
        "    failed = [p for p in children if os.waitpid(p, 0)[1] != 0]\n"
        "    return a + b + len(failed)\n"
    )
    assert_charged(verdict(box, program), "lowered OOM score")
    assert_innocent_passes(box)


@pytest.mark.parametrize("depth", [1100, 20000])
def test_a_deep_directory_chain_left_behind_spares_the_next_program(box, depth):
    """A correct program leaves a chain of directories deeper than Python's recursion limit (and, at
    20,000, than the inode bound lets it finish): it passes, and so does the next program."""
    program = (
        "import os\n"
        "made = 0\n"
        "try:\n"
        f"    for _ in range({depth}):\n"
        "        os.mkdir('chain')\n"
        "        os.chdir('chain')\n"
        "        made += 1\n"
        "    os.chmod('.', 0)\n"
        "except OSError:\n"
        "    pass\n"
        "def add(a, b):\n"
        "    return a + b\n"
    )
    result = verdict(box, program)
    assert result.outcome is Outcome.CORRECT, result
    assert_innocent_passes(box)


def test_through_code_v0_a_flood_and_a_deep_chain_then_the_reference(box):
    """The same attacks through the environment a trainer steps: each is the program's 0, and the
    task's reference solution, next in the same container, still scores 1."""
    env = gym.make("rlvr/Code-v0", scoring="fraction", timeout_s=2.0, sandbox=box).unwrapped
    chain = (
        "import os\n"
        "try:\n"
        "    for _ in range(20000):\n"
        "        os.mkdir('c')\n"
        "        os.chdir('c')\n"
        "except OSError:\n"
        "    pass\n"
    )
    try:
        for attack in (FLOOD, chain):
            env.reset(options={"task_id": "reverse_words"})
            _, reward, _, _, info = env.step(fenced(attack + "def reverse_words(s):\n    return None\n"))
            assert reward == 0.0 and info["verdict"].outcome is Outcome.INCORRECT, info["verdict"]
            env.reset(options={"task_id": "reverse_words"})
            _, reward, _, _, info = env.step(env.get_task("reverse_words").reference)
            assert reward == 1.0 and info["verdict"].outcome is Outcome.CORRECT, info["verdict"]
    finally:
        env.close()


def _sandbox_processes_named(mark: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as handle:
                if handle.read().strip() == mark:
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _container_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cgroup") as handle:
            match = re.search(r"([0-9a-f]{64})", handle.read())
    except OSError:
        return None
    return match.group(1) if match else None


def test_a_program_that_kills_its_container_every_time_is_charged(box):
    """No program should be able to take its container down any more; this one does it through a
    helper on the host (it names itself, the test kills its container: a stand-in for any way yet
    unknown). Every run kills a fresh container, the engine stays healthy: the verdict is the
    program's 0 with a runtime reason, never `error`, and the next program passes."""
    import docker

    client = docker.from_env(timeout=30)
    stop, killed = threading.Event(), []

    def killer():
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            for pid in _sandbox_processes_named(KILL_MARK):
                container = _container_of(pid)
                if container and container not in killed:
                    killed.append(container)
                    try:
                        client.api.kill(container)
                    except docker.errors.APIError:
                        pass
            time.sleep(0.02)

    program = (
        "import ctypes, time\n"
        "def add(a, b):\n"
        f"    ctypes.CDLL(None).prctl(15, {KILL_MARK.encode()!r}, 0, 0, 0)  # PR_SET_NAME\n"
        "    time.sleep(30)\n"
        "    return a + b\n"
    )
    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        result = verdict(box, program)
    finally:
        stop.set()
        thread.join(timeout=10)
    require(bool(killed), "the sandbox's processes are not visible from here")
    assert len(killed) >= 2, killed
    assert_charged(result, "killed its container")
    first = result.info["tests"][0]
    assert first["status"] == "runtime_error" and "killed its sandbox container" in first["detail"], first
    assert_innocent_passes(box)


def test_the_sandbox_result_says_whose_failure_a_lost_container_is():
    """An engine that is gone is `unavailable` (the grader's failure), not a program's kill."""
    with DockerSandbox(pool_size=1, base_url="unix:///nonexistent/docker.sock") as gone:
        result = gone.run({}, ["true"], limits=Limits(timeout_s=1))
    assert result.status is Status.UNAVAILABLE and not result.killed_container


def test_the_system_calls_a_program_sees_refused(box):
    """io_uring, keyrings, bpf, namespaces, mounting, ptrace and the rest refused with EPERM
    (clone3 with ENOSYS, so that glibc falls back to clone); ordinary calls still work."""
    result = box.run({"main.py": SYSCALLS}, ["python3", "main.py"])
    assert result.ok, result
    report = json.loads(result.stdout)
    if report["machine"] != "x86_64":
        pytest.skip("the table holds x86_64 system call numbers")
    assert _syscalls_refused(result) is None, report
    for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        assert report[name] == "EPERM"
    assert report["clone3"] == "ENOSYS" and report["getpid"] == "allowed" and report["socket(AF_UNIX)"] == "allowed"
