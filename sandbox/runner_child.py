"""The child that the runner's zygote forks for each run (runner_zygote.py): it becomes the program.

It starts a new session (so the whole group can be killed), reads its request (command, files,
limits) from the memfd the runner wrote it into (the zygote, whose memory this child's is, never
holds one), sets its OOM score to 1000 (with a floor of 1000 where the runner may set one), drops to
the sandbox user (losing every capability), writes the files into a fresh working directory,
applies rlimits and runs the program:
`python3 [-u] [-B] file.py | -c code | -m module` inside the runner's already-initialised
interpreter, as a fresh python3 would (about 1 ms instead of about 20 ms); any other command by exec.

Differences from a fresh interpreter, by design: modules the runner imported are already loaded and
the str hash seed is shared between runs. Standard library only: runs on the image's python3."""

import atexit
import builtins
import ctypes
import fcntl
import io
import json
import os
import resource
import runpy
import signal
import stat
import struct
import sys
import time
import traceback
import types
from importlib.machinery import SourceFileLoader

UID = GID = 10001
RUN_DIR = "/work/run"
# A supervised run (`Limits.supervise`, see types.py): the command may run programs as this second
# user, which can neither signal nor `prlimit` it, in a directory of that user's.
PROGRAM_UID = PROGRAM_GID = 10002
PROGRAM_DIR = "/work/program"
SUPERVISOR_CAPS = (6, 7, 5)  # CAP_SETUID, CAP_SETGID, CAP_KILL: switch to the program user, stop its processes
PR_SET_KEEPCAPS = 8
ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": RUN_DIR,
    "TMPDIR": RUN_DIR,
    "LANG": "C.UTF-8",
    "USER": "sandbox",
    "LOGNAME": "sandbox",
}
PYTHONS = ("python3", "python", "python3.11", "/usr/bin/python3", "/usr/bin/python", "/usr/bin/python3.11")
HIDDEN_FRAMES = {__file__, runpy.__file__, "<frozen runpy>"}  # the runner's part of a traceback
LIBC = ctypes.CDLL(None, use_errno=True)
PRCTL = LIBC.prctl
STDIO = [(s.encoding, s.errors) for s in (sys.stdin, sys.stdout, sys.stderr)]
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
OOM_SCORE_ADJ = b"1000"  # the OOM killer's first choice, always
HEAD = struct.Struct("!I")  # a request's header length (`write_request`)


def python_mode(cmd):
    """(kind, target, args, flags) when `cmd` is a plain python3 invocation this interpreter can
    run in-process; None means exec it."""
    if cmd[0] not in PYTHONS:
        return None
    args, flags = list(cmd[1:]), set()
    while args and args[0] in ("-u", "-B"):
        flags.add(args.pop(0))
    if args and args[0] in ("-c", "-m") and len(args) >= 2:
        return args[0], args[1], args[2:], flags
    if args and not args[0].startswith("-"):
        return "file", args[0], args[1:], flags
    return None


def safe_name(name):
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"bad file name {name!r}")
    return name


class TreeTooLarge(Exception):
    """remove_tree stopped at one of its bounds: more entries, deeper or slower than allowed."""


def remove_tree(path, max_entries=None, max_depth=None, deadline=None):
    """rm -rf as the sandbox user, fixing permissions the program may have taken away. Returns
    (entries removed, deepest level below `path`); raises TreeTooLarge, leaving the rest, when it
    removed more than `max_entries`, met a directory deeper than `max_depth` or reached `deadline`
    (time.monotonic()): whoever asked then replaces the container instead of cleaning it.

    No recursion and no long paths, whatever the program left (a chain of directories thousands
    deep once overflowed Python's stack here and failed the next run's setup): it walks with one
    directory descriptor at a time, holds each directory's listing once (so a wide directory costs
    no more than a deep one) and climbs back through "..", which no process can move: every
    process of the sandbox user is dead when this runs."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0, 0
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return 1, 0
    os.chmod(path, 0o700)
    fd = os.open(path, DIR_FLAGS)
    stack, removed, deepest = [("", os.listdir(fd))], 0, 0  # (name in the parent, entries left)
    try:
        while True:
            if max_entries is not None and removed > max_entries:
                raise TreeTooLarge(f"more than {max_entries} entries")
            if deadline is not None and time.monotonic() > deadline:
                raise TreeTooLarge(f"more than {removed} entries: not removed in time")
            name, entries = stack[-1]
            if entries:
                entry = entries.pop()
                if stat.S_ISDIR(os.lstat(entry, dir_fd=fd).st_mode):
                    if max_depth is not None and len(stack) > max_depth:
                        raise TreeTooLarge(f"directories more than {max_depth} deep")
                    os.chmod(entry, 0o700, dir_fd=fd)  # a directory (lstat): no link to follow
                    inner = os.open(entry, DIR_FLAGS, dir_fd=fd)
                    os.close(fd)
                    fd = inner
                    stack.append((entry, os.listdir(fd)))
                    deepest = max(deepest, len(stack) - 1)
                else:
                    os.unlink(entry, dir_fd=fd)
                    removed += 1
                continue
            stack.pop()
            if not stack:
                break
            outer = os.open("..", DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = outer
            os.rmdir(name, dir_fd=fd)
            removed += 1
    finally:
        os.close(fd)
    os.rmdir(path)
    return removed + 1, deepest


def capset(caps):
    """Make `caps` (capability numbers below 32) this process's permitted and effective sets, the
    inheritable set empty. Lowering always succeeds; OSError otherwise."""
    mask = 0
    for cap in caps:
        mask |= 1 << cap
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)(mask, mask, 0, 0, 0, 0)  # effective, permitted, inheritable (x2)
    if LIBC.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def program_dir():
    """A fresh PROGRAM_DIR owned by the program user, made while still root (CAP_SETUID lends
    that user's identity for the mkdir: root holds no CAP_CHOWN here)."""
    os.setresgid(-1, PROGRAM_GID, -1)
    os.setresuid(-1, PROGRAM_UID, -1)
    try:
        remove_tree(PROGRAM_DIR)  # none: the runner's cleaner removed the last one
        os.mkdir(PROGRAM_DIR, 0o700)
    finally:
        os.setresuid(-1, 0, -1)
        os.setresgid(-1, 0, -1)


def environment(supervise):
    if not supervise:
        return ENV
    return ENV | {
        "SANDBOX_PROGRAM_UID": str(PROGRAM_UID),
        "SANDBOX_PROGRAM_GID": str(PROGRAM_GID),
        "SANDBOX_PROGRAM_DIR": PROGRAM_DIR,
    }


def write_request(cmd, files, limits, data):
    """In the runner: a memfd holding the request for the run's child (`read_request`): HEAD, the
    JSON header, the files' bytes. The zygote only passes it on."""
    head = json.dumps({"command": cmd, "files": files, "limits": limits}).encode()
    fd = os.memfd_create("request", os.MFD_CLOEXEC)
    try:
        for part in (HEAD.pack(len(head)) + head, data):
            view = memoryview(part)
            while view:
                view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_request(fd):
    """(command, files, limits, files blob) from the request the runner wrote into `fd` (a memfd):
    HEAD, the JSON header, then the files' bytes."""
    size = os.fstat(fd).st_size
    data, got = bytearray(size), 0
    view = memoryview(data)
    while got < size:
        n = os.preadv(fd, [view[got:]], got)
        if n == 0:
            raise EOFError("the request is shorter than its file")
        got += n
    (hlen,) = HEAD.unpack_from(data)
    header = json.loads(data[HEAD.size : HEAD.size + hlen])
    return header["command"], header["files"], header["limits"], data, HEAD.size + hlen


def child(request_fd, fds, enter=None):
    """In the forked child (of the zygote, runner_zygote.py): read the request, become the program.
    Setup failures go to the report pipe (fd 3). `enter`: called as root before anything else is
    closed (runner_pidns.enter)."""
    in_r, out_w, err_w, rep_w = fds
    try:
        os.setsid()
        if request_fd < 4:
            request_fd = fcntl.fcntl(request_fd, fcntl.F_DUPFD_CLOEXEC, 4)  # clear of the dup2s below
        for target, fd in enumerate((in_r, out_w, err_w, rep_w)):
            os.dup2(fd, target, inheritable=target < 3)
        if enter is not None:
            enter()
        cmd, files, limits, blob, offset = read_request(request_fd)
        os.closerange(4, 1 << 20)  # one close_range(2): the request and the run's other pipes
        # Still root, with CAP_SYS_RESOURCE where the engine grants it (container.py): the kernel
        # then makes 1000 this process's floor too (oom_score_adj_min), inherited by every process
        # it starts, and the program, holding no capability, cannot write it lower: the OOM killer
        # takes the program, never the runner (at -1000).
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        os.write(fd, OOM_SCORE_ADJ)
        os.close(fd)
        supervise = bool(limits.get("supervise"))
        if supervise:
            program_dir()
            PRCTL(PR_SET_KEEPCAPS, 1, 0, 0, 0)  # through the switch below, then only the supervisor's
        os.setgroups([])
        os.setresgid(GID, GID, GID)
        os.setresuid(UID, UID, UID)  # from here on no capability is left (a supervisor: its three)
        if supervise:
            PRCTL(PR_SET_KEEPCAPS, 0, 0, 0, 0)
            capset(SUPERVISOR_CAPS)
        PRCTL(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE (setuid cleared it): own /proc entries, as usual
        remove_tree(RUN_DIR)  # none: the runner's cleaner removed the last one after its run
        os.mkdir(RUN_DIR, 0o700)
        view = memoryview(blob)
        for name, size in files:
            path = os.path.join(RUN_DIR, safe_name(name))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            data = view[offset : offset + size]
            mode = 0o755 if bytes(data[:2]) == b"#!" else 0o644
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
            while data:
                data = data[os.write(fd, data) :]
            os.close(fd)
            offset += size
        # Wiped: the program has its files on disk, and needs no second copy in its memory.
        view[:] = bytes(len(blob))
        os.chdir(RUN_DIR)
        mb = 1 << 20
        resource.setrlimit(resource.RLIMIT_DATA, (limits["memory_mb"] * mb,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        cpu = int(limits["timeout_s"]) + 2
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        mode = python_mode(cmd)
    except BaseException:
        os.write(3, traceback.format_exc(limit=4).encode()[-4000:])
        os._exit(125)
    os.close(3)  # the program starts now; the runner sees the report pipe close
    env = environment(supervise)
    if mode is not None:
        run_python(*mode, env)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # ignored by Python, default for anything else
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as exc:
        os.write(2, f"sandbox: cannot run {cmd[0]!r}: {exc.strerror}\n".encode())
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


def std_streams(unbuffered):
    """sys.stdin/stdout/stderr on fds 0-2, configured as a new interpreter would."""
    return tuple(_stream(fd, unbuffered) for fd in (0, 1, 2))


def _stream(fd, unbuffered):
    raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
    raw.name = ("<stdin>", "<stdout>", "<stderr>")[fd]
    if unbuffered and fd:
        buffered = raw
    else:
        buffered = (io.BufferedReader if fd == 0 else io.BufferedWriter)(raw)
    encoding, errors = STDIO[fd]
    return io.TextIOWrapper(
        buffered, encoding=encoding, errors=errors, line_buffering=fd == 2, write_through=unbuffered and fd > 0
    )


# Made once, here in the runner, which never uses them: each child gets pristine copies (0.3 ms a run).
STREAMS = {False: std_streams(False), True: std_streams(True)}


def run_python(kind, target, args, flags, env=ENV):
    """Run a python program in this interpreter as `python3 [flags] file|-c|-m ...` would."""
    atexit._clear()
    os.environ.clear()
    os.environ.update(env)
    sys.dont_write_bytecode = "-B" in flags
    sys.orig_argv = ["python3", *sorted(flags), *([] if kind == "file" else [kind]), target, *args]
    streams = STREAMS["-u" in flags]
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    code = 0
    try:
        if kind == "file":
            path = os.path.abspath(target)
            sys.argv, sys.path[0] = [target, *args], os.path.dirname(path)
            try:
                with open(path, "rb") as handle:
                    source = handle.read()
            except OSError as exc:
                sys.stderr.write(f"{sys.executable}: can't open file {path!r}: [Errno {exc.errno}] {exc.strerror}\n")
                finish(2)
            main.__file__, main.__cached__ = path, None
            main.__loader__ = SourceFileLoader("__main__", path)
            exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)
        elif kind == "-c":
            sys.argv, sys.path[0] = ["-c", *args], ""
            exec(compile(target, "<string>", "exec", dont_inherit=True), main.__dict__)
        else:
            sys.argv, sys.path[0] = [target, *args], os.getcwd()
            runpy._run_module_as_main(target, alter_argv=True)
    except SystemExit as exc:
        code = exit_status(exc)
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in HIDDEN_FRAMES:
            tb = tb.tb_next  # the program's traceback starts at its own code, as in python3
        sys.excepthook(type(exc), exc, exc.with_traceback(tb).__traceback__)
        code = 1
    finish(code)


def exit_status(exc):
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    try:
        sys.stderr.write(f"{exc.code}\n")
    except BaseException:
        pass
    return 1


def finish(code):
    """The interpreter's own shutdown, then exit without running the runner's."""
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()  # wait for non-daemon threads, as python3 does at exit
        atexit._run_exitfuncs()
    except SystemExit as exc:
        code = exit_status(exc)
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if not stream.closed:
                stream.flush()
        except BaseException:  # e.g. a closed pipe: python3 reports that as exit status 120
            code = code or 120
    os._exit(code)
