"""The test child of the in-sandbox harness (standard library only; shipped next to
`harness_program.py`). The worker forks one child per test; `run_child` turns it into a
fresh-looking Python process running the program and never returns.

The program runs as module `__main__` for a stdin/stdout test (its exit status and output are
the result), or as module `solution` for a call test (the function's return value, as JSON, goes
to the result pipe) and an assert test (the test code runs in the program's namespace; `passed`
goes to the result pipe only once the code ran to its end). Result lines carry the test's token.
"""
from __future__ import annotations

import atexit
import hashlib
import io
import json
import os
import signal
import sys
import traceback
import types

RESULT_FD = 3             # where a call or assert test's result goes, in the child
VALUE_INLINE = 64 * 1024  # a return value's JSON up to this size comes back whole, beyond it hashed
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36


def value_digest(json_text: str) -> str:
    """Hash of a JSON value in canonical form (sorted keys, no spaces): how return values too
    large to send back whole (over VALUE_INLINE bytes of JSON) are compared."""
    canonical = json.dumps(json.loads(json_text), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


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


def run_child(test: dict, source: str, token: str, fds: tuple[int, int, int, int], memory_mb: int) -> None:
    """In the forked child: become a fresh-looking Python process running the program. Never
    returns, whatever the program does: the worker's own code must not go on in this process."""
    try:
        _run(test, source, token, fds, memory_mb)
    finally:
        os._exit(126)


def _run(test: dict, source: str, token: str, fds: tuple[int, int, int, int], memory_mb: int) -> None:
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(RESULT_FD + 1, 1 << 16)
        prctl(PR_SET_DUMPABLE, 1)  # its own /proc entries, like any process (the worker is not)
        set_limits(memory_mb, int(test["timeout_s"]) + 2)
        atexit._clear()
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        streams = []
        for fd, mode in ((0, "r"), (1, "w"), (2, "w")):
            raw = io.FileIO(fd, mode, closefd=False)
            buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
            streams.append(io.TextIOWrapper(buffered, encoding="utf-8", errors="strict" if fd < 2 else "backslashreplace",
                                            line_buffering=fd == 2))
        sys.stdin, sys.stdout, sys.stderr = streams
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
        sys.argv = ["solution.py"]
        sys.path[0] = os.getcwd()
        mode = test["kind"]
        module = types.ModuleType("__main__" if mode == "io" else "solution")
        module.__file__ = "solution.py"
        sys.modules[module.__name__] = module
    except BaseException:  # noqa: BLE001 - setup failed: exit distinctly, the test fails
        os._exit(125)
    write = os.write

    def report(**obj) -> None:
        data = memoryview((json.dumps({**obj, "token": token}) + "\n").encode())
        while data:
            data = data[write(RESULT_FD, data):]

    try:
        code = compile(source, "solution.py", "exec", dont_inherit=True)
    except BaseException as exc:  # noqa: BLE001 - a syntax error is the program's
        traceback.print_exception(type(exc), exc, None)
        if mode != "io":
            report(stage="load", error=_describe(exc))
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
        report(stage="load", error=_describe(exc))
        _finish(0)
    if mode == "call":
        fn = module.__dict__.get(test["fn"])
        if not callable(fn):
            report(stage="call", error=f"NameError: the program defines no function {test['fn']!r}")
            _finish(0)
        try:
            value = fn(*test["args"], **test["kwargs"])
        except BaseException as exc:  # noqa: BLE001
            report(stage="call", error=_describe(exc))
            _finish(0)
        try:
            text = json.dumps(value)
            digest = value_digest(text) if len(text) > VALUE_INLINE else None
        except BaseException:  # noqa: BLE001 - sets, objects, circular lists, hostile subclasses
            report(stage="call", error=f"the return value ({type(value).__name__}) is not JSON-serialisable")
            _finish(0)
        if digest is None:
            report(value=text)
        else:
            report(value_sha256=digest, value_bytes=len(text), value_head=text[:200])
        _finish(0)
    test_code = test["code"]
    try:
        exec(compile(test_code, "test.py", "exec", dont_inherit=True), module.__dict__)
    except BaseException as exc:  # noqa: BLE001
        report(passed=False, error=_describe(exc, test_code))
        _finish(0)
    report(passed=True)
    _finish(0)


def set_limits(memory_mb: int, cpu_s: int) -> None:
    import resource

    for which, value in ((resource.RLIMIT_AS, memory_mb << 20), (resource.RLIMIT_CPU, cpu_s),
                         (resource.RLIMIT_FSIZE, 16 << 20), (resource.RLIMIT_CORE, 0)):
        try:
            _, hard = resource.getrlimit(which)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (cap, cap))
        except (ValueError, OSError):
            pass
