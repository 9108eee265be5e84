"""The test child of the in-sandbox harness (standard library only; shipped next to
`harness_program.py` and `values.py`). The worker forks one child per test; `run_child` turns it
into a fresh-looking Python process running the program and never returns.

The program runs as module `__main__` for a stdin/stdout test (its exit status and output are
the result), or as module `solution` for
- a call test (a `CallTest`, or an assert test converted by `judged_asserts`): the program's
  function is called with each call's arguments and the return values go to the result pipe as
  plain data (`values.encode`). Result lines are `<token> <tag> <body>`: tags `values`,
  `error`, `invalid`;
- a judged test (test code that could not be converted): the child never sees the test code.
  It serves calls from the judge (`harness_judge.py`): it says which functions and modules the
  program defines, then for each request line (`values.encode([name, args, kwargs])`) calls the
  function and answers one line, `["ok", value, mutated]` (`mutated`: the arguments after the
  call, when any could change in place, else None), `["raise", type name, message]`,
  `["exit", detail]` (SystemExit and the like) or `["invalid", detail]` (not plain data).
In both cases the program only ever produces values: the expected ones, the test code and the
verdict stay out of its process, so nothing it does in here can make a wrong value pass.
"""

from __future__ import annotations

import atexit
import io
import math
import os
import signal
import sys
import traceback
import types

if __package__:  # imported on the host
    from rlvr.verifiers.code import values
else:  # in the sandbox, next to values.py
    import values

RESULT_FD = 3  # where a call test's result goes, in the child; a judged test's replies
CALLS_FD = 4  # a judged test's requests, from the judge
MAX_REQUEST = (4 << 20) + 4096  # characters of one request line (values.MAX_TEXT and a little)
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36


def program_user() -> tuple[int, int, str] | None:
    """(uid, gid, directory) of the sandbox's program user, when the harness runs supervised
    (`sandbox.Limits.supervise`): test children switch to it, so that nothing a program does can
    signal, stop, `prlimit` or trace the harness's own processes."""
    try:
        env = os.environ
        return int(env["SANDBOX_PROGRAM_UID"]), int(env["SANDBOX_PROGRAM_GID"]), env["SANDBOX_PROGRAM_DIR"]
    except (KeyError, ValueError):
        return None


def drop_capabilities() -> None:
    """Clear every capability of this process (the supervisor's CAP_SETUID, CAP_SETGID, CAP_KILL).
    The kernel keeps capabilities across a switch between two non-root users, so a test child
    must clear them itself; a copy of the sandbox runner's capset (the harness imports nothing of
    the sandbox's). Raises OSError when it cannot."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def become_program_user(user: tuple[int, int, str]) -> None:
    """In a test child, before the program runs: the program user, no capability, its directory."""
    uid, gid, directory = user
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    drop_capabilities()
    os.chdir(directory)


def prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - hardening is best effort; the nonce still protects reports
        return False


def _describe(exc: BaseException, test_code: str = "") -> str:
    try:
        text = type(exc).__name__ + (f": {exc}" if str(exc) else "")
    except BaseException:  # noqa: BLE001 - a hostile __str__
        text = type(exc).__name__
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "test.py":
            line = tb.tb_lineno
        tb = tb.tb_next
    lines = test_code.splitlines()
    if line is not None and 0 < line <= len(lines):
        text += f" (test line {line}: {lines[line - 1].strip()[:200]})"
    return text[:500]


def _exit_status(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    try:
        sys.stderr.write(f"{exc.code}\n")
    except BaseException:  # noqa: BLE001
        pass
    return 1


def _finish(code: int) -> None:
    """Shut down as the interpreter would (atexit, flush), then leave without the worker's exit."""
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()  # wait for non-daemon threads, as python3 does at exit
        atexit._run_exitfuncs()
    except SystemExit as exc:
        code = _exit_status(exc)
    except BaseException:  # noqa: BLE001
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - e.g. the reader went away
            code = code or 120
    os._exit(code)


def run_child(
    test: dict, source: str, token: str, fds: tuple[int, ...], memory_mb: int, user: tuple[int, int, str] | None
) -> None:
    """In the forked child: become a fresh-looking Python process running the program, as the
    program user when there is one. Never returns, whatever the program does: the worker's own
    code must not go on in this process."""
    try:
        _run(test, source, token, fds, memory_mb, user)
    finally:
        os._exit(126)


def _run(test: dict, source: str, token: str, fds: tuple[int, ...], memory_mb: int, user) -> None:
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(len(fds), 1 << 16)  # the worker's socket to the judge server included
        if user is not None:
            become_program_user(user)
        prctl(PR_SET_DUMPABLE, 1)  # its own /proc entries, like any process (the worker is not)
        set_limits(memory_mb, int(test["timeout_s"]) + 2)
        atexit._clear()
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        streams = []
        for fd, mode in ((0, "r"), (1, "w"), (2, "w")):
            raw = io.FileIO(fd, mode, closefd=False)
            buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
            streams.append(
                io.TextIOWrapper(
                    buffered,
                    encoding="utf-8",
                    errors="strict" if fd < 2 else "backslashreplace",
                    line_buffering=fd == 2,
                )
            )
        sys.stdin, sys.stdout, sys.stderr = streams
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
        sys.argv = ["solution.py"]
        sys.path[0] = os.getcwd()
        mode = test["kind"]
        # Arguments (constant expressions of the test) are built before the program runs.
        names = {"math": math, "nan": math.nan, "inf": math.inf}
        calls = [(c["fn"], eval(c["args"], dict(names)), eval(c["kwargs"], dict(names))) for c in test.get("calls", ())]
        module = types.ModuleType("__main__" if mode == "io" else "solution")
        module.__file__ = "solution.py"
        sys.modules[module.__name__] = module
    except BaseException:  # noqa: BLE001 - setup failed: exit distinctly, the test fails
        os._exit(125)
    write = os.write

    def report(tag: str, body: str = "") -> None:
        line = f"{token} {tag} {body.replace(chr(10), ' ').replace(chr(13), ' ')}\n"  # one line
        data = memoryview(line.encode("utf-8", "backslashreplace"))
        while data:
            data = data[write(RESULT_FD, data) :]

    if mode == "judge":
        _serve(source, module)
    try:
        code = compile(source, "solution.py", "exec", dont_inherit=True)
    except BaseException as exc:  # noqa: BLE001 - a syntax error is the program's
        traceback.print_exception(type(exc), exc, None)
        if mode != "io":
            report("error", "load " + _describe(exc))
        _finish(1)
    if mode == "io":
        os.close(RESULT_FD)
        status = 0
        try:
            exec(code, module.__dict__)
        except SystemExit as exc:
            status = _exit_status(exc)
        except BaseException as exc:  # noqa: BLE001 - printed as python3 would
            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
            status = 1
        _finish(status)
    try:
        exec(code, module.__dict__)
    except BaseException as exc:  # noqa: BLE001 - sys.exit included: the test did not run
        report("error", "load " + _describe(exc))
        _finish(0)
    if mode == "call":
        texts = []
        for fn_name, args, kwargs in calls:
            fn = module.__dict__.get(fn_name)
            if not callable(fn):
                report("error", f"call NameError: the program defines no function {fn_name!r}")
                _finish(0)
            try:
                value = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001
                report("error", "call " + _describe(exc))
                _finish(0)
            try:  # encoded at once, as a test would compare it at once (later calls may mutate it)
                texts.append(values.encode(value))
            except BaseException as exc:  # noqa: BLE001 - foreign types, hostile objects
                report("invalid", _describe(exc))
                _finish(0)
        report("values", "[" + ",".join(texts) + "]")
    _finish(0)


def _serve(source: str, module: types.ModuleType) -> None:
    """A judged test: load the program, say what it defines, then serve the judge's calls until
    it closes the request pipe. Never returns."""
    write = os.write

    def answer(reply: list) -> None:
        try:
            line = values.encode(reply)
        except BaseException as exc:  # noqa: BLE001 - foreign types, hostile objects
            line = values.encode(["invalid", _describe(exc)])
        data = memoryview((line + "\n").encode("ascii"))
        while data:
            data = data[write(RESULT_FD, data) :]

    try:
        exec(compile(source, "solution.py", "exec", dont_inherit=True), module.__dict__)
    except BaseException as exc:  # noqa: BLE001 - a syntax error or sys.exit included: the test cannot run
        traceback.print_exception(type(exc), exc, None)
        answer(["error", "load " + _describe(exc)])
        _finish(0)
    functions, modules = [], []
    for name, value in list(module.__dict__.items()):
        if type(name) is str and name.isidentifier() and not name.startswith("__"):
            if isinstance(value, types.ModuleType):
                modules.append(name)
            elif callable(value):
                functions.append(name)
    answer(["ready", functions, modules])
    requests = io.BufferedReader(io.FileIO(CALLS_FD, "r", closefd=False), 1 << 16)
    while True:
        line = requests.readline(MAX_REQUEST)
        if not line.endswith(b"\n"):
            _finish(0)  # the judge is done (or gone)
        name, args, kwargs = values.decode(line[:-1].decode("ascii"))
        fn = module.__dict__.get(name)
        if not callable(fn):
            answer(["raise", "NameError", f"the program defines no function {name!r}"])
            continue
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the test code may expect it: it is raised there
            answer(["raise", _type_name(exc), _message(exc)])
            continue
        except BaseException as exc:  # noqa: BLE001 - SystemExit and the like end the test
            answer(["exit", _describe(exc)])
            continue
        mutable = any(_may_mutate(a) for a in args) or any(_may_mutate(v) for v in kwargs.values())
        answer(["ok", value, [list(args), kwargs] if mutable else None])


def _may_mutate(value: object) -> bool:
    t = type(value)
    return t is list or t is dict or t is set or (t is tuple and any(_may_mutate(v) for v in value))


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
        return text[:500] if type(text) is str else ""
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return ""


def _type_name(exc: BaseException) -> str:
    try:
        name = type.__getattribute__(type(exc), "__name__")
        return name if type(name) is str else "Exception"
    except BaseException:  # noqa: BLE001 - a hostile metaclass
        return "Exception"


def set_limits(memory_mb: int, cpu_s: int) -> None:
    import resource

    for which, value in (
        (resource.RLIMIT_AS, memory_mb << 20),
        (resource.RLIMIT_CPU, cpu_s),
        (resource.RLIMIT_FSIZE, 16 << 20),
        (resource.RLIMIT_CORE, 0),
    ):
        try:
            _, hard = resource.getrlimit(which)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (cap, cap))
        except (ValueError, OSError):
            pass
