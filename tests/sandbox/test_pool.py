"""The warm pool against a real Docker engine: threads, dead containers, an unreachable engine,
stale-container reaping, no orphans after a crash."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import docker
import pytest

from rlvr import sandbox
from rlvr.sandbox import DockerSandbox, Limits, Status, unavailable_reason
from rlvr.sandbox.owner import LABEL, OWNER_LABEL, POOL_LABEL, owner_token
from tests.conftest import require
from tests.sandbox.engine_view import PRINT_CONTAINER, idle

pytestmark = pytest.mark.docker

QUICK = Limits(timeout_s=5, memory_mb=128, output_bytes=4096, pids=32)


@pytest.fixture(scope="module")
def client():
    reason = unavailable_reason()
    require(reason is None, reason or "")
    return docker.from_env(timeout=30)


def mine(client, pool_id: str) -> list[dict]:
    """The containers of one sandbox (other sandboxes of this process may be alive too)."""
    return client.api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{POOL_LABEL}={pool_id}"]})


def wait_until(condition, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_concurrent_runs_from_threads(client):
    with DockerSandbox(pool_size=3, limits=QUICK) as box:

        def one(i: int):
            return i, box.run(
                {"main.py": f"import sys; print({i} * 2, sys.stdin.read())"}, ["python3", "main.py"], stdin=str(i)
            )

        with ThreadPoolExecutor(8) as workers:
            results = list(workers.map(one, range(40)))
        for i, result in results:
            assert result.ok and result.stdout == f"{i * 2} {i}\n", result
        assert len(mine(client, box.pool_id)) <= 3
    assert wait_until(lambda: not mine(client, box.pool_id)), "close() left containers behind"


def test_contaminated_container_is_replaced_before_reuse(client):
    with DockerSandbox(pool_size=1, limits=QUICK) as box:
        daemon = box.run(
            {"main.py": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(100)\nprint('bye')"},
            ["python3", "main.py"],
        )
        assert daemon.ok and "container replaced" in daemon.detail and "process" in daemon.detail
        shared = box.run({"main.py": "open('/tmp/left', 'w').write('x')"}, ["python3", "main.py"])
        assert "container replaced" in shared.detail and "/tmp" in shared.detail
        seeing = "import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]), os.listdir('/tmp'))\n"
        after = box.run({"main.py": seeing + PRINT_CONTAINER}, ["python3", "main.py"])
        seen, container = after.stdout.splitlines()
        assert seen == "2 []"  # its own pid namespace (the run's pid 1 and itself), an empty /tmp
        assert idle(container)  # and from the host: only the container's init and runner


def test_unreachable_engine_is_unavailable_not_a_failure():
    box = DockerSandbox(base_url="unix:///nonexistent/docker.sock", pool_size=1)
    start = time.monotonic()
    first = box.run({"main.py": "print(1)"}, ["python3", "main.py"])
    second = box.run({"main.py": "print(1)"}, ["python3", "main.py"])
    assert time.monotonic() - start < 10
    for result in (first, second):
        assert result.status is Status.UNAVAILABLE and result.exit_code is None and not result.ok
        assert "Docker" in result.detail and "nonexistent" in result.detail
    box.close()
    assert box.run({}, ["true"]).status is Status.UNAVAILABLE


def test_container_killed_under_a_run_is_replaced(client):
    with DockerSandbox(pool_size=1, limits=QUICK) as box:
        assert box.run({}, ["true"]).ok
        (victim,) = mine(client, box.pool_id)
        client.api.kill(victim["Id"])  # idle: the next run notices and gets a fresh container
        assert box.run({}, ["true"]).ok
        (victim,) = mine(client, box.pool_id)
        killer = threading.Timer(0.5, client.api.kill, args=(victim["Id"],))
        killer.start()  # during a run: it is retried once on a fresh container
        result = box.run({"main.py": "import time; time.sleep(1.5); print('done')"}, ["python3", "main.py"])
        killer.join()
        assert result.ok and result.stdout == "done\n", result
        assert [c["Id"] for c in mine(client, box.pool_id)] != [victim["Id"]]


def test_stale_containers_are_reaped_at_start(client, tmp_path):
    gone = subprocess.run(
        [sys.executable, "-c", "from rlvr.sandbox.owner import owner_token; print(owner_token())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        alive_token = owner_token(alive.pid)
        ids = {}
        for name, token in (("stale", gone), ("live", alive_token)):
            ids[name] = client.api.create_container(
                sandbox.image_tag(), command=["sleep", "60"], labels={LABEL: "1", OWNER_LABEL: token}
            )["Id"]
        with DockerSandbox(pool_size=1, limits=QUICK) as box:
            assert box.run({}, ["true"]).ok
        existing = {c["Id"] for c in client.api.containers(all=True, filters={"label": f"{LABEL}=1"})}
        assert ids["stale"] not in existing and ids["live"] in existing
    finally:
        alive.kill()
        client.api.remove_container(ids["live"], force=True)


def test_no_orphans_after_the_owner_is_killed(client):
    script = textwrap.dedent("""
        import os, signal, sys
        from rlvr.sandbox import DockerSandbox, Limits
        box = DockerSandbox(pool_size=2, limits=Limits(memory_mb=128, pids=32))
        assert box.run({}, ["true"]).ok
        print(os.getpid(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -9, done.stderr
    token = done.stdout.strip()
    assert token.isdigit()
    leftovers = lambda: [
        c
        for c in client.api.containers(all=True, filters={"label": f"{LABEL}=1"})
        if c["Labels"].get(OWNER_LABEL, "").split(":")[2:3] == [token]
    ]
    assert wait_until(lambda: not leftovers()), leftovers()


def test_not_picklable_and_shared_sandbox(client):
    box = DockerSandbox(pool_size=1)
    with pytest.raises(TypeError, match="shared_sandbox"):
        pickle.dumps(box)
    box.close()
    shared = sandbox.shared_sandbox()
    assert shared is sandbox.shared_sandbox()
    assert shared.run({"main.py": "print('shared')"}, ["python3", "main.py"]).stdout == "shared\n"
    shared.close()
    assert sandbox.shared_sandbox() is not shared  # a closed one is replaced on demand
    sandbox.shared_sandbox().close()


class EngineProxy:
    """A unix-socket relay in front of the real Docker socket: stopping it is an engine dying
    (every connection cut, new ones refused) without touching the shared engine."""

    def __init__(self, path: str, target: str = "/var/run/docker.sock"):
        self.path, self.target = path, target
        self.conns: list = []
        self.listener = None

    def start(self) -> None:
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.path)
        self.listener.listen(64)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def stop(self) -> None:
        self.listener.close()
        for conn in self.conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self.conns.clear()

    def _accept(self, listener) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst) -> None:
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.close()
            except OSError:
                pass


def test_engine_dying_and_coming_back(client, tmp_path):
    proxy = EngineProxy(str(tmp_path / "docker.sock"))
    proxy.start()
    box = DockerSandbox(base_url=f"unix://{proxy.path}", pool_size=1, limits=QUICK)
    try:
        assert box.run({}, ["true"]).ok
        proxy.stop()  # the engine "dies": the warm container's connection is cut
        down = box.run({}, ["true"])
        assert down.status is Status.UNAVAILABLE and "Docker" in down.detail, down
        proxy.start()  # and comes back
        assert wait_until(lambda: box.run({"main.py": "print('back')"}, ["python3", "main.py"]).ok, 10)
    finally:
        box.close()
        proxy.stop()
