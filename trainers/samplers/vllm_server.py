"""`serve`: vLLM's OpenAI-compatible server on localhost, for the `OpenAISampler`, a judge
(`verifiers.judge`), tests and benchmarks. The server runs in its own process group, stopped
(and killed if it lingers) when the block ends, so nothing is left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from rlvr.errors import RlvrError


class ServerError(RlvrError, RuntimeError):
    """The server did not come up (its log's tail is in the message)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(
    model_dir: str | os.PathLike,
    log_path: str | os.PathLike,
    *,
    name: str = "tiny",
    max_model_len: int = 256,
    extra_args: Sequence[str] = (),
    start_timeout: float = 180,
) -> Iterator[str]:
    """Serve `model_dir` as `name`; yields the base URL once `/v1/models` answers."""
    port = free_port()
    # one process (no engine core subprocess), a small KV cache: a test's or a benchmark's server
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        str(max_model_len),
        "--no-enable-chunked-prefill",  # vLLM-CPU cannot split seeded prefills (see VLLMSampler)
        *extra_args,
    ]
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline, ready = time.monotonic() + start_timeout, False
        while time.monotonic() < deadline and proc.poll() is None and not ready:
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as r:
                    ready = r.status == 200
            except OSError:
                time.sleep(1)
        if not ready:
            tail = Path(log_path).read_text(errors="replace")[-1500:]
            raise ServerError(f"vLLM server did not start in {start_timeout} s (exit {proc.poll()}): {tail}")
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
