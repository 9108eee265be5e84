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
    want = {
        "uid": 10001,
        "euid": 10001,
        "cap_eff": "0000000000000000",
        "no_new_privs": "1",
        "setuid0": "denied",
        "suid_copy_euid": 10001,
        "setuid_files": [],
        "write_root": "denied",
    }
    bad = {k: report.get(k) for k, v in want.items() if report.get(k) != v}
    return f"privileges wrong: {bad} {result.stderr[-300:]!r}" if bad else None


def _runner_untouchable(result: Result) -> str | None:
    report = _stdout_json(result)
    bad = {k: v for k, v in report.items() if v != "denied"}
    if not report:
        return f"no report: {result.stderr[-300:]!r}"
    return f"reached the runner: {bad}" if bad else None


def _syscalls_refused(result: Result) -> str | None:
    report = _stdout_json(result)
    if report.get("seccomp_mode") != "2":
        return f"no seccomp filter: {report or result.stderr[-300:]!r}"
    if report.get("machine") != "x86_64":
        return None  # the table holds x86_64 numbers
    want = {
        **{name: "EPERM" for name in REFUSED_SYSCALLS},
        "clone3": "ENOSYS",
        "getpid": "allowed",
        "personality(READ_IMPLIES_EXEC)": "EPERM",
        "socket(AF_ALG)": "EPERM",
        "socket(AF_VSOCK)": "EPERM",
        "socket(AF_UNIX)": "allowed",
    }
    bad = {k: report.get(k) for k, v in want.items() if report.get(k) != v}
    return f"system calls not refused as they should be: {bad}" if bad else None


def _oom_floor(result: Result) -> str | None:
    """The program starts at 1000; where the runner holds its floor (-1000: the engine granted
    CAP_SYS_RESOURCE) the program cannot lower its own score. Elsewhere (container.py) it can, and
    a run that then kills its container is charged to it (docker_sandbox.py)."""
    report = _stdout_json(result)
    if report.get("start") != "1000":
        return f"the program does not start at OOM score 1000: {report or result.stderr[-300:]!r}"
    if report.get("runner") == "-1000" and (report.get("lowered") == "allowed" or report.get("now") != "1000"):
        return f"the program lowered its OOM score: {report}"
    return None


def _fresh_pids(result: Result) -> str | None:
    """The same pids whatever the run before forked (runner_pidns.py): its own namespace, its own
    /proc, no cgroup counters."""
    report = _stdout_json(result)
    want = {"pid": 2, "self": "2", "last_pid": "2", "cgroup": [], "child": 3}
    bad = {k: report.get(k) for k in want if report.get(k) != want[k]}
    return f"pids tell what an earlier run forked: {bad} {result.stderr[-300:]!r}" if bad else None


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
try:
    os.kill(-1, signal.SIGKILL)  # every process this user may signal: none but its own
except ProcessLookupError:  # alone in its pid namespace (runner_pidns.py), with no one else to signal
    pass
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
SYSV_IPC = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(0, 1 << 16, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT: removed when its user goes
msqid = libc.msgget(0, 0o1000 | 0o600)  # a message queue outlives the process: the container is replaced
print("segment", shmid, "queue", msqid)
"""
INODE_FLOOD = """import os
made = 0
for where in (".", "/tmp", "/dev/shm"):
    try:
        for i in range(200000):  # bounded: nr_inodes stops it long before
            os.mkdir(os.path.join(where, f"d{i}"))
            made += 1
    except OSError as e:
        print(where, "full:", e.strerror)
print("made", made)
"""
DEEP_CHAIN = """import os
made = 0
try:
    for _ in range(20000):  # deeper than Python's recursion limit, longer than PATH_MAX
        os.mkdir("d")
        os.chdir("d")
        made += 1
    os.chmod(".", 0)
except OSError as e:
    print("stopped:", e.strerror)
print("deep", made)
"""
# x86_64 numbers of system calls the seccomp profile refuses (seccomp.py), with harmless arguments.
REFUSED_SYSCALLS = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "unshare": 272,
    "setns": 308,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "pidfd_getfd": 438,
    "io_setup": 206,
    "modify_ldt": 154,
    "kexec_load": 246,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "reboot": 169,
    "swapon": 167,
    "acct": 163,
    "quotactl": 179,
    "open_by_handle_at": 304,
    "name_to_handle_at": 303,
    "mbind": 237,
    "set_mempolicy": 238,
    "get_mempolicy": 239,
    "move_pages": 279,
    "syslog": 103,
    "vhangup": 153,
    "iopl": 172,
    "ioperm": 173,
    "fanotify_init": 300,
    "settimeofday": 164,
    "clock_settime": 227,
    "fsopen": 430,
    "fsmount": 432,
    "open_tree": 428,
    "move_mount": 429,
    "sethostname": 170,
}
SYSCALLS = (
    """import ctypes, errno, json, os, platform, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
"""
    f"REFUSED = {REFUSED_SYSCALLS!r}\n"
    """def outcome(number, *args):
    buffer = ctypes.create_string_buffer(4096)  # any pointer argument points here
    args = [buffer if a == "buf" else ctypes.c_long(a) for a in args]
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *args)
    return "allowed" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
report = {"machine": platform.machine()}
if report["machine"] == "x86_64":
    report.update({name: outcome(number, 0, 0, 0, 0, 0) for name, number in REFUSED.items()})
    report["io_uring_setup"] = outcome(425, 1, "buf")  # valid arguments: a ring, if it were allowed
    report["unshare"] = outcome(272, 0x10000000)  # CLONE_NEWUSER: no capability needed, if it were allowed
    report["ptrace"] = outcome(101, 0, 0, 0, 0)  # PTRACE_TRACEME: allowed to anyone, if it were allowed
    report["clone3"] = outcome(435, 0, 0)
    report["personality(READ_IMPLIES_EXEC)"] = outcome(135, 0x0400000)
    report["getpid"] = outcome(39)
    for family, name in ((38, "AF_ALG"), (40, "AF_VSOCK"), (1, "AF_UNIX")):
        report[f"socket({name})"] = outcome(41, family, 1, 0)
status = open("/proc/self/status").read()
report["seccomp_mode"] = status.split("Seccomp:")[1].split()[0]
print(json.dumps(report))
"""
)
FORK_MANY = """import os
for _ in range(64):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
"""
PIDS_SEEN = """import json, os
report = {"pid": os.getpid(), "self": os.readlink("/proc/self"), "last_pid": open("/proc/loadavg").read().split()[-1],
          "cgroup": os.listdir("/sys/fs/cgroup")}
child = os.fork()
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
report["child"] = child
print(json.dumps(report))
"""
OOM_SCORE = """import json, os
report = {"start": open("/proc/self/oom_score_adj").read().strip(),
          "runner": open(f"/proc/{os.getppid()}/oom_score_adj").read().strip()}
try:
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("0")
    report["lowered"] = "allowed"
except OSError as e:
    report["lowered"] = e.strerror
report["now"] = open("/proc/self/oom_score_adj").read().strip()
print(json.dumps(report))
"""

S = Status
CASES: tuple[Case, ...] = (
    Case("fork bomb", FORK_BOMB, frozenset({S.KILLED})),
    Case(
        "fork bomb (shell)",
        "",
        frozenset({S.KILLED}),
        command=("sh", "-c", "bomb() { bomb | bomb & }; bomb; sleep 100"),
    ),
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
    Case("reading other runs' files", SEEK_SECRET, frozenset({S.OK}), _secret_not_found, before=PLANT_SECRET),
    Case("killing the runner", KILL_RUNNER, frozenset({S.OK}), _runner_untouchable),
    Case("leaving a daemon behind", DAEMON, frozenset({S.OK}), _replaced, replaced=True),
    Case("setuid tricks", SETUID, frozenset({S.OK}), _privileges),
    Case("leaving System V IPC", SYSV_IPC, frozenset({S.OK}), _replaced, replaced=True),
    Case("flooding inodes", INODE_FLOOD, frozenset({S.OK}), _replaced, replaced=True),
    Case("a deep directory chain", DEEP_CHAIN, frozenset({S.OK}), _replaced, replaced=True),
    Case("forbidden system calls", SYSCALLS, frozenset({S.OK}), _syscalls_refused),
    Case("lowering its OOM score", OOM_SCORE, frozenset({S.OK}), _oom_floor),
    Case("learning what an earlier run forked", PIDS_SEEN, frozenset({S.OK}), _fresh_pids, before=FORK_MANY),
)
