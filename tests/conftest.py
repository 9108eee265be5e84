"""Shared fixtures. Real components only: a real Docker engine, real vLLM, real tiny models.
Where a component cannot run on this machine the test is skipped with the reason; under CI
(CI=true, where .ci/run has installed everything) a missing component is a failure instead."""
from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, reason: str) -> None:
    """Skip when a component is missing locally; fail under CI, where setup must provide it."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required component missing under CI: {reason}")
    pytest.skip(reason)


# The shipped default model (trainers/assets/tiny), per test module. Imports are deferred so
# that collecting tests which never touch a model stays light.
@pytest.fixture(scope="module")
def math_pool():
    """The math verifier's worker pool: started before a module's tests, shut down after them."""
    import verifiers.math as vm

    vm.warm_up()
    yield
    vm.shutdown()


@pytest.fixture(scope="module")
def model_dir():
    from trainers.models import resolve_model

    return resolve_model("tiny")


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from trainers.models import load_tokenizer

    return load_tokenizer(model_dir)


@pytest.fixture(scope="module")
def hf_model(model_dir):
    from trainers.models import load_causal_lm

    return load_causal_lm(model_dir)


def random_qwen2():
    """A tiny random-init Qwen2 (vocabulary 64, 2 layers, untied), seeded, in eval mode."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False)
    return Qwen2ForCausalLM(config).eval()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vllm_server(model_dir, log_path, *, name: str = "tiny", max_model_len: int = 256, start_timeout: float = 180):
    """A context manager serving `model_dir` with vLLM's OpenAI-compatible server on localhost;
    yields (base url, served name); stops the server's process group on exit. Skips (fails under
    CI) when vLLM is missing or the server does not come up within `start_timeout` seconds."""
    import contextlib
    import importlib.util
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    @contextlib.contextmanager
    def serve():
        require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
        port = free_port()
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
               "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--enforce-eager", "--max-model-len", str(max_model_len), "--no-enable-chunked-prefill"]
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
            tail = open(log_path, errors="replace").read()[-1500:]
            require(ready, f"vLLM server did not start in {start_timeout} s (exit {proc.poll()}): {tail}")
            yield url, name
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)

    return serve()
