"""One test's run in the in-sandbox harness (standard library only; shipped next to
`harness_program.py`, whose worker calls `run_test` once per test, and imported on the host too).

`run_test` forks the test child (`harness_child.py`) with fresh pipes, asks for a judge first when
the test is a judged one (`harness_judge.py`), feeds its stdin and collects its output under the
test's time limit and output cap (`_pump`), then kills everything the test left behind: the
child's session and every descendant the worker can find (it is a child subreaper, so escaped
orphans come back to it), so fork bombs, background processes and `setsid` tricks do not outlive
their test. The report holds the output's digest and a capped head and tail, never a verdict: the
child's result line is passed on unparsed (`_result`), a judge's verdict as it said it (`_verdict`).

`normalize_stdout` and `stdout_digest` are also imported by the verifier outside, so both sides
hash the same text; the caps (HEAD_CHARS, TAIL_CHARS, MESSAGE_CHARS) size the host's reads.
"""

from __future__ import annotations

import hashlib
import os
import selectors
import signal
import time

if __package__:  # imported on the host, for the digests
    from rlvr.verifiers.code import harness_child as child
    from rlvr.verifiers.code import harness_judge
else:  # in the sandbox, next to harness_child.py; imported (by harness_program) before any program
    import harness_child as child  # runs, which may overwrite the files in the working directory
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
