"""Each run in a pid namespace of its own (runner_pidns.py, issue #40): whatever an earlier run in the
same warm container forked, a program sees the same pids; it sees and signals nothing outside its
namespace; the masks Docker puts on /proc are there too; and the runner's supervision (the pids
limit, statuses, signals) is what it was."""

from __future__ import annotations

import dataclasses
import json

import docker
import pytest

from rlvr.sandbox import DockerSandbox, Limits, Status, runner_pidns, seccomp, unavailable_reason
from tests.conftest import require
from tests.sandbox.engine_view import PRINT_CONTAINER

QUICK = Limits(timeout_s=5, memory_mb=128, output_bytes=1 << 16, pids=16)

# Everything a program could read a pid from, after forking one child and starting one thread.
OBSERVE = (
    """import json, os, threading
def stat_pid(path):
    return open(path).read().split()[0]
child = os.fork()
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
thread = []
worker = threading.Thread(target=lambda: thread.append(threading.get_native_id()))
worker.start()
worker.join()
status = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\\t" in l)
print(json.dumps({
    "pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
    "self": os.readlink("/proc/self"), "stat": stat_pid("/proc/self/stat"), "nspid": status["NSpid"].strip(),
    "procs": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "loadavg_last_pid": open("/proc/loadavg").read().split()[-1],
    "ns_last_pid": open("/proc/sys/kernel/ns_last_pid").read().strip(),
    "child": child, "thread": thread[0], "cgroup": os.listdir("/sys/fs/cgroup"),
}))
"""
    + PRINT_CONTAINER
)
FORK = """import os, sys, threading, subprocess
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
threading.Thread(target=lambda: None).start()
subprocess.run(["true"])
"""
EXPECTED = {
    "pid": 2,
    "ppid": 1,
    "pgid": 2,
    "sid": 2,
    "self": "2",
    "stat": "2",
    "nspid": "2",
    "procs": [1, 2],
    "loadavg_last_pid": "4",
    "ns_last_pid": "4",
    "child": 3,
    "thread": 4,
    "cgroup": [],
}


@pytest.fixture(scope="module")
def box():
    reason = unavailable_reason()
    require(reason is None, reason or "")
    with DockerSandbox(pool_size=1, limits=QUICK) as sandbox:
        yield sandbox


def observe(box, command=("python3", "main.py")) -> tuple[dict, str]:
    result = box.run({"main.py": OBSERVE}, list(command))
    assert result.ok, result
    report, container = result.stdout.splitlines()
    return json.loads(report), container


def test_the_seccomp_profile_lets_through_only_the_runners_namespace_calls():
    """Exactly the runner's unshare, setns and mount arguments, never CLONE_NEWUSER."""
    allowed: dict[str, set[int]] = {}
    for rule in seccomp.profile()["syscalls"]:
        for name in set(rule["names"]) & {"unshare", "setns", "mount"}:
            assert rule["action"] == "SCMP_ACT_ALLOW" and len(rule["args"]) == 1, rule
            assert rule["args"][0]["op"] == "SCMP_CMP_EQ", rule
            allowed.setdefault(name, set()).add(rule["args"][0]["value"])
    assert allowed == {
        "unshare": set(runner_pidns.UNSHARE_FLAGS),
        "setns": {runner_pidns.CLONE_NEWPID},
        "mount": set(runner_pidns.MOUNT_FLAGS),
    }
    assert not any(flags & 0x10000000 for flags in allowed["unshare"])  # CLONE_NEWUSER


@pytest.mark.docker
def test_pids_are_the_same_whatever_an_earlier_run_forked(box):
    first, container = observe(box)
    assert first == EXPECTED, first
    for forks in (0, 1, 50, 13):
        forker = box.run({"main.py": FORK}, ["python3", "main.py", str(forks)])
        assert forker.ok and "container replaced" not in forker.detail, forker
        seen, same = observe(box)
        assert (seen, same) == (first, container)  # the same warm container, nothing to learn
    exec_d, same = observe(box, ("/usr/bin/env", "python3", "main.py"))  # exec'd, not forked in-process
    assert same == container and exec_d["pid"] == 2 and exec_d["ppid"] == 1 and exec_d["procs"] == [1, 2], exec_d


@pytest.mark.docker
def test_nothing_outside_the_namespace_can_be_seen_or_signalled(box):
    program = """import ctypes, errno, json, os, signal
libc = ctypes.CDLL(None, use_errno=True)
report = {}
def attempt(name, call):
    ctypes.set_errno(0)
    report[name] = "allowed" if call() == 0 else errno.errorcode[ctypes.get_errno()]
for name, sig in (("kill_pid1", signal.SIGKILL), ("term_pid1", signal.SIGTERM)):
    attempt(name, lambda: libc.kill(1, sig))
attempt("kill_all", lambda: libc.kill(-1, signal.SIGKILL))
attempt("unshare_pid", lambda: libc.unshare(0x20000000))
attempt("unshare_mnt", lambda: libc.unshare(0x20000))
fd = os.open("/proc/self/ns/pid", os.O_RDONLY)
attempt("setns_pid", lambda: libc.setns(fd, 0x20000000))
attempt("mount_proc", lambda: libc.mount(b"proc", b"/tmp", b"proc", ctypes.c_ulong(0xE), None))
attempt("mount_bind", lambda: libc.mount(b"/proc", b"/tmp", None, ctypes.c_ulong(0x1000), None))
attempt("remount_private", lambda: libc.mount(None, b"/", None, ctypes.c_ulong(0x44000), None))
report["pid1_owner"] = os.stat("/proc/1").st_uid
print(json.dumps(report))
"""
    common = {
        "kill_all": "ESRCH",  # no other process in its namespace
        "unshare_pid": "EPERM",
        "unshare_mnt": "EPERM",
        "setns_pid": "EPERM",
        "mount_proc": "EPERM",
        "mount_bind": "EPERM",
        "remount_private": "EPERM",
        "pid1_owner": 0,
    }
    # A program may not signal pid 1 (root). A supervisor (CAP_KILL) may, but pid 1 ignores any signal
    # sent from inside its namespace: the run goes on (were pid 1 dead, so would be the whole run).
    for limits, signals in ((QUICK, "EPERM"), (dataclasses.replace(QUICK, supervise=True), "allowed")):
        result = box.run({"main.py": program}, ["python3", "main.py"], limits=limits)
        assert result.ok, result
        assert json.loads(result.stdout) == {**common, "kill_pid1": signals, "term_pid1": signals}


@pytest.mark.docker
def test_proc_keeps_the_containers_masks(box):
    """The program's /proc is a new one, with every mount Docker put below /proc copied over it."""

    def below_proc(mountinfo: str) -> dict[str, tuple[str, ...]]:
        found = {}
        for line in mountinfo.splitlines():
            fields, _, tail = line.partition(" - ")
            f = fields.split()
            if f[4].startswith("/proc/"):
                found[f[4]] = (f[2], f[3], f[5], tail)  # device, root, mount options, type/source/options
        return found

    result = box.run(
        {"main.py": "print(open('/proc/self/mountinfo').read())\n" + PRINT_CONTAINER}, ["python3", "main.py"]
    )
    assert result.ok, result
    *lines, container = result.stdout.splitlines()
    mountinfo = "\n".join(lines)
    client = docker.from_env(timeout=30)
    exec_id = client.api.exec_create(container, ["cat", "/proc/self/mountinfo"], user="0")["Id"]
    theirs = below_proc(client.api.exec_start(exec_id).decode())
    assert theirs and below_proc(mountinfo) == theirs
    assert "ro," in theirs["/proc/sys"][2] + ","


@pytest.mark.docker
def test_the_pids_limit_and_the_statuses_are_what_they_were(box):
    hold = """import os, sys, time
kids = []
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print(len(kids) + 1)
"""
    limits = Limits(timeout_s=5, memory_mb=128, output_bytes=4096, pids=8)
    full = box.run({"main.py": hold}, ["python3", "main.py", "7"], limits=limits)
    assert full.ok and full.stdout == "8\n", full  # `pids` processes of its own: all of them
    over = box.run({"main.py": hold}, ["python3", "main.py", "8"], limits=limits)
    assert over.status is Status.KILLED and "process limit of 8" in over.detail, over
    for program, code, signal in (
        ("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", -15, "SIGTERM"),
        ("import os\nos.abort()", -6, "SIGABRT"),
        ("import ctypes\nctypes.string_at(0)", -11, "SIGSEGV"),
    ):
        died = box.run({"main.py": program}, ["python3", "main.py"])
        assert (died.status, died.exit_code) == (Status.KILLED, code) and signal in died.detail, died
    assert box.run({"main.py": "raise SystemExit(7)"}, ["python3", "main.py"]).exit_code == 7


@pytest.mark.docker
def test_an_engine_that_refuses_the_namespace_gets_the_shared_one(monkeypatch):
    """Without CAP_SYS_ADMIN (or with mount refused, as AppArmor's default profile does) the runner
    says so and runs programs in the container's pid namespace, supervised as before."""
    reason = unavailable_reason()
    require(reason is None, reason or "")
    from rlvr.sandbox import container

    hardening = container.hardening
    monkeypatch.setattr(container, "hardening", lambda *a, **k: hardening(*a, **{**k, "own_pids": False}))
    with DockerSandbox(pool_size=1, limits=QUICK) as shared:
        seen = shared.run({"main.py": "import os\nprint(os.getpid(), os.getppid())"}, ["python3", "main.py"])
        assert seen.ok and seen.stdout.split()[0] != "2" and seen.stdout.split()[1] != "1", seen
        assert [c.own_pids for c in shared._pool._all] == [False]
        loop = shared.run(
            {"main.py": "import os\nos.fork()\nwhile True:\n    pass\n"},
            ["python3", "main.py"],
            limits=dataclasses.replace(QUICK, timeout_s=0.5),
        )
        assert loop.status is Status.TIMEOUT and loop.exit_code == -9 and "container replaced" not in loop.detail
        daemon = shared.run(
            {"main.py": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(100)\nprint('bye')"},
            ["python3", "main.py"],
        )
        assert daemon.ok and "container replaced" in daemon.detail and "process" in daemon.detail
        crash = shared.run(
            {"main.py": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"}, ["python3", "main.py"]
        )
        assert (crash.status, crash.exit_code) == (Status.KILLED, -11)
