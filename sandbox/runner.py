"""rlvr sandbox runner: the long-lived process inside each warm sandbox container.

It reads framed requests on its attached stdin and answers on its stdout. For each request its
zygote (runner_zygote.py), forked at start before any request, forks one fresh child (see
runner_child.py) that reads the request from a memfd and becomes the program, so that no program's
memory holds anything of an earlier run; in a pid namespace of the run's own where the engine allows
it (runner_pidns.py: the program is pid 2 there, whatever earlier runs forked, under a pid 1 that
relays its wait status). The runner then supervises it: feeds stdin,
caps the output, kills the whole process group at the time limit or on a fork bomb, classifies the
end (ok, timeout, memory, output_limit, killed), kills every process left, removes the program's
directory and reports what the program left behind, so the host replaces a contaminated container
before reuse.

The runner stays root with only SETUID, SETGID, KILL, SYS_RESOURCE and SYS_ADMIN (for the pid
namespaces); programs run as another user and cannot signal, trace or read it or its zygote (nor see
them, in their own pid namespace).

Rules against a program turning the next verdicts into `error`:
- The runner sets its own OOM score to -1000 (so are its zygote and each run's pid 1, forks of it):
  the kernel never picks them. Each program is at 1000 with a floor of 1000 it cannot lower
  (runner_child.py), so while any process of the program lives the OOM killer takes one of those
  (both need CAP_SYS_RESOURCE; without it, see container.py).
  The container's init stays at 0, the last resort: if memory no process owns ever filled the
  container, init dies and the container with it (the host then sees the run kill its container),
  rather than the runner hanging in a fault it can never satisfy.
- After every run the runner, as the sandbox user (its effective uid, see `clean`), removes the
  program's directory (runner_child.remove_tree: no recursion, any depth). The container is
  replaced instead when the tree is deeper than MAX_DEPTH, holds more than MAX_ENTRIES entries or
  takes over CLEAN_S (a program may have left more than files; a fresh container is cheaper than
  trusting it), when removing fails, or when anything is left anywhere else a program can write.

Standard library only: this runs on the image's python3, never on the host."""

import gc
import json
import os
import select
import signal
import struct
import time
import traceback

import runner_child
import runner_pidns
from runner_child import GID, PROGRAM_DIR, PROGRAM_GID, PROGRAM_UID, RUN_DIR, UID, TreeTooLarge, child, remove_tree
from runner_zygote import Zygote

WORK = "/work"
SHARED = ("/tmp", "/dev/shm", "/dev/mqueue")  # writable by every program: must stay empty
PROTOCOL = 1
FRAME = struct.Struct("!II")  # header length, blob length
SETUP_GRACE = 5.0  # seconds for the child to write the files, before the program's clock starts
TICK = 0.02  # seconds between looks at the pids counter while a program runs
PIDS_EVENTS = ("/sys/fs/cgroup/pids/pids.events", "/sys/fs/cgroup/pids.events")
# last lines of a python3 that died for lack of memory (thread stacks count against RLIMIT_DATA)
MEMORY_ERRORS = (b"MemoryError", b"RuntimeError: can't start new thread", b"OSError: [Errno 12]")
OOM_EVENTS = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")
RUNNER_OOM_SCORE_ADJ = b"-1000"  # OOM_SCORE_ADJ_MIN: never chosen by the OOM killer
CLEAN_S = 5.0  # to remove a program's directory (a few thousand entries at most: well under a second)
MAX_DEPTH = 64  # levels of directories below the run's directory a program may leave ...
MAX_ENTRIES = 4096  # ... and entries, before its container is replaced


class Counter:
    """A named counter in a cgroup file (v1 or v2 layout), kept open and re-read with pread."""

    def __init__(self, paths, key):
        self.key, self.fd = key.encode(), None
        for path in paths:
            try:
                self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                break
            except OSError:
                continue

    def read(self):
        """The value, or None when this cgroup does not have it."""
        if self.fd is None:
            return None
        for line in os.pread(self.fd, 4096, 0).splitlines():
            name, _, value = line.partition(b" ")
            if name == self.key:
                return int(value)
        return None


class Channel:
    def __init__(self, fd_in, fd_out):
        self.fd_in, self.fd_out = fd_in, fd_out

    def read_exact(self, n):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = os.readv(self.fd_in, [view[got:]])
            if k == 0:
                raise EOFError
            got += k
        return buf

    def recv(self):
        hlen, blen = FRAME.unpack(self.read_exact(FRAME.size))
        return json.loads(self.read_exact(hlen)), self.read_exact(blen)

    def send(self, header, *blobs):
        head = json.dumps(header).encode()
        data = memoryview(b"".join([FRAME.pack(len(head), sum(map(len, blobs))), head, *blobs]))
        while data:
            data = data[os.write(self.fd_out, data) :]


OWN_PIDS = runner_pidns.probe()  # a pid namespace per run (runner_pidns.py), where the engine allows it
PIDS = Counter(PIDS_EVENTS, "max")  # forks refused at the container's pids limit
OOMS = Counter(OOM_EVENTS, "oom_kill")  # processes the kernel killed at its memory limit
ZYGOTE = None  # every run's process is forked by it (runner_zygote.py); started by `main`


def start_run(fds):
    """In the zygote's child: the run's pid 1 first where runs get a pid namespace of their own (which
    returns in the program), then the program (runner_child.child). Never returns."""
    in_r, out_w, err_w, rep_w, request = fds[:5]
    enter = None
    if OWN_PIDS:
        pid_w = fds[5]
        proc = runner_pidns.start(pid_w, rep_w)
        enter = lambda: runner_pidns.enter(pid_w, proc)  # noqa: E731
    child(request, (in_r, out_w, err_w, rep_w), enter)


def fork_run():
    return runner_pidns.fork() if OWN_PIDS else os.fork()


def handle(header, blob):
    """Run one program; returns the reply header and the output blobs."""
    cmd, files, limits = header["command"], header["files"], header["limits"]
    files_len = sum(size for _, size in files)
    pids0, oom0 = PIDS.read(), OOMS.read()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    pid_r, pid_w = os.pipe() if OWN_PIDS else (None, None)  # pid 1's reports (runner_pidns.Run)
    theirs = (in_r, out_w, err_w, rep_w, runner_child.write_request(cmd, files, limits, memoryview(blob)[:files_len]))
    theirs += (pid_w,) if OWN_PIDS else ()
    start = time.monotonic()
    try:
        pid, pidfd = ZYGOTE.spawn(theirs)
    finally:
        for fd in theirs:
            os.close(fd)
    run = runner_pidns.Run(pid, pidfd, ZYGOTE, pid_r)
    try:
        done = supervise(run, start, (in_w, out_r, err_r, rep_r), memoryview(blob)[files_len:], limits, pids0)
        code, out, err, reason, setup, started, end = done
        left = sweep(run.program if reason else None, run)
    finally:
        run.close()
    dirty = [f"left {len(left)} process(es) running: {', '.join(left[:5])}"] if left else []
    dirty += clean() if not left else []  # a survivor: the container is replaced, nothing cleaned
    dirty += contamination()
    if setup:
        return {"error": "setup failed: " + setup.decode(errors="replace"), "dirty": dirty}, ()
    oom = (OOMS.read() or 0) > (oom0 or 0)
    pids_hit = (PIDS.read() or 0) > (pids0 or 0)
    last = bytes(err[-300:]).rstrip().rsplit(b"\n", 1)[-1]
    if reason == "output":
        status, detail = "output_limit", f"output exceeded {limits['output_bytes']} bytes; killed"
    elif reason == "pids" or (code != 0 and pids_hit):  # killed, or gave up, at the limit
        status, detail = "killed", f"process limit of {limits['pids']} reached"
    elif reason == "timeout" or code == -signal.SIGXCPU:
        status, detail = "timeout", f"time limit of {limits['timeout_s']}s exceeded; killed"
    elif (oom or last.startswith(MEMORY_ERRORS)) and code != 0:
        status, detail = "memory", f"memory limit of {limits['memory_mb']} MB exceeded"
    elif code < 0:
        status, detail = "killed", f"killed by {signal_name(-code)}"
    else:
        status, detail = "ok", ""
    reply = {
        "status": status,
        "exit_code": code,
        "detail": detail,
        "dirty": dirty,
        "wall_time": end - (started or start),
        "stdout": len(out),
        "stderr": len(err),
    }
    return reply, (out, err)


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def supervise(run, start, fds, stdin, limits, pids0):
    """Feed stdin, collect capped output, and kill the process group on any limit."""
    in_w, out_r, err_r, rep_r = fds
    cap = limits["output_bytes"]
    deadline = start + limits["timeout_s"] + SETUP_GRACE  # until the program itself starts
    bufs = {out_r: bytearray(), err_r: bytearray()}
    poller = select.poll()
    for fd in (out_r, err_r, rep_r) + (() if run.report_fd is None else (run.report_fd,)):
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    poller.register(run.pidfd, select.POLLIN)
    if len(stdin):
        os.set_blocking(in_w, False)
        poller.register(in_w, select.POLLOUT)
    else:
        os.close(in_w)
    setup, started, reason, exited, fed = bytearray(), None, None, False, 0
    while not exited and reason is None:
        left = deadline - time.monotonic()
        if left <= 0:
            reason = "timeout"
            break
        wait = min(left, TICK) if pids0 is not None else left
        for fd, _ in poller.poll(int(wait * 1000) + 1):
            if fd == run.pidfd:
                exited = True
            elif fd == run.report_fd:
                exited = run.read() or exited
            elif fd == in_w:
                try:
                    fed += os.write(in_w, stdin[fed : fed + 65536])
                except BlockingIOError:
                    pass
                except OSError:
                    fed = len(stdin)  # the program closed its stdin
                if fed >= len(stdin):
                    poller.unregister(in_w)
                    os.close(in_w)
            elif fd == rep_r:
                data = os.read(rep_r, 4096)
                setup += data
                if not data:
                    poller.unregister(rep_r)
                    started = time.monotonic()
                    deadline = started + limits["timeout_s"]
            elif pump(fd, bufs, cap, poller):
                reason = "output"
        if reason is None and pids0 is not None and (PIDS.read() or 0) > pids0:
            reason = "pids"
    if reason:
        run.kill()
    status = run.wait()
    end = time.monotonic()
    if reason is None and drain((out_r, err_r), bufs, cap):
        reason = "output"  # what it wrote just before exiting went over the cap
    for fd in (out_r, err_r, rep_r) + ((in_w,) if fed < len(stdin) else ()):
        try:
            os.close(fd)
        except OSError:
            pass
    code = os.waitstatus_to_exitcode(status)
    return code, bufs[out_r], bufs[err_r], reason, bytes(setup), started, end


def pump(fd, bufs, cap, poller):
    """Read once from an output pipe. True: over the cap. None: more may follow. False: nothing."""
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return False
    if not data:
        if poller is not None:
            poller.unregister(fd)
        return False
    room = cap - sum(map(len, bufs.values()))
    bufs[fd] += data[: max(room, 0)]
    return True if len(data) > room else None


def drain(fds, bufs, cap):
    """After the exit: read what is left in the pipes. True when that goes over the cap."""
    for fd in fds:
        while True:
            more = pump(fd, bufs, cap, None)
            if more:
                return True
            if more is False:
                break
    return False


def processes(init=None):
    """(pid, name, state, process group) of every process but init, the runner, its zygote and the
    run's pid 1."""
    found, spared = [], (1, os.getpid(), ZYGOTE.pid, init)
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in spared:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        head, _, tail = data.rpartition(b")")
        fields = tail.split()
        found.append((int(name), head.partition(b"(")[2].decode(errors="replace"), fields[0].decode(), int(fields[2])))
    return found


def sweep(killed_group, run):
    """Kill everything the program left. Returns the live leftovers that escaped a kill (daemons,
    or any process at all after a normal exit). The run's pid 1 (runner_pidns) is no leftover: it
    lives until this kills it, and takes what is left in its namespace with it."""
    procs = processes(run.init)
    left = [f"{pid} {name}" for pid, name, state, group in procs if state != "Z" and group != killed_group]
    deadline = time.monotonic() + 2
    while procs and time.monotonic() < deadline:
        kill_all(procs)
        time.sleep(0.001)
        procs = processes(run.init)  # zombies vanish as soon as init (or the run's pid 1) reaps them
    if not procs:
        run.end()  # nothing of the run left: its pid 1 can go, and its namespaces with it
    if procs:
        left.append(f"{len(procs)} unkillable")
    return left


def kill_all(procs):
    """SIGKILL to every process a run left, never to the zygote. kill(-1), which no fork can outrun,
    reaches the processes whose real or saved uid is the caller's real or effective one: run once with
    each program user's uid as the effective one (the real one stays root's, and CAP_KILL leaves the
    effective set meanwhile), it kills every process of that user and every root one but init and the
    runner, never the zygote (its real and saved uid are its own, runner_zygote.ZYGOTE_UID). Then
    each of `procs` by its pid, whatever its uid (a supervisor may give one any)."""
    for uid in (UID, PROGRAM_UID):
        os.setresuid(-1, uid, -1)
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.setresuid(-1, 0, -1)
    for pid, *_ in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def clean():
    """Remove the run's directory as the sandbox user. Returns problems: empty when it is gone and
    was neither too deep nor too large.

    The runner walks it itself with the sandbox user's uid as its effective one, then takes root's
    back (a forked cleaner cost a fork and an exit, about 1.5 ms a run, more than the walk): every
    process of that user is dead by now (`sweep`; with a survivor the container is replaced and
    nothing is cleaned), and none could signal or read the runner anyway, whose real and saved uid
    stay root. The walk stops at MAX_ENTRIES entries, MAX_DEPTH levels or CLEAN_S seconds, and the
    container is then replaced rather than cleaned."""
    os.setgroups([])
    deadline = time.monotonic() + CLEAN_S
    # A supervised run's programs wrote as their own user, in their own directory: removed as them.
    for uid, gid, path in ((PROGRAM_UID, PROGRAM_GID, PROGRAM_DIR), (UID, GID, RUN_DIR)):
        os.setresgid(-1, gid, -1)
        os.setresuid(-1, uid, -1)  # capabilities leave the effective set until root comes back
        try:
            remove_tree(path, MAX_ENTRIES, MAX_DEPTH, deadline)
        except TreeTooLarge as exc:
            return [f"left {exc}"]
        except OSError as exc:
            return [f"could not remove {path}: {exc}"]
        finally:
            os.setresuid(-1, 0, -1)
            os.setresgid(-1, 0, -1)
    return []


def contamination():
    """Anything a program may leave for the next one outside its own (removed) directory."""
    found = []
    for path in (WORK,) + SHARED:
        try:
            names = os.listdir(path)
        except OSError:
            continue
        if names:
            found.append(f"files left in {path}: {', '.join(sorted(names)[:5])}")
    disk = os.statvfs(WORK)
    if disk.f_bavail < disk.f_blocks // 2:
        found.append(f"filled the disk ({(disk.f_blocks - disk.f_bavail) * disk.f_frsize >> 20} MiB)")
    for kind, fd in SYSV_IPC.items():
        count = os.pread(fd, 1 << 16, 0).count(b"\n") - 1  # below a header line
        if count > 0:
            found.append(f"left {count} System V {kind} object(s)")
    return found


def _open_sysv_ipc():
    fds = {}
    for kind in ("shm", "msg", "sem"):
        try:
            fds[kind] = os.open(f"/proc/sysvipc/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            pass
    return fds


SYSV_IPC = _open_sysv_ipc()  # kept open: they are read after every run


def main():
    channel = Channel(os.dup(0), os.dup(1))  # the protocol lives on private fds...
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)  # ...so a stray print cannot corrupt it
    os.close(null)
    try:
        with open("/proc/self/oom_score_adj", "wb", buffering=0) as score:
            score.write(RUNNER_OOM_SCORE_ADJ)  # needs CAP_SYS_RESOURCE (below the inherited floor)
        floor = True
    except OSError:  # an engine without it (container.py): the lost-container rule charges the program
        floor = False
    gc.freeze()  # keep the children's collector off the runner's objects: fewer copy-on-write faults
    global ZYGOTE
    ZYGOTE = Zygote(fork_run, start_run, close=(channel.fd_in, channel.fd_out))  # before any request
    channel.send({"ready": PROTOCOL, "pid": os.getpid(), "oom_floor": floor, "own_pids": OWN_PIDS})
    while True:
        try:
            header, blob = channel.recv()
        except EOFError:
            return  # the host hung up: this container is done
        try:
            reply, blobs = handle(header, blob)
        except Exception:
            reply, blobs = {"error": traceback.format_exc(limit=6), "dirty": ["runner error"]}, ()
        channel.send(reply, *blobs)


if __name__ == "__main__":
    main()
