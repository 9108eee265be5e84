"""The test harness that runs INSIDE the sandbox: `python3 harness_program.py spec.json` (or its
`main` called after an import, to use the shipped bytecode), next to
`harness_child.py` (the test child's code); standard library only.

Four kinds of process:
- the *outer* process makes itself non-dumpable, makes a socket pair, forks the worker, then
  reads from stdin a random nonce and the code of the judged tests. It forks the judges, each
  ahead of its test, and relays the worker's report lines to stdout as `<nonce> <json>`;
- the *worker* (forked before stdin was read, so its memory never holds the nonce or any test
  code) loads the spec (the program's source and what the tests feed it, never an expected
  output: those stay outside and are compared there), deletes the spec file, and runs each test
  in a child;
- each *test child* is forked from the worker (no exec: milliseconds, not a new interpreter),
  starts a new session, gets fresh stdin/stdout/stderr pipes, rlimits and its own wall-clock
  limit, and runs the program (as `__main__` for stdin/stdout tests, as module `solution` for
  call and judged tests);
- the *judges* (`harness_judge.py`) run the code of the assert tests that `judged_asserts`
  cannot convert, one judge per test, calling the program's functions in that test's child
  through pipes.

Why the program under test cannot forge a pass:
- it never sees the nonce or the test code (the sandbox runner wipes its copy of the request,
  and the processes running the program were forked before stdin was read); every harness
  process is non-dumpable, so its memory and file descriptors are closed to the program through
  /proc; the program's own stdout/stderr are capped pipes;
- expected outputs never reach its process: a stdin/stdout test reports a hash of the
  normalised output, a call test (and an assert test converted by `judged_asserts`) the return
  values as plain data (`values.py`), all judged on the host; any other assert test runs in a
  judge, over plain data the judge decoded itself. Whatever the program writes, it can at most
  claim a value; it never reports a verdict.
Programs run as the sandbox's program user (`Limits.supervise`): each test child switches to it
and clears the capabilities it inherited from the worker, so no program can signal, stop,
`prlimit` or trace the outer process, the worker or a judge (all of the supervisor's user). The
worker alone keeps CAP_SETUID/SETGID (to switch its children) and CAP_KILL (to kill what they
leave); the outer process and the judges drop every capability.

The outer process also reads, on stdin after the judged code, the expectations of `harness_expect`
and stops the worker (a byte on a pipe) at the first report that is surely wrong; the worker ends
the whole run at the spec's `wall_s` (the verification's time cap): tests it leaves unrun or cuts
are reported `over_budget`.

After every test the worker kills the child's session and every descendant it can find (it is a
child subreaper, so escaped orphans come back to it): fork bombs, background processes and
`setsid` tricks do not outlive their test.

`normalize_stdout` is also imported by the verifier outside, so both sides hash the same text.
"""

from __future__ import annotations

import _socket
import gc
import hashlib
import json
import os
import select
import selectors
import signal
import sys
import time
import traceback

if __package__:  # imported on the host, for the digests
    from rlvr.verifiers.code import harness_child as child
    from rlvr.verifiers.code import harness_expect, harness_judge
else:  # in the sandbox, next to harness_child.py; imported before any program runs, which may
    import harness_child as child  # overwrite the files in the working directory
    import harness_expect
    import harness_judge

HEAD_CHARS = 300  # program stdout echoed back, for feedback
TAIL_CHARS = 600  # stderr tail echoed back (tracebacks end at the bottom)
MESSAGE_CHARS = 1000  # of an error message in a result line
GRACE_S = 0.2  # after the program exits, how long to wait for pipes its children hold
READ_CHUNK = 65536


def normalize_stdout(text: str) -> str:
    """Whitespace-insensitive form of a program's output: leading and trailing blank space is
    dropped, and within each line runs of whitespace become one space (line breaks are kept)."""
    return "\n".join(" ".join(line.split()) for line in text.strip().splitlines())


def stdout_digest(text: str) -> str:
    return hashlib.sha256(normalize_stdout(text).encode("utf-8")).hexdigest()


# ---- the worker: one child per test -------------------------------------------------------------
def _process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id) of the live processes, from /proc. A zombie is left out: it
    runs nothing, and one that is not ours to reap (its parent is the container's init) takes a
    SIGKILL without error, which made the clean-up below spin for its whole second."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                if fields[0] in (b"Z", b"X"):
                    continue
                table[int(name)] = (int(fields[1]), int(fields[3]))
            except (OSError, IndexError, ValueError):
                continue
    return table


def _kill_leftovers(session: int) -> None:
    """SIGKILL every descendant of ours and every process in the test's session; reap them."""
    me = os.getpid()
    for _ in range(200):
        table = _process_table()
        doomed = {pid for pid, (_, sid) in table.items() if sid == session and pid != me}
        frontier = [me]
        while frontier:
            parent = frontier.pop()
            kids = [pid for pid, (ppid, _) in table.items() if ppid == parent and pid not in doomed]
            doomed.update(kids)
            frontier.extend(kids)
        signalled = False
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
                signalled = True
            except (ProcessLookupError, PermissionError):
                pass
        while True:  # reap whatever is ours (re-parented orphans included)
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not signalled:
            return
        time.sleep(0.005)


def run_test(
    test: dict,
    source: str,
    memory_mb: int,
    output_cap: int,
    judges=None,
    index: int = 0,
    user=None,
    stop_fd: int | None = None,
    deadline: float = float("inf"),
) -> dict:
    """Run one test in a fresh child; return the report (without the expected output). A judged
    test (kind "judge") also gets a judge, asked for on the socket `judges`: the child serves
    its calls, and the judge's verdict is the result. The test ends at its own time limit or at
    `deadline` (the verification's), whichever comes first, and is dropped (`skipped`) when
    `stop_fd` becomes readable (the outer process saw an earlier test's value surely wrong)."""
    token = os.urandom(16).hex()
    judged = test["kind"] == "judge"
    # stdin, stdout, stderr, result (a judged test: replies to the judge), [requests, verdict]
    pipes = [os.pipe() for _ in range(6 if judged else 4)]
    child_fds = (pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]) + ((pipes[4][0],) if judged else ())
    start = time.monotonic()
    if judged:  # first, so that the judge gets ready while the child starts
        try:
            harness_judge.request_judge(
                judges, index, float(test["timeout_s"]), memory_mb, (pipes[4][1], pipes[3][0], pipes[5][1])
            )
        except OSError:
            pass  # no judge is left (the program killed them): no verdict comes, the test fails
    try:
        pid = os.fork()
    except OSError as exc:  # e.g. a previous test's fork bomb still holds every pid
        for fd in sum(pipes, ()):
            os.close(fd)
        return {"status": "spawn_error", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    if pid == 0:
        child.run_child(test, source, token, child_fds, memory_mb, user)
    for fd in child_fds + ((pipes[4][1], pipes[3][0], pipes[5][1]) if judged else ()):
        os.close(fd)
    stdin_w, out_r, err_r, res_r = pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]
    if judged:
        res_r = pipes[5][0]
    pending = {stdin_w: test.get("stdin", "").encode("utf-8")}
    buffers = {out_r: bytearray(), err_r: bytearray(), res_r: bytearray()}
    status, exit_code = _pump(
        pid,
        pending,
        buffers,
        min(start + float(test["timeout_s"]), deadline),
        output_cap,
        res_r if judged else None,
        stop_fd,
    )
    for kill in (os.killpg, os.kill):  # the test is over: nothing of its session may go on, and
        try:  # the child itself even before its setsid (a test stopped at once is one)
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    result = _verdict(bytes(buffers[res_r])) if judged else _result(bytes(buffers[res_r]), token)
    if exit_code is None:
        try:
            _, raw = os.waitpid(pid, 0)
            exit_code = os.waitstatus_to_exitcode(raw)
        except ChildProcessError:
            pass
    elapsed = time.monotonic() - start
    _kill_leftovers(pid)
    for fd in list(pending) + list(buffers):
        try:
            os.close(fd)
        except OSError:
            pass
    if status == "stopped":
        return {"status": "skipped"}
    out = bytes(buffers[out_r]).decode("utf-8", "replace")
    err = bytes(buffers[err_r]).decode("utf-8", "replace")
    return {
        "status": status,
        "exit_code": exit_code,
        "time_s": round(elapsed, 4),
        "stdout_sha256": stdout_digest(out),
        "stdout_head": out[:HEAD_CHARS],
        "stdout_bytes": len(out),
        "stderr_tail": err[-TAIL_CHARS:],
        "result": result,
    }


def _pump(
    pid: int,
    pending: dict,
    buffers: dict,
    deadline: float,
    output_cap: int,
    end_fd: int | None = None,
    stop_fd: int | None = None,
) -> tuple[str, int | None]:
    """Feed stdin, collect outputs, enforce the time limit and caps: (status, exit code if reaped).
    The test is over when the child exited or, given `end_fd`, when that pipe closed (the judge
    is done), and the other pipes closed or GRACE_S passed; or at once (`stopped`) when `stop_fd`
    becomes readable."""
    sel = selectors.DefaultSelector()
    if stop_fd is not None:
        sel.register(stop_fd, selectors.EVENT_READ)
    for fd in pending:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_WRITE)
    for fd in buffers:
        sel.register(fd, selectors.EVENT_READ)
    out_fds = list(buffers)[:2]
    try:  # readable when the child exits: no polling delay (Linux >= 5.3)
        exit_fd = os.pidfd_open(pid)
        sel.register(exit_fd, selectors.EVENT_READ)
    except (AttributeError, OSError):
        exit_fd = None
    exit_code, ended_at = None, None
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                return "timeout", exit_code
            if exit_code is None:
                done, raw = os.waitpid(pid, os.WNOHANG)
                if done:
                    exit_code = os.waitstatus_to_exitcode(raw)
                    ended_at = now if end_fd is None else ended_at
                    if exit_fd is not None:
                        sel.unregister(exit_fd)
            readers = [k for k in sel.get_map().values() if k.fd in buffers]
            if ended_at is not None and (not readers or now - ended_at > GRACE_S):
                return "done", exit_code
            wait = 0.02 if exit_code is not None or exit_fd is not None or readers else 0.002
            for key, _ in sel.select(timeout=min(wait, deadline - now)):
                fd = key.fd
                if fd == stop_fd:
                    return "stopped", exit_code
                if fd == exit_fd:
                    continue  # reaped at the top of the loop
                if fd in pending:
                    try:
                        pending[fd] = pending[fd][os.write(fd, pending[fd][:READ_CHUNK]) :]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the program stopped reading: drop the rest
                        pending[fd] = b""
                    if not pending[fd]:
                        sel.unregister(fd)
                        os.close(fd)
                        del pending[fd]
                    continue
                chunk = os.read(fd, READ_CHUNK)
                if not chunk:
                    sel.unregister(fd)
                    if fd == end_fd and ended_at is None:
                        ended_at = time.monotonic()
                    continue
                buffers[fd] += chunk
                if sum(len(buffers[f]) for f in out_fds) > output_cap or len(buffers[fd]) > output_cap:
                    return "output_limit", exit_code
    finally:
        sel.close()
        if exit_fd is not None:
            os.close(exit_fd)


def _result(data: bytes, token: str) -> dict | None:
    """The line carrying this test's token, as {"tag", "body"} strings, or None. The body is not
    parsed here: it may be anything the program wrote, and only the host judges it. The harness
    writes one result per test: more than one means the program wrote some (after a crash, from
    an atexit hook or a thread), and the test has no trustworthy result."""
    prefix = token.encode() + b" "
    lines = [line for line in data.splitlines() if line.startswith(prefix)]
    if not lines:
        return None
    if len(lines) > 1:
        return {"tag": "invalid", "body": f"{len(lines)} results for one test"}
    tag, _, body = lines[0][len(prefix) :].decode("utf-8", "replace").partition(" ")
    if tag == "values" and not (body.isascii() and body.isprintable()):
        return {"tag": "invalid", "body": "encoded values must be printable ASCII"}
    return {"tag": tag[:20], "body": body if tag == "values" else body[:MESSAGE_CHARS]}


def _verdict(data: bytes) -> dict:
    """A judge's report: its pid, then `<tag> <detail>` (see harness_judge). The judge is killed
    if it is still there: with a verdict it is about to exit, without one its test is over."""
    lines = data.split(b"\n")
    if len(lines) >= 3 and lines[1]:
        tag, _, body = lines[1].decode("utf-8", "replace").partition(" ")
        return {"tag": tag[:20], "body": body[:MESSAGE_CHARS]}
    if lines[0].isdigit():
        try:
            os.kill(int(lines[0]), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return {
        "tag": "error",
        "body": "no verdict from the judge: the program killed or stopped it, or it ran out of time",
    }


def definitely_failed(test: dict, report: dict) -> bool:
    """A failure visible without the expected output (used to stop early, by option)."""
    if report["status"] != "done":
        return True
    result = report.get("result")
    if test["kind"] == "io":
        return report["exit_code"] != 0
    return result is None or result["tag"] not in ("values", "passed")


def _stopped(stop_fd: int) -> bool:
    return bool(select.select([stop_fd], [], [], 0)[0])


def worker(spec_path: str, out_fd: int, judges: _socket.socket, stop_fd: int) -> int:
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the nonce arrives on stdin later: the worker must never read it
    os.dup2(null, 1)
    os.close(null)
    user = child.program_user()
    hardening = {
        "non_dumpable": child.prctl(child.PR_SET_DUMPABLE, 0),
        "subreaper": child.prctl(child.PR_SET_CHILD_SUBREAPER, 1),
        "program_uid": user[0] if user else None,  # the host refuses a harness its programs could reach
    }
    out = os.fdopen(out_fd, "w", buffering=1)
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    os.unlink(spec_path)  # later tests' programs must not read other tests' code
    gc.freeze()  # the spec too: each test child is forked from here
    out.write(json.dumps({"event": "start", "tests": len(spec["tests"]), **hardening}) + "\n")
    deadline = time.monotonic() + float(spec.get("wall_s", float("inf")))  # the verification's time
    stop, values_bytes = False, 0
    for i, test in enumerate(spec["tests"]):
        stop = stop or _stopped(stop_fd)
        if stop or time.monotonic() >= deadline:
            out.write(json.dumps({"i": i, "status": "skipped" if stop else "over_budget"}) + "\n")
            continue
        try:
            report = run_test(
                test,
                spec["source"],
                int(spec["memory_mb"]),
                int(spec["output_cap"]),
                judges,
                i,
                user,
                stop_fd,
                deadline,
            )
        except Exception as exc:  # noqa: BLE001 - our own failure: say so, so it is not blamed on the program
            out.write(
                json.dumps({"i": i, "status": "internal_error", "detail": f"{type(exc).__name__}: {exc}"[:300]}) + "\n"
            )
            return 1
        result = report.get("result")
        if result is not None and result["tag"] == "values":  # the call's output budget, shared
            values_bytes += len(result["body"])
            if values_bytes > int(spec["value_budget"]):
                report.update(status="output_limit", result=None)
        if report["status"] == "timeout" and time.monotonic() >= deadline:
            report["status"] = "over_budget"  # cut by the verification's time, not its own limit
        out.write(json.dumps({"i": i, **report}) + "\n")
        stop = report["status"] == "skipped" or (bool(spec.get("fail_fast")) and definitely_failed(test, report))
    out.write(json.dumps({"event": "end"}) + "\n")
    out.flush()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python3 harness_program.py SPEC (the nonce on stdin)", file=sys.stderr)
        return 2
    # Non-dumpable before anything else runs: no test child can ever open our /proc files.
    child.prctl(child.PR_SET_DUMPABLE, 0)
    gc.freeze()  # the harness's objects, out of every forked process's collections: fewer copy-on-write faults
    read_end, write_end = os.pipe()
    stop_r, stop_w = os.pipe()  # the outer process tells the worker to stop (harness_expect)
    judges, server_end = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    pid = os.fork()  # before stdin is read: the worker and its test children never hold the nonce or the test code
    if pid == 0:
        os.close(read_end)
        os.close(stop_w)
        server_end.close()
        try:
            code = worker(argv[1], write_end, judges, stop_r)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(write_end)
    os.close(stop_r)
    judges.close()
    if child.program_user() is not None:
        child.drop_capabilities()  # only the worker switches users and stops processes; judges hold none
    nonce = sys.stdin.readline().strip()
    if len(nonce) < 16:
        print("harness: no nonce on stdin", file=sys.stderr)
        return 2
    codes = json.loads(sys.stdin.readline() or "{}")  # the judged tests' code, by index in the spec
    expectations = json.loads(sys.stdin.readline() or "{}")  # for the early stop (harness_expect)
    spares: list[int] = []  # judges forked ahead, one per judged test (see harness_judge)

    def fork_spare() -> int | None:
        """A spare judge; the read end of the pipe on which it says it took its request."""
        taken_r, taken_w = os.pipe()
        try:
            spare = os.fork()
        except OSError:  # no pid left (a fork bomb): later judged tests get no verdict and fail
            os.close(taken_r)
            os.close(taken_w)
            return None
        if spare == 0:
            try:  # it never writes to the sandbox's stdout nor reads the worker's lines
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                for fd in (null, read_end, taken_r, stop_w):
                    os.close(fd)
                harness_judge.spare(server_end, codes, taken_w)
            finally:
                os._exit(0)
        os.close(taken_w)
        spares.append(spare)
        return taken_r

    taken = fork_spare() if codes else None
    sel = selectors.DefaultSelector()
    sel.register(read_end, selectors.EVENT_READ)
    if taken is not None:
        sel.register(taken, selectors.EVENT_READ)
    pending = b""
    while read_end is not None:
        for key, _ in sel.select():
            if key.fd == taken:  # the spare took a request: the next one is forked ahead
                took = os.read(taken, 1)
                sel.unregister(taken)
                os.close(taken)
                taken = fork_spare() if took and len(spares) < len(codes) else None
                if taken is not None:
                    sel.register(taken, selectors.EVENT_READ)
                continue
            chunk = os.read(read_end, READ_CHUNK)  # only the worker holds the other end
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            if not chunk and pending:
                lines.append(pending)
            for line in lines:
                text = line.decode("utf-8", "replace").rstrip()
                sys.stdout.write(f"{nonce} {text}\n")
                if expectations and harness_expect.surely_wrong(text, expectations):
                    expectations = {}  # one stop is enough
                    try:
                        os.write(stop_w, b"s")
                    except OSError:  # the worker is gone already
                        pass
            sys.stdout.flush()
            if not chunk:
                sel.close()
                os.close(read_end)
                read_end = None
                break
    server_end.close()
    _, raw = os.waitpid(pid, 0)
    for spare in spares:  # done when the worker is; a spare must not keep the sandbox call open
        try:
            os.kill(spare, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(spare, 0)
    if taken is not None:
        os.close(taken)
    return os.waitstatus_to_exitcode(raw) & 0xFF


if __name__ == "__main__":
    sys.exit(main(sys.argv))
