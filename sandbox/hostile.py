"""The hostile programs of the sandbox check: each one attacks the sandbox, and names the statuses
it must end with and what its output must show. `check.py` runs them and verifies the next run."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from .types import Limits, Result, Status

LIMITS = Limits(timeout_s=8, memory_mb=128, output_bytes=64 * 1024, pids=32)
SHORT = replace(LIMITS, timeout_s=1)  # for the cases that must end by the time limit


@dataclass(frozen=True)
class Case:
    name: str
    program: str  # main.py, run as `python3 main.py` unless `command` says otherwise
    expect: frozenset[Status]
    verify: Callable[[Result], str | None] | None = None  # a problem, or None
    command: tuple[str, ...] = ("python3", "main.py")
    before: str | None = None  # a program run just before this one (e.g. to plant a secret)
    limits: Limits = field(default=LIMITS)
    replaced: bool = False  # whether the container must be replaced afterwards

    def files(self) -> dict[str, str]:
        return {"main.py": self.program}


def _stdout_json(result: Result) -> dict:
    try:
        return json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}


def _all_blocked(result: Result) -> str | None:
    report = _stdout_json(result)
    open_ = [k for k, v in report.items() if v != "blocked"]
    if not report:
        return f"no report on stdout: {result.stdout[-200:]!r} {result.stderr[-300:]!r}"
    return f"not blocked: {open_}" if open_ else None


def _capped(result: Result) -> str | None:
    size = len(result.stdout.encode()) + len(result.stderr.encode())
    return None if 0 < size <= LIMITS.output_bytes else f"{size} bytes came back"


def _secret_not_found(result: Result) -> str | None:
    return None if result.stdout.strip() == "not found" else f"found: {result.stdout[-300:]!r}"


def _privileges(result: Result) -> str | None:
    report = _stdout_json(result)
    want = {"uid": 10001, "euid": 10001, "cap_eff": "0000000000000000", "no_new_privs": "1",
            "setuid0": "denied", "suid_copy_euid": 10001, "setuid_files": [], "write_root": "denied"}
    bad = {k: report.get(k) for k, v in want.items() if report.get(k) != v}
    return f"privileges wrong: {bad} {result.stderr[-300:]!r}" if bad else None


def _runner_untouchable(result: Result) -> str | None:
    report = _stdout_json(result)
    bad = {k: v for k, v in report.items() if v != "denied"}
    if not report:
        return f"no report: {result.stderr[-300:]!r}"
    return f"reached the runner: {bad}" if bad else None


def _replaced(result: Result) -> str | None:
    return None if "container replaced" in result.detail else "container was not replaced"


FORK_BOMB = """import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
THREAD_BOMB = """import threading, time
while True:
    threading.Thread(target=time.sleep, args=(100,), daemon=True).start()
"""
MEMORY_BOMB = """chunks = []
while True:
    chunks.append(b"x" * (16 << 20))
"""
MEMORY_BOMB_FORKED = """import os, sys
# each child stays under the per-process limit; together they break the container's
pids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = b"x" * (100 << 20)
        import time; time.sleep(0.3)
        os._exit(0)
    pids.append(pid)
statuses = [os.waitpid(p, 0)[1] for p in pids]
sys.exit(1 if any(os.WIFSIGNALED(s) for s in statuses) else 0)
"""
ENDLESS_LOOP = "while True:\n    pass\n"
SLEEP_FOREVER = "import time\ntime.sleep(10 ** 6)\n"
ESCAPED_LOOP = """import os, time
if os.fork() == 0:
    os.setsid()  # out of the program's process group
    while True:
        pass
time.sleep(10 ** 6)
"""
OUTPUT_FLOOD = """import sys
chunk = "x" * (1 << 20)
while True:
    sys.stdout.write(chunk)
    sys.stderr.write(chunk)
"""
FILL_DISK = """import os
for where in (".", "/tmp", "/dev/shm"):
    try:
        with open(os.path.join(where, "filler"), "wb") as f:
            while True:
                f.write(b"\\0" * (1 << 20))
                f.flush()
    except OSError as e:
        print(where, "full:", e.strerror)
"""
NETWORK = """import json, socket
report = {}
def attempt(name, fn):
    try:
        fn()
        report[name] = "open"
    except OSError:
        report[name] = "blocked"
attempt("dns", lambda: socket.getaddrinfo("deb.debian.org", 80))
attempt("tcp_internet", lambda: socket.create_connection(("1.1.1.1", 53), timeout=1))
attempt("udp_internet", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("8.8.8.8", 53)))
attempt("ipv6", lambda: socket.create_connection(("2606:4700:4700::1111", 53), timeout=1))
print(json.dumps(report))
"""
HOST = """import json, socket
report = {}
def attempt(name, fn):
    try:
        fn()
        report[name] = "open"
    except OSError:
        report[name] = "blocked"
for port in (22, 80, 2375, 2376):
    attempt(f"gateway:{port}", lambda: socket.create_connection(("172.17.0.1", port), timeout=1))
attempt("metadata", lambda: socket.create_connection(("169.254.169.254", 80), timeout=1))
def docker_socket():
    s = socket.socket(socket.AF_UNIX)
    s.connect("/var/run/docker.sock")
attempt("docker.sock", docker_socket)
print(json.dumps(report))
"""
PLANT_SECRET = """import os
for where in (".", "/tmp", "/dev/shm", "/work"):
    try:
        with open(os.path.join(where, "secret.txt"), "w") as f:
            f.write("S3CR3T-7f2a")
    except OSError:
        pass
"""
SEEK_SECRET = """import os
hits = []
for root in ("/work", "/tmp", "/dev/shm", "/dev/mqueue", "/proc"):
    for dirpath, dirs, files in os.walk(root):
        if dirpath.startswith("/proc/") and dirpath.count("/") > 2:
            dirs[:] = []
        for name in files:
            if name.startswith("secret"):
                hits.append(os.path.join(dirpath, name))
print("\\n".join(hits) or "not found")
"""
KILL_RUNNER = """import ctypes, json, os, signal
report = {}
def attempt(name, fn):
    try:
        fn()
        report[name] = "done"
    except OSError:
        report[name] = "denied"
attempt("kill_parent", lambda: os.kill(os.getppid(), signal.SIGKILL))
attempt("kill_init", lambda: os.kill(1, signal.SIGKILL))
attempt("read_runner_environ", lambda: open(f"/proc/{os.getppid()}/environ").read())
attempt("read_runner_mem", lambda: open(f"/proc/{os.getppid()}/mem", "rb").read(1))
attempt("runner_fds", lambda: os.listdir(f"/proc/{os.getppid()}/fd"))
libc = ctypes.CDLL(None, use_errno=True)
def ptrace():
    if libc.ptrace(16, os.getppid(), 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
attempt("ptrace_runner", ptrace)
os.kill(-1, signal.SIGKILL)  # every process this user may signal: none but its own
print(json.dumps(report))
"""
DAEMON = """import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(10 ** 6)
    os._exit(0)
time.sleep(0.1)
print("parent done")
"""
SETUID = """import json, os, shutil, stat, subprocess
report = {"uid": os.getuid(), "euid": os.geteuid()}
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
report["cap_eff"] = status["CapEff"].strip()
report["no_new_privs"] = status.get("NoNewPrivs", "?").strip()
try:
    os.setuid(0)
    report["setuid0"] = "allowed"
except OSError:
    report["setuid0"] = "denied"
shutil.copy("/usr/bin/python3", "py")
os.chmod("py", 0o4755)
out = subprocess.run(["./py", "-c", "import os; print(os.geteuid())"], capture_output=True, text=True)
report["suid_copy_euid"] = int(out.stdout.strip() or -1)
found = []
for top in ("/usr", "/bin", "/sbin", "/opt", "/etc"):
    for dirpath, _, files in os.walk(top):
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                if os.lstat(path).st_mode & (stat.S_ISUID | stat.S_ISGID):
                    found.append(path)
            except OSError:
                pass
report["setuid_files"] = found
try:
    open("/usr/lib/owned", "w")
    report["write_root"] = "allowed"
except OSError:
    report["write_root"] = "denied"
print(json.dumps(report))
"""
SYSV_SHM = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(0, 1 << 16, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT: outlives the process
print("segment", shmid)
"""

S = Status
CASES: tuple[Case, ...] = (
    Case("fork bomb", FORK_BOMB, frozenset({S.KILLED})),
    Case("fork bomb (shell)", "", frozenset({S.KILLED}),
         command=("sh", "-c", "bomb() { bomb | bomb & }; bomb; sleep 100")),
    Case("thread bomb", THREAD_BOMB, frozenset({S.KILLED, S.MEMORY})),  # pids or stacks run out
    Case("memory bomb", MEMORY_BOMB, frozenset({S.MEMORY})),
    Case("memory bomb (forked)", MEMORY_BOMB_FORKED, frozenset({S.MEMORY})),
    Case("endless loop", ENDLESS_LOOP, frozenset({S.TIMEOUT}), limits=SHORT),
    Case("sleeping forever", SLEEP_FOREVER, frozenset({S.TIMEOUT}), limits=SHORT),
    Case("escaped busy child", ESCAPED_LOOP, frozenset({S.TIMEOUT}), limits=SHORT, replaced=True),
    Case("gigabytes of output", OUTPUT_FLOOD, frozenset({S.OUTPUT_LIMIT}), _capped),
    Case("output flood (exec)", "", frozenset({S.OUTPUT_LIMIT}), _capped, command=("yes", "spam")),
    Case("filling the disk", FILL_DISK, frozenset({S.OK}), _replaced, replaced=True),
    Case("connecting to the network", NETWORK, frozenset({S.OK}), _all_blocked),
    Case("connecting to the host", HOST, frozenset({S.OK}), _all_blocked),
    Case("reading other runs' files", SEEK_SECRET, frozenset({S.OK}), _secret_not_found,
         before=PLANT_SECRET),
    Case("killing the runner", KILL_RUNNER, frozenset({S.OK}), _runner_untouchable),
    Case("leaving a daemon behind", DAEMON, frozenset({S.OK}), _replaced, replaced=True),
    Case("setuid tricks", SETUID, frozenset({S.OK}), _privileges),
    Case("leaving shared memory", SYSV_SHM, frozenset({S.OK}), _replaced, replaced=True),
)
