"""A pid namespace of its own for every run, so that no run learns from pids what an earlier run in
the same warm container did (issue #40): each program starts as pid 2 of a new namespace, whatever
earlier runs forked, and sees a /proc of that namespace only (its own pids, /proc/self,
/proc/loadavg's last pid).

How, each step because of a rule of the kernel:
- The runner's zygote (runner_zygote.py: every run's process is forked from it) calls
  unshare(CLONE_NEWPID) and forks (`fork`): that child is pid 1 of a new namespace. The zygote then
  takes its own namespace back for its next children (setns), as a second unshare would be refused.
  Both need CAP_SYS_ADMIN, which only the runner and its zygote hold (container.py): programs
  run as another user with no capability, and the seccomp profile lets these calls through with
  exactly these arguments only (seccomp.py), never CLONE_NEWUSER.
- Pid 1 (`own_proc`) takes a mount namespace of the run's own and mounts a /proc of the new pid
  namespace there (the container's /proc would show container pids), with Docker's masks put back
  (read-only /proc/sys, /dev/null over /proc/keys, ...: bind mounts of the originals), and an empty
  /sys/fs/cgroup (pids.peak, memory peaks and the like count what earlier runs did).
- Pid 1 (`start`) forks the program: pid 1 ignores every signal with the default action sent from
  inside its namespace, so the program must not be it. The program, still root (`enter`), reports
  its pid in the container (the runner kills its process group by it), read in the container's
  /proc, which it then lets go of. Pid 1 relays the program's exact wait status to the runner, reaps
  orphans, and waits for the runner's SIGKILL, which comes once the runner has counted what the run
  left (runner.sweep): its death then kills every process of the namespace and ends both namespaces,
  off the program's exit (`Run.end`); the zygote reaps it.
- An engine that refuses any of it (no CAP_SYS_ADMIN, or an AppArmor profile that refuses mount,
  as Docker's default one does) keeps the shared namespace, as before: `probe` decides once, when the
  runner starts, and the runner says so in its greeting.

Standard library only: this runs on the image's python3."""

import ctypes
import os
import signal
import struct

LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 0x1000, 0x4000, 0x40000
PROC_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC  # as Docker mounts /proc
EMPTY_FLAGS = MS_RDONLY | PROC_FLAGS  # the empty tmpfs over /sys/fs/cgroup
# Every (flags of mount(2)) and (flags of unshare(2)) used here: seccomp.py allows exactly these.
MOUNT_FLAGS = (MS_REC | MS_PRIVATE, PROC_FLAGS, MS_BIND, EMPTY_FLAGS)
UNSHARE_FLAGS = (CLONE_NEWPID, CLONE_NEWNS)
CGROUP = "/sys/fs/cgroup"
REPORT = struct.Struct("!ci")  # b"P" and the program's pid in the container, or b"S" and its wait status


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(LIBC.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def container_mounts():
    """(the mount points below /proc in mount order: Docker's masks and read-only paths; whether any
    mount propagates to others, which would carry the run's mounts out of its namespace)."""
    masks, shared = [], False
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split(" - ")[0].split()
            point = fields[4].encode().decode("unicode_escape")  # spaces come as \040
            shared = shared or any(tag.startswith("shared:") for tag in fields[6:])
            if point.startswith("/proc/") and point not in masks:
                masks.append(point)
    return masks, shared


MASKS, SHARED = container_mounts()
OWN = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)  # the runner's namespace, to take back


def fork():
    """os.fork(), whose child is pid 1 of a new pid namespace. Called by the zygote (runner_zygote.py),
    which has reaped the last run's pid 1 by then (a zombie would still count against the pids limit)."""
    _check(LIBC.unshare(CLONE_NEWPID), "unshare")
    pid = None
    try:
        pid = os.fork()
    finally:
        if pid != 0:  # the parent (the child keeps the new namespace for its children)
            _check(LIBC.setns(OWN, CLONE_NEWPID), "setns")
    return pid


def own_proc():
    """In pid 1, still root: a mount namespace of the run's own, holding a /proc of its pid namespace
    with the container's masks put back, and an empty /sys/fs/cgroup. Pid 1 holds it until the
    runner kills it, so that tearing it down costs the program's exit nothing."""
    _check(LIBC.unshare(CLONE_NEWNS), "unshare")
    if SHARED:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here may reach the runner's view
    masks = [os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC) for path in MASKS]  # in this namespace
    _mount("proc", "/proc", "proc", PROC_FLAGS)
    for path, fd in zip(MASKS, masks):
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND)  # a copy of the mount, read-only as it was
        os.close(fd)
    if os.path.isdir(CGROUP):
        _mount("tmpfs", CGROUP, "tmpfs", EMPTY_FLAGS, "size=0,nr_inodes=1,mode=555")


def enter(report_fd, container_proc):
    """In the program's process, still root: report its pid in the container (read in the
    container's /proc, which it then lets go of)."""
    os.write(report_fd, REPORT.pack(b"P", int(os.readlink("self", dir_fd=container_proc))))
    os.close(container_proc)


def start(report_fd, setup_fd):
    """In pid 1: make the run's mount namespace, fork the program and return in it (with a
    descriptor of the container's /proc, for `enter`); here, relay the program's wait status, reap
    orphans and wait to be killed. Never returns in pid 1."""
    try:
        container_proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        own_proc()
        program = os.fork()
    except BaseException as exc:
        os.write(setup_fd, f"starting the program in its own pid namespace: {exc!r}".encode())
        os._exit(125)
    if program == 0:
        return container_proc
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # no handler: nothing inside the namespace can signal it
    os.closerange(0, report_fd)  # the program's pipes (their ends must close with the program), the request...
    os.closerange(report_fd + 1, 1 << 20)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break  # nothing left in the namespace: no orphan can appear any more
        if pid == program:
            os.write(report_fd, REPORT.pack(b"S", status))
    while True:
        signal.pause()


class Run:
    """The runner's view of one run's processes: the zygote's child `pid` (runner_zygote.py), with a
    pidfd of it and `zygote` to learn its wait status. With a namespace (`report_fd` given), that child
    is pid 1 there, and the program's pid and wait status come on `report_fd`; without, it is the
    program."""

    def __init__(self, pid, pidfd, zygote, report_fd=None):
        self.child, self.pidfd, self.zygote = pid, pidfd, zygote
        self.init = pid if report_fd is not None else None  # alive until `end`
        self.program = None if report_fd is not None else pid  # pid in the container, once known
        self.report_fd, self.status, self.pending = report_fd, None, b""

    def read(self):
        """Take what pid 1 reported. True once the program's wait status is known or pid 1 is gone."""
        data = os.read(self.report_fd, 64)
        self.pending += data
        while len(self.pending) >= REPORT.size:
            kind, value = REPORT.unpack(self.pending[: REPORT.size])
            self.pending = self.pending[REPORT.size :]
            if kind == b"P":
                self.program = value
            else:
                self.status = value
        return self.status is not None or not data

    def kill(self):
        """SIGKILL to the program's group and the program; to pid 1 (and so to the whole namespace)
        when the program has not said who it is yet."""
        if not self.program:
            self.kill_child()
            return
        for kill in (os.killpg, os.kill):  # the group, and the program even before its setsid
            try:
                kill(self.program, signal.SIGKILL)
            except OSError:
                pass

    def kill_child(self):
        """SIGKILL to the zygote's child, through its pidfd: the zygote reaps it as soon as it dies,
        after which its pid may be another process's."""
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except OSError:
            pass  # dead already

    def wait(self):
        """The program's wait status, once it is dead."""
        if self.report_fd is None:
            return self.zygote.status()
        os.set_blocking(self.report_fd, True)
        while self.status is None and not self.read():
            pass
        if self.status is None:  # pid 1 died first (killed before the program said who it was)
            self.status, self.init = self.zygote.status(), None
        return self.status

    def end(self):
        """Kill pid 1, and with it the run's namespaces, once nothing else of the run is left
        (runner.sweep). Tearing them down takes a fraction of a millisecond: the zygote reaps pid 1
        meanwhile, and the runner takes its status before the next run (`Zygote.spawn`), not now."""
        if self.init is not None:
            self.kill_child()  # if the sweep's kill(-1) has not already
            self.init = None

    def close(self):
        for fd in (self.pidfd, self.report_fd):
            if fd is not None:
                os.close(fd)


def probe():
    """Whether this container can give each run a pid namespace of its own: one trial run, forked by
    the runner itself before it starts the zygote."""
    try:
        report_r, report_w = os.pipe()
        pid = fork()
    except OSError:
        return False
    if pid == 0:
        try:
            enter(report_w, start(report_w, 2))
            os._exit(0 if os.readlink("/proc/self") == "2" else 1)
        finally:
            os._exit(1)
    os.close(report_w)
    reports = {}
    try:
        pending = b""
        while b"S" not in reports:  # pid 1 says who the program is, then how it ended
            data = os.read(report_r, 64)
            if not data:
                break  # pid 1 died
            pending += data
            while len(pending) >= REPORT.size:
                kind, value = REPORT.unpack(pending[: REPORT.size])
                reports[kind], pending = value, pending[REPORT.size :]
    except OSError:
        return False
    finally:
        os.close(report_r)
        os.kill(pid, signal.SIGKILL)  # pid 1 waits for it, and takes its namespaces along
        os.waitpid(pid, 0)
    return b"P" in reports and reports.get(b"S") == 0
