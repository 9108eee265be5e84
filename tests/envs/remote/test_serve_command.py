"""`rlvr serve` as a command: the README's command run as written (a process, on 127.0.0.1:8000), played by the
README's client example as written, and stopped by Ctrl-C; its one-line refusals, in this process."""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import require
from tests.test_readme_commands import README, readme_command, root  # noqa: F401 - root: the stand-in fixture

pytest.importorskip("openenv.core", reason="the serve extra (pip install 'rlvr[serve]')")

HEADING = "## Use rlvr from other trainers"


def client_example() -> str:
    """The section's python block that plays the served environment."""
    section = re.split(r"\n## ", README.read_text(encoding="utf-8").split(f"\n{HEADING}\n", 1)[1], maxsplit=1)[0]
    (block,) = [b for b in re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M) if "RemoteEnv(" in b]
    return block


def first_line(process: subprocess.Popen, timeout: float) -> str:
    """The first line `process` prints, or '' if it prints none in `timeout` seconds (or exits first)."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        return ""


def free(port: int) -> bool:
    """Whether `rlvr serve` can listen on 127.0.0.1:`port` (as it does: SO_REUSEADDR, so that a past run's connections
    in TIME_WAIT do not count; a listening program still does)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def outside_address() -> str | None:
    """This machine's address on its network (not loopback), if it has one; no packet is sent."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks the route
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def test_the_readme_serve_command_serves_localhost_only_and_its_client_example_prints_what_it_says(root, tmp_path):  # noqa: F811
    command = readme_command("rlvr serve")
    require(free(8000), "port 8000 on 127.0.0.1 is taken here: the README's command cannot listen on it")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    server = subprocess.Popen(shlex.split(command), cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        line = first_line(server, timeout=120)
        serving = "serving rlvr/Arithmetic-v0 (v0, single-step) at http://127.0.0.1:8000 as an OpenEnv 0.3.0"
        assert line.startswith(f"{serving} environment: WebSocket ws://127.0.0.1:8000/ws"), (line, server.poll())
        # the README's client, as written, in a fresh interpreter: each print is what its comment says
        example = client_example()
        (tmp_path / "client.py").write_text(example, encoding="utf-8")
        done = subprocess.run([sys.executable, "client.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        said = [c.strip() for c in re.findall(r"^\s*print\(.*\)\s+#(.*)$", example, flags=re.M)]
        assert done.stdout.splitlines() == said and len(said) == 3, (done.stdout, said)
        # listening on loopback only: this machine's outside address refuses
        address = outside_address()
        if address is not None:
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((address, 8000), timeout=5).close()
    finally:
        server.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = server.communicate(timeout=60)
    assert (server.returncode, out, err) == (0, "stopped\n", ""), (server.returncode, out, err[-3000:])


# ---- refusals, one line each --------------------------------------------------------------------------------------


def serve(capsys, *argv: str) -> tuple[int, list[str]]:
    from rlvr.cli import main

    capsys.readouterr()
    code = main(["serve", *argv])
    return code, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--env", "rlvr/Nope-v0"], "unknown environment 'rlvr/Nope-v0'"),
        (["--env", "rlvr/Arithmetic-v0", "--env-arg", "level=2"], "unexpected keyword argument(s) level"),
        (["--env", "rlvr/Agent-v0"], "rlvr/Agent-v0 is an agent environment"),
        (["--env", "rlvr/Arithmetic-v0", "--port", "70000"], "--port must be in 0..65535, got 70000"),
        (["--env", "rlvr/Arithmetic-v0", "--max-sessions", "0"], "--max-sessions must be at least 1"),
        (["--env", "rlvr/Arithmetic-v0", "--host", "nowhere.invalid"], "cannot listen on 'nowhere.invalid'"),
    ],
)
def test_a_bad_start_is_one_line_and_exit_code_2(capsys, argv, says):
    code, lines = serve(capsys, *argv)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rlvr serve: error: ") and says in lines[0], lines


def test_a_port_in_use_is_one_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, lines = serve(capsys, "--env", "rlvr/Arithmetic-v0", "--port", str(port))
    assert code == 2 and lines == [
        f"rlvr serve: error: cannot listen on 127.0.0.1:{port}: Address already in use: another program holds it "
        "(--port N, or --port 0 for a free one)"
    ]


def test_without_the_serve_extra_it_says_which_in_one_line(capsys, monkeypatch):
    import importlib.util

    from rlvr.envs.remote import RemoteEnv
    from rlvr.errors import MissingExtraError

    find_spec = importlib.util.find_spec
    hidden = lambda name, *rest: None if name == "openenv" else find_spec(name, *rest)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", hidden)
    needs = "needs the `serve` extra (openenv-core is not installed): pip install 'rlvr[serve]'"
    assert serve(capsys, "--env", "rlvr/Arithmetic-v0") == (2, [f"rlvr serve: error: rlvr serve {needs}"])
    with pytest.raises(MissingExtraError) as refused:
        RemoteEnv("http://127.0.0.1:8000")
    assert str(refused.value) == f"RemoteEnv {needs}"


def test_it_listens_on_the_host_it_is_given():
    from rlvr.envs.remote.server import bind, url_of

    shown = {
        "127.0.0.1": ("http://127.0.0.1:",),
        "0.0.0.0": ("http://0.0.0.0:",),
        "localhost": ("http://127.0.0.1:", "http://[::1]:"),
    }
    for host, urls in shown.items():
        sock = bind(host, 0)
        try:
            assert url_of(sock).startswith(urls), url_of(sock)
        finally:
            sock.close()


def test_the_default_host_is_localhost():
    from rlvr.cli import build_parser

    args = build_parser().parse_args(["serve", "--env", "rlvr/Arithmetic-v0"])
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    assert Path(args.func.__code__.co_filename).name == "serve.py"
