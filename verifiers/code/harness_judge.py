"""The judge of the in-sandbox harness: runs the test code that `judged_asserts` cannot turn into
host-side checks (loops, helpers, comprehensions, lambdas in `check(candidate)`), in a process
that holds none of the program's code. Standard library only; shipped next to
`harness_program.py`, `harness_child.py` and `values.py`.

Processes (the outer process and the worker are described in `harness_program.py`):
- *judges* are forked by the outer process once it has read the test code from its stdin, one
  per judged test, each ahead of its test (a spare). The worker and every test child were
  forked before that, and the sandbox runner wipes its copy of the request before the harness
  starts, so no process running the program ever held the test code (and with it the expected
  values) in its memory. A spare takes one request from the worker, over a socket pair made
  before the worker was forked: a test's index and three pipe ends (requests to the program's
  test child, the child's replies, the report to the worker);
- a *judge* runs one test's code. The program's top-level functions are proxies there: a call
  encodes its arguments (`values.encode`), sends them to the test child, which imported the
  program as module `solution` and serves calls (`harness_child._serve`), and rebuilds the
  reply with `values.decode` (exact plain types only). The test code therefore only ever
  touches values the judge built itself: an object whose `__eq__` always says True, a subclass
  of list or str, a patched builtin or `AssertionError`, a frame walk or gc walk looking for
  `check`: none of it exists in the judge's process. The judge reports to the worker over its
  own pipe: `passed`, `failed <what the test code raised>`, `error <detail>` or
  `invalid <detail>`.

Rules, and why:
- The first failure of the crossing itself (the program's process ended, a reply that is not
  plain data or not well formed, SystemExit in the program) is the verdict, whatever the test
  code does afterwards: a test whose `except:` swallows it cannot turn it into a pass.
- Exceptions the program raises are raised in the test code as the builtin exception of that
  name (a test may expect them), any other name as `ProgramError`. `StopIteration` too becomes
  `ProgramError`: raised into `all(map(candidate, ...))` it would end the iteration early and
  pass the test.
- Arguments the call may change in place (lists, dicts, sets) are brought back after the call,
  so tests that check mutation see it.
- Names: a proxy for every callable the program defines at its top level, except the names of
  builtins (a program's own `len` or `sorted` must not become the test code's); modules the
  program imported are imported by the judge itself, from the standard library only, and only
  under their own name. The judge's import path leaves out the working directory, where the
  program can write files.
- A test that never calls the program does not pass: it tests nothing.
- Only the program can make a judge fail (a judge killed, stopped or out of time is charged to
  the test as a runtime error or timeout), so a judge never reports an error of the harness.
"""

from __future__ import annotations

import _socket
import builtins
import importlib
import io
import json
import os
import signal
import struct
import sys
import types

if __package__:  # imported on the host, for the tests
    from rlvr.verifiers.code import harness_child as child
    from rlvr.verifiers.code import values
else:  # in the sandbox, next to harness_child.py and values.py
    import harness_child as child
    import values

FDS = 3  # per judged test: requests to the test child, its replies, the report to the worker
REQUEST_BYTES = 4096
MESSAGE_CHARS = 1000  # of a verdict's detail
MAX_REPLY = values.MAX_TEXT + 4096
# Modules the test code may use without importing them, when the program imported them.
MODULES = frozenset(
    (
        "array",
        "bisect",
        "cmath",
        "collections",
        "copy",
        "datetime",
        "decimal",
        "fractions",
        "functools",
        "hashlib",
        "heapq",
        "itertools",
        "json",
        "math",
        "numbers",
        "operator",
        "random",
        "re",
        "statistics",
        "string",
        "sys",
        "textwrap",
        "typing",
        "unicodedata",
    )
)
_NOT_PROXIED = frozenset(vars(builtins))


# Not an RlvrError: raised into the test code inside the sandbox's judge (standard library only, no rlvr).
class ProgramError(Exception):
    """An exception the program raised whose type is not a builtin's (or must not act as one)."""


class _Refused(BaseException):
    """Ends the test code after a failure of the crossing (not an Exception: not caught as one)."""


_FORWARDED = {
    name: cls
    for name, cls in vars(builtins).items()
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, (StopIteration, StopAsyncIteration))
}


# ---- a spare judge, and its request -------------------------------------------------------------
def request_judge(
    sock: _socket.socket, index: int, timeout_s: float, memory_mb: int, fds: tuple[int, int, int]
) -> None:
    """In the worker: ask the waiting spare to judge test `index` (OSError when none is left)."""
    message = json.dumps({"i": index, "timeout_s": timeout_s, "memory_mb": memory_mb}).encode()
    sock.sendmsg([message], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))])


def spare(sock: _socket.socket, codes: dict[str, str], taken_fd: int) -> None:
    """A judge forked ahead by the outer process, waiting for its test: prepared, then one
    request from the worker (it says so on `taken_fd`, and the outer process forks the next
    spare: forking is off the tests' critical path), then the test."""
    os.setsid()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)  # a signal ends the judge: never an exception in the test code
    here = os.getcwd()  # where the program can write files: never on the judge's import path
    sys.path[:] = [p for p in sys.path if os.path.isabs(p) and p != here and not p.startswith(here + os.sep)]
    os.chdir("/")
    while True:
        try:
            message, ancillary, _, _ = sock.recvmsg(REQUEST_BYTES, _socket.CMSG_SPACE(FDS * 4))
            break
        except InterruptedError:
            continue
        except OSError:
            return
    if not message:
        return
    os.write(taken_fd, b"t")
    os.close(taken_fd)
    sock.close()
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += struct.unpack(f"{len(data) // 4}i", data[: len(data) - len(data) % 4])
    if len(fds) == FDS:  # else the worker sees the report pipe close without a verdict: the test fails
        request = json.loads(message)
        judge(codes.get(str(request["i"]), ""), *fds, float(request["timeout_s"]), int(request["memory_mb"]))


# ---- one judge ----------------------------------------------------------------------------------
def judge(code: str, calls_fd: int, replies_fd: int, report_fd: int, timeout_s: float, memory_mb: int) -> None:
    """Run one test's code against the program's test child; write the verdict to `report_fd`."""
    os.write(report_fd, f"{os.getpid()}\n".encode())  # the worker kills it when the test is over
    try:
        child.set_limits(memory_mb, int(timeout_s) + 2)
        signal.alarm(int(timeout_s) + 2)  # never outlives its test, whatever the worker does
        tag, detail = Session(calls_fd, replies_fd).run(code)
    except BaseException as exc:  # noqa: BLE001 - e.g. out of memory on a huge value: the test fails
        tag, detail = "error", "the judge failed: " + child._describe(exc)
    os.close(calls_fd)  # the test child sees the end now and exits while the verdict goes out
    line = f"{tag} {detail}".replace("\n", " ").replace("\r", " ")[:MESSAGE_CHARS]
    data = memoryview((line + "\n").encode("utf-8", "backslashreplace"))
    while data:
        data = data[os.write(report_fd, data) :]
    os.close(report_fd)  # the worker sees the end before this process is torn down


class Session:
    """The judge's side of one test: the proxies' calls to the program, and the first failure."""

    def __init__(self, calls_fd: int, replies_fd: int) -> None:
        self.calls_fd = calls_fd
        self.replies = io.BufferedReader(io.FileIO(replies_fd, "r", closefd=False), 1 << 16)
        self.failure: tuple[str, str] | None = None
        self.calls = 0

    def run(self, code: str) -> tuple[str, str]:
        """(tag, detail): `passed`, `failed`, `error` or `invalid`."""
        try:
            compiled = compile(code, "test.py", "exec", dont_inherit=True)
        except SyntaxError as exc:
            return "error", f"the test code does not compile: {exc}"
        try:
            namespace = self.namespace(compiled)
        except _Refused:
            return self.failure
        try:
            exec(compiled, namespace)
            outcome = ("passed", "")
        except BaseException as exc:  # noqa: BLE001 - what the test code raised is its verdict
            outcome = ("failed", child._describe(exc, code))
        if self.failure is not None:
            return self.failure
        if outcome[0] == "passed" and not self.calls:
            return "error", "the test code never called the program"
        return outcome

    def namespace(self, compiled: types.CodeType) -> dict:
        """The test code's globals: proxies for the program's functions, the modules it imported."""
        ready = self.read()
        if _is(ready, 2) and ready[0] == "error" and type(ready[1]) is str:
            self.fail("error", ready[1])
        if not (_is(ready, 3) and ready[0] == "ready" and _names(ready[1]) and _names(ready[2])):
            self.fail("invalid", "a malformed first reply from the program's process")
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        used = _global_names(compiled)
        for name in ready[2]:
            if name in used and name in MODULES and name not in _NOT_PROXIED:
                try:
                    namespace[name] = importlib.import_module(name)
                except ImportError:
                    pass
        for name in ready[1]:
            if name not in _NOT_PROXIED and not name.startswith("__") and name not in namespace:
                namespace[name] = self.proxy(name)
        return namespace

    def proxy(self, name: str):
        def call(*args, **kwargs):
            return self.call(name, args, kwargs)

        call.__name__ = call.__qualname__ = name
        return call

    def call(self, name: str, args: tuple, kwargs: dict) -> object:
        if self.failure is not None:
            raise _Refused(self.failure[1])
        try:
            request = values.encode([name, args, kwargs])
        except Exception as exc:  # noqa: BLE001 - NotPlainData, or a hostile value of the test's own
            self.fail(
                "error",
                f"{name}(...): the test passes a value that cannot cross to the program "
                f"(not plain data: {child._describe(exc)})",
            )
        self.calls += 1
        data = memoryview((request + "\n").encode("ascii"))
        try:
            while data:
                data = data[os.write(self.calls_fd, data) :]
        except OSError:
            self.fail("error", f"{name}(...): the program's process ended during the test")
        reply = self.read()
        if _is(reply, 3) and reply[0] == "ok":
            if reply[2] is not None:
                self.mutated(name, args, kwargs, reply[2])
            return reply[1]
        if _is(reply, 3) and reply[0] == "raise" and type(reply[1]) is str and type(reply[2]) is str:
            raise _exception(reply[1], reply[2])
        if _is(reply, 2) and reply[0] == "exit" and type(reply[1]) is str:
            self.fail("error", f"{name}(...) raised {reply[1]}")
        if _is(reply, 2) and reply[0] == "invalid" and type(reply[1]) is str:
            self.fail("invalid", f"{name}(...) returned a value that is not plain data: {reply[1]}")
        self.fail("invalid", f"{name}(...): a malformed reply from the program's process")

    def mutated(self, name: str, args: tuple, kwargs: dict, state: object) -> None:
        """Bring the arguments' state after the call into the test's own objects."""
        if not (
            _is(state, 2)
            and type(state[0]) is list
            and len(state[0]) == len(args)
            and type(state[1]) is dict
            and state[1].keys() == kwargs.keys()
        ):
            self.fail("invalid", f"{name}(...): a malformed reply from the program's process")
        for old, new in zip(args, state[0]):
            _update(old, new)
        for key, old in kwargs.items():
            _update(old, state[1][key])

    def read(self) -> object:
        line = self.replies.readline(MAX_REPLY)
        if not line.endswith(b"\n"):
            self.fail(
                "error" if len(line) < MAX_REPLY else "invalid",
                "the program's process ended during the test"
                if len(line) < MAX_REPLY
                else "a reply over the size limit",
            )
        try:
            return values.decode(line[:-1].decode("ascii"))
        except Exception as exc:  # noqa: BLE001 - NotPlainData, not ASCII, out of memory: all the program's
            self.fail("invalid", f"an unreadable reply from the program's process: {child._describe(exc)}")

    def fail(self, tag: str, detail: str) -> None:
        if self.failure is None:
            self.failure = (tag, detail)
        raise _Refused(detail)


def _is(value: object, n: int) -> bool:
    return type(value) is list and len(value) == n


def _names(value: object) -> bool:
    return (
        type(value) is list
        and len(value) <= 100_000
        and all(type(v) is str and len(v) <= 200 and v.isidentifier() for v in value)
    )


def _global_names(code: types.CodeType) -> set[str]:
    """Every name the code (nested functions and comprehensions included) may look up."""
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return names


def _exception(name: str, message: str) -> Exception:
    cls = _FORWARDED.get(name)
    if cls is not None:
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError wants five arguments
            pass
    return ProgramError(f"{name}: {message}" if message else name)


def _update(old: object, new: object) -> bool:
    """Make `old` (an object of the test's) equal to `new`, in place; False where it cannot be."""
    if type(old) is list and type(new) is list:
        if len(old) != len(new):
            old[:] = new
            return True
        for i, item in enumerate(new):
            if not _update(old[i], item):
                old[i] = item
        return True
    if type(old) is dict and type(new) is dict:
        if old.keys() != new.keys():
            old.clear()
            old.update(new)
            return True
        for key, item in new.items():
            if not _update(old[key], item):
                old[key] = item
        return True
    if type(old) is set and type(new) is set:
        if old != new:
            old.clear()
            old.update(new)
        return True
    if type(old) is tuple and type(new) is tuple and len(old) == len(new):
        for o, n in zip(old, new):
            _update(o, n)
        return True
    return False
