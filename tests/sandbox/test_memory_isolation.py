"""No run reads an earlier run's data in its own memory (issue #40): programs are forked from the
runner's zygote (runner_zygote.py), whose memory never held a request, so a program that scans
every byte it can read finds nothing of the runs before it in the same warm container (their
command, files, stdin, output), and a shown test of rlvr/CodeFeedback-v0 finds none of the held-out
inputs that the attempt before it ran.

Each scan looks for a random marker as its two halves joined, so that the scanner's own memory
never holds the marker unless it came from somewhere else; a second marker that the scanner does
hold (its stdin, its argument) shows that the scan sees what is there. Forked from the runner
itself, as before the zygote, every scan here found the earlier run's marker (5 to 9 copies) and
the shown test found the held-out inputs."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import signal
import threading
import time

import docker
import gymnasium as gym
import pytest

from rlvr import envs  # noqa: F401 - registers rlvr/ environments
from rlvr.envs.tasks.code import fenced
from rlvr.sandbox import DockerSandbox, Limits, container, unavailable_reason
from rlvr.sandbox.container import Shape
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require
from tests.sandbox.engine_view import PRINT_CONTAINER

QUICK = Limits(timeout_s=10, memory_mb=128, output_bytes=1 << 16, pids=16)

# Every readable anonymous mapping (heap, stack, the allocator's arenas; files mapped hold no
# request), read in place with ctypes: /proc/self/mem would also do, but a supervised program's
# process is not dumpable. `halves`: {name: (first half, second half)}; returns (regions, {name: hits}).
SCAN = r"""
import ctypes

def scan(halves):
    needles = {name: (a.encode(), b.encode()) for name, (a, b) in halves.items()}
    hits = {name: 0 for name in halves}
    with open("/proc/self/maps") as maps:
        lines = maps.read().splitlines()
    regions, step = 0, 1 << 20
    for line in lines:
        fields = line.split()
        name = fields[5] if len(fields) > 5 else ""
        if fields[1][0] != "r" or name.startswith("/") or name in ("[vsyscall]", "[vdso]") or "vvar" in name:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        regions += 1
        for at in range(start, end, step):
            data = ctypes.string_at(at, min(step + 64, end - at))
            for key, (first, second) in needles.items():
                i = data.find(first)
                while i >= 0:
                    hits[key] += data[i + len(first) : i + len(first) + len(second)] == second
                    i = data.find(first, i + 1)
    return regions, hits
"""
LEAVE = """import sys
# {marker}
data = open("data.txt").read()
print(sys.argv[1], sys.stdin.read(), data)
print(sys.argv[1], data, file=sys.stderr)
"""
LOOK = (
    SCAN
    + """
import json, sys
own = sys.stdin.read()
regions, hits = scan({"earlier": (sys.argv[1], sys.argv[2]), "own": (sys.argv[3], sys.argv[4])})
print(json.dumps({"regions": regions, "hits": hits, "own_len": len(own)}))
"""
    + PRINT_CONTAINER
)


def marker() -> tuple[str, str]:
    """A fresh random marker, as its two halves (32 hex digits joined)."""
    return secrets.token_hex(8), secrets.token_hex(8)


@pytest.fixture(scope="module", params=["own pid namespaces", "shared pid namespace"])
def box(request):
    """One warm container (pool_size=1), with a pid namespace per run and without (the fallback,
    where the zygote relays the program's wait status)."""
    reason = unavailable_reason()
    require(reason is None, reason or "")
    own = request.param == "own pid namespaces"
    hardening = container.hardening
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(container, "hardening", lambda *a, **k: hardening(*a, **{**k, "own_pids": own and k["own_pids"]}))
        with DockerSandbox(pool_size=1, limits=QUICK) as sandbox:
            sandbox.run({}, ["true"])  # started, and in the mode asked for
            assert [c.own_pids for c in sandbox._pool._all] == [own]
            yield sandbox


def leave(box, mark: str, limits: Limits = QUICK) -> str:
    """A run whose command, file, stdin, stdout and stderr all hold `mark`: its container's id."""
    files = {"main.py": LEAVE.format(marker=mark), "data.txt": mark}
    result = box.run(files, ["python3", "main.py", mark], stdin=mark, limits=limits)
    assert result.ok and result.stdout.count(mark) == 3 and mark in result.stderr, result
    ids = box.run({"main.py": PRINT_CONTAINER}, ["python3", "main.py"], limits=QUICK)
    assert ids.ok, ids
    return ids.stdout.strip()


def look(box, earlier: tuple[str, str], command: tuple[str, ...] = ("python3", "main.py")) -> tuple[dict, str]:
    own = marker()
    result = box.run({"main.py": LOOK}, [*command, *earlier, *own], stdin="".join(own) * 4, limits=QUICK)
    assert result.ok, result
    report, where = result.stdout.splitlines()
    return json.loads(report), where


@pytest.mark.docker
@pytest.mark.parametrize("supervise", [False, True], ids=["plain", "supervised"])
def test_a_program_finds_nothing_of_an_earlier_run_in_its_memory(box, supervise):
    earlier = marker()
    where = leave(box, "".join(earlier), dataclasses.replace(QUICK, supervise=supervise))
    for _ in range(2):  # the next run, and the one after it
        report, same = look(box, earlier)
        assert same == where, "not the same warm container"
        assert report["regions"] > 3 and report["hits"]["own"] > 0, report  # the scan sees its own stdin
        assert report["hits"]["earlier"] == 0, report


@pytest.mark.docker
def test_an_execd_program_finds_nothing_either(box):
    """`env python3` is exec'd, not run in the forked interpreter: a fresh image, the same answer."""
    earlier = marker()
    where = leave(box, "".join(earlier))
    report, same = look(box, earlier, ("/usr/bin/env", "python3", "main.py"))
    assert same == where and report["hits"] == {"earlier": 0, "own": report["hits"]["own"]}, report
    assert report["hits"]["own"] > 0, report


# A CodeFeedback record whose shown and held-out inputs are random markers.
SHOWN, HELD = marker(), marker()
RECORD = {
    "id": "Memory/echo",
    "prompt": "Write `echo(s: str) -> str` returning s unchanged.",
    "entry_point": "echo",
    "reference": "def echo(s):\n    return s\n",
    "tests": [
        {"fn": "echo", "args": ["".join(SHOWN) + f"-{i}"], "expected": "".join(SHOWN) + f"-{i}"} for i in range(2)
    ],
    "heldout_tests": [
        {"fn": "echo", "args": ["".join(HELD) + f"-{i}"], "expected": "".join(HELD) + f"-{i}"} for i in range(2)
    ],
}
SCANNER = (
    SCAN
    + f"""
def echo(s):
    regions, hits = scan({{"held": {HELD!r}, "shown": {SHOWN!r}}})
    raise ValueError(f"SCANNED {{regions}} regions: held {{hits['held']}} shown {{hits['shown']}}")
"""
)


@pytest.mark.docker
def test_a_shown_test_finds_no_held_out_input_in_its_memory(box, tmp_path):
    """Attempt 1 runs the held-out tests (their inputs in the harness's spec, in the sandbox); attempt
    2's shown tests, in the same warm container, scan their memory for them: the feedback quotes
    what they found."""
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(RECORD) + "\n")
    env = gym.make("rlvr/CodeFeedback-v0", source=str(path), sandbox=box, timeout_s=10.0).unwrapped
    try:
        env.reset(options={"task_id": "Memory/echo"})
        _, _, done, _, info = env.step(fenced("def echo(s):\n    return s + '!'\n"))
        assert not done and info["verdict"].outcome is Outcome.INCORRECT, info["verdict"]
        reply, _, _, _, info = env.step(fenced(SCANNER))
        text = "\n".join(m["content"] for m in reply)
        assert "SCANNED" in text and "shown 0" not in text, text  # the scan found the test's own input
        assert "held 0 " in text, text
        assert "".join(HELD) not in text, text
    finally:
        env.close()


# ---- the zygote: out of the program's reach, and its death a host error, never a hang -----------
def processes(container_id: str) -> dict[str, int]:
    """Host pids of the container's runner and its zygote (the engine's view)."""
    client = docker.from_env(timeout=30)
    try:
        found = client.api.top(container_id, ps_args="-o pid,ppid,stat")["Processes"]
    finally:
        client.close()
    live = {int(pid): int(ppid) for pid, ppid, stat in found if not stat.startswith("Z")}
    init = next(pid for pid, ppid in live.items() if ppid not in live)
    runner = min(pid for pid, ppid in live.items() if ppid == init)
    return {"runner": runner, "zygote": min(pid for pid, ppid in live.items() if ppid == runner)}


REACH = """import errno, json, os, signal
def attempt(call):
    try:
        call()
        return "allowed"
    except OSError as exc:
        return errno.errorcode[exc.errno]
def read(path):
    with open(path, "rb") as handle:
        handle.read(1)
zygote = os.getppid()  # or, in a pid namespace of its own, the run's pid 1
report = {
    "signal": attempt(lambda: os.kill(zygote, 0)),
    "mem": attempt(lambda: read(f"/proc/{zygote}/mem")),
    "environ": attempt(lambda: read(f"/proc/{zygote}/environ")),
    "fds": attempt(lambda: os.listdir(f"/proc/{zygote}/fd")),
}
try:
    os.kill(-1, signal.SIGKILL)  # all this user may signal: its own processes
except OSError:
    pass
print(json.dumps(report))
"""


@pytest.mark.docker
def test_the_zygote_is_out_of_the_programs_reach(box):
    """Where a program sees it (a shared pid namespace: the zygote is its parent) it can neither
    signal nor read it, and its kill(-1) leaves it be: the next run starts as usual. (In a pid
    namespace of its own the parent is the run's pid 1, as far from its reach.)"""
    result = box.run({"main.py": REACH}, ["python3", "main.py"])
    assert result.ok, result
    assert json.loads(result.stdout) == {"signal": "EPERM", "mem": "EACCES", "environ": "EACCES", "fds": "EACCES"}
    after = box.run({"main.py": "print(1)"}, ["python3", "main.py"])
    assert after.ok and "container replaced" not in result.detail + after.detail, (result, after)


@contextlib.contextmanager
def warm_container(box):
    """The box's warm container, taken from its pool, with the host pid of its zygote; replaced after."""
    box.run({}, ["true"])
    warm = box._pool.acquire(Shape.of(QUICK))
    try:
        yield warm, processes(warm.id)["zygote"]
    finally:
        box._pool.release(warm, replace=True)


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except PermissionError:
        pytest.skip("the container's processes cannot be signalled from here")


def call(box, warm, program: str) -> tuple[dict, float]:
    """The runner's reply to one run of `program` in `warm`, and the seconds it took."""
    header, blobs = box._request({"main.py": program}, ["python3", "main.py"], "", QUICK)
    start = time.monotonic()
    reply, _ = warm.call(header, blobs, 10)
    return reply, time.monotonic() - start


@pytest.mark.docker
def test_a_dead_zygote_is_a_host_error_and_the_container_is_replaced(box):
    with warm_container(box) as (warm, zygote):
        kill(zygote)
        reply, seconds = call(box, warm, "print(1)")
        assert "error" in reply and "zygote" in reply["error"] and reply["dirty"], reply
        assert seconds < 2, "the runner waited for a dead zygote"
    result = box.run({"main.py": "print(1)"}, ["python3", "main.py"])
    assert result.ok and warm not in box._pool._all, result


@pytest.mark.docker
def test_the_zygote_dying_during_a_run_never_hangs_the_runner(box):
    """Without a pid namespace the zygote relays the program's wait status: the run fails as a host
    error. With one, pid 1 relays it: the run ends as usual, and the next one fails."""
    with warm_container(box) as (warm, zygote):
        killer = threading.Timer(0.3, kill, (zygote,))
        killer.start()
        reply, seconds = call(box, warm, "import time\ntime.sleep(1)\nprint(1)")
        killer.join()
        if warm.own_pids:
            assert reply["status"] == "ok" and reply["exit_code"] == 0 and seconds < 4, reply
            reply, seconds = call(box, warm, "print(1)")
        assert "error" in reply and "zygote" in reply["error"] and reply["dirty"], reply
        assert seconds < 4, reply
