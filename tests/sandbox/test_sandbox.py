"""The sandbox against a real Docker engine: what programs see and how each run ends."""

from __future__ import annotations

import hashlib
import json

import pytest

from rlvr.sandbox import DockerSandbox, Limits, Status, unavailable_reason
from tests.conftest import require
from tests.sandbox.engine_view import PRINT_CONTAINER, idle

pytestmark = pytest.mark.docker

QUICK = Limits(timeout_s=3, memory_mb=128, output_bytes=4096, pids=32)


@pytest.fixture(scope="module")
def box():
    reason = unavailable_reason()
    require(reason is None, reason or "")
    with DockerSandbox(pool_size=2, limits=QUICK) as sandbox:
        yield sandbox


def py(box, program: str, *args: str, stdin: str | bytes = "", limits: Limits | None = None, **files):
    return box.run({"main.py": program, **files}, ["python3", "main.py", *args], stdin=stdin, limits=limits)


def test_trivial_program(box):
    result = py(box, "print(6 * 7)")
    assert result.status is Status.OK and result.ok
    assert (result.exit_code, result.stdout, result.stderr, result.detail) == (0, "42\n", "", "")
    assert 0 < result.wall_time < 2


def test_exit_codes_and_tracebacks_look_like_python3(box):
    assert py(box, "import sys; sys.exit(3)").exit_code == 3
    message = py(box, "import sys; sys.exit('bad input')")
    assert (message.exit_code, message.stderr) == (1, "bad input\n")
    crash = py(box, "def f():\n    return 1 / 0\nf()\n")
    assert crash.status is Status.OK and crash.exit_code == 1
    assert crash.stderr.startswith('Traceback (most recent call last):\n  File "/work/run/main.py", line 3')
    assert crash.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "runner" not in crash.stderr
    syntax = py(box, "print(1\n")
    assert syntax.exit_code == 1 and "SyntaxError" in syntax.stderr


def test_in_process_python_matches_a_fresh_interpreter(box):
    """The runner's fast path (`python3 main.py` forked in-process) against an exec'd python3."""
    program = (
        "import json, os, sys, threading\n"
        "out = {'argv': sys.argv, 'name': __name__, 'file': __file__, 'path0': sys.path[0],\n"
        "       'cwd': os.getcwd(), 'home': os.environ['HOME'], 'stdin': sys.stdin.read(),\n"
        "       'encoding': sys.stdout.encoding, 'uid': os.getuid()}\n"
        "go = threading.Event()\n"
        "threading.Thread(target=lambda: go.wait() and print('late thread')).start()\n"
        "print(json.dumps(out, sort_keys=True))\n"
        "go.set()  # python3 waits for this thread before exiting\n"
    )
    fast = box.run({"main.py": program}, ["python3", "main.py", "a b"], stdin="in put")
    fresh = box.run({"main.py": program}, ["/usr/bin/env", "python3", "main.py", "a b"], stdin="in put")
    assert fast.ok and fresh.ok, (fast, fresh)
    assert fast.stdout == fresh.stdout
    assert fast.stdout.endswith("late thread\n")
    report = json.loads(fast.stdout.splitlines()[0])
    assert report["argv"] == ["main.py", "a b"] and report["stdin"] == "in put"
    assert report["file"] == "/work/run/main.py" and report["cwd"] == "/work/run"


def test_python_c_and_m_and_other_commands(box):
    flag_c = box.run({}, ["python3", "-c", "import sys; print(sys.argv[1:])", "x"])
    assert flag_c.stdout == "['x']\n"
    module = box.run(
        {"pkg/__init__.py": "", "pkg/tool.py": "import sys; print(__name__, sys.argv[1])"},
        ["python3", "-m", "pkg.tool", "arg"],
    )
    assert module.stdout == "__main__ arg\n", module
    shell = box.run({"run.sh": '#!/bin/sh\necho "$HOME $(id -u) $1"\n'}, ["./run.sh", "hi"])
    assert shell.stdout == "/work/run 10001 hi\n", shell
    missing = box.run({}, ["no-such-program"])
    assert missing.status is Status.OK and missing.exit_code == 127 and "no-such-program" in missing.stderr


def test_stdin_binary_files_and_unicode(box):
    blob = bytes(range(256)) * 4096  # 1 MiB, every byte value
    program = (
        "import hashlib, sys\n"
        "data = sys.stdin.buffer.read()\n"
        "print(hashlib.sha256(data).hexdigest(), hashlib.sha256(open('b.bin', 'rb').read()).hexdigest())\n"
        "print('héllo ✓')\n"
    )
    result = box.run({"main.py": program, "b.bin": blob}, ["python3", "main.py"], stdin=blob)
    digest = hashlib.sha256(blob).hexdigest()
    assert result.stdout == f"{digest} {digest}\nhéllo ✓\n"


def test_isolation_seen_from_inside(box):
    program = """import json, os, socket
status = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\\t" in l)
out = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
       "caps": [status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd")],
       "no_new_privs": status["NoNewPrivs"].strip(),
       "interfaces": sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])}
for path in ("/usr/x", "/etc/x", "/x"):
    try:
        open(path, "w")
        out[path] = "writable"
    except OSError as e:
        out[path] = e.strerror
try:
    socket.create_connection(("1.1.1.1", 80), timeout=1)
    out["net"] = "open"
except OSError:
    out["net"] = "blocked"
print(json.dumps(out))
"""
    out = json.loads(py(box, program).stdout)
    assert (out["uid"], out["gid"], out["groups"]) == (10001, 10001, [])
    assert out["caps"][:2] == ["0000000000000000"] * 2 and out["no_new_privs"] == "1"
    assert out["interfaces"] == ["lo"] and out["net"] == "blocked"
    assert all(out[p] == "Read-only file system" for p in ("/usr/x", "/etc/x", "/x")), out


def test_time_limit_kills_the_whole_group(box):
    program = "import os, time\nos.fork()\nos.fork()\nwhile True:\n    pass\n"
    result = py(box, program, limits=Limits(timeout_s=0.5, memory_mb=128, output_bytes=4096, pids=32))
    assert result.status is Status.TIMEOUT and result.exit_code == -9
    assert 0.5 <= result.wall_time < 2.5
    assert "container replaced" not in result.detail  # the group died with the program
    follow = py(box, "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n" + PRINT_CONTAINER)
    pids, container = follow.stdout.splitlines()
    assert json.loads(pids) == [1, 2]  # its own pid namespace: the run's pid 1 and this program
    assert idle(container)  # and from the host: nothing of the killed run in the container


def test_memory_output_and_signal_statuses(box):
    assert py(box, "x = bytearray(1 << 30)").status is Status.MEMORY
    flood = py(box, "while True:\n    print('y' * 1000)")
    assert flood.status is Status.OUTPUT_LIMIT and len(flood.stdout) == QUICK.output_bytes
    segv = py(box, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert (segv.status, segv.exit_code) == (Status.KILLED, -11) and "SIGSEGV" in segv.detail
    handled = py(box, "try:\n    bytearray(1 << 30)\nexcept MemoryError:\n    print('coped')")
    assert handled.ok and handled.stdout == "coped\n"


def test_bad_input_gets_typed_errors(box):
    with pytest.raises(TypeError):
        box.run({}, "python3 main.py")
    with pytest.raises(TypeError):
        box.run({"main.py": 3}, ["python3", "main.py"])
    for name in ("../escape.py", "/etc/passwd", "a//b", "./x"):
        with pytest.raises(ValueError):
            box.run({name: ""}, ["true"])
    with pytest.raises(ValueError):
        box.run({"big": b"\0" * (box.settings.work_mb << 20)}, ["true"])
    with pytest.raises(ValueError, match="UTF-8"):
        box.run({"main.py": "print('\udcff')"}, ["python3", "main.py"])
    with pytest.raises(ValueError):
        box.run({}, ["python3", "-c", "print(1)"], limits=Limits(output_bytes=1 << 30))
    with pytest.raises(ValueError):
        Limits(timeout_s=0)
