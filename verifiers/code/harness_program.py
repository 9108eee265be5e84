"""The test harness that runs INSIDE the sandbox: `python3 harness_program.py spec.json` (or its
`main` called after an import, to use the shipped bytecode), next to `harness_run.py` (one test's
run) and `harness_child.py` (the test child's code); standard library only. This module holds the
outer process (`main`) and the worker's loop over the tests (`worker`).

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
`setsid` tricks do not outlive their test (`harness_run`).
"""

from __future__ import annotations

import _socket
import gc
import json
import os
import select
import selectors
import signal
import sys
import time
import traceback

if __package__:  # imported on the host
    from rlvr.verifiers.code import harness_child as child
    from rlvr.verifiers.code import harness_expect, harness_judge
    from rlvr.verifiers.code.harness_run import READ_CHUNK, definitely_failed, run_test
else:  # in the sandbox, next to harness_child.py; imported before any program runs, which may
    import harness_child as child  # overwrite the files in the working directory
    import harness_expect
    import harness_judge
    from harness_run import READ_CHUNK, definitely_failed, run_test


# ---- the worker: one child per test (each test's run: harness_run) -----------------------------
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
