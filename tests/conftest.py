"""Shared fixtures. Real components only: a real Docker engine, real vLLM, real tiny models.
Where a component cannot run on this machine the test is skipped with the reason; under CI
(CI=true, where .ci/run has installed everything) a missing component is a failure instead."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys

import pytest

# The environments that tests make by module name (`run_test_envs:test/...`, `ray_test_envs:test/...`, also in
# subprocesses and Ray workers, which get this folder on PYTHONPATH) live beside this file.
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# A shell's background job (`bash scripts/test.sh &`, nohup) starts with SIGINT ignored, and the runs the
# tests start inherit that: the Ctrl-C tests' runs would never see their SIGINT. Give the suite what a
# terminal's foreground job has, Python's own handler (a process started from here gets SIGINT's default).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config):
    config.addinivalue_line("markers", "ray: starts Ray itself (kept on one pytest-xdist worker, as below)")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """scripts/test.sh runs the suite on two pytest-xdist workers (`--dist loadgroup`). What one machine holds
    once runs on one worker, one test after another: Ray (a test counts the machine's raylets, and a second
    local cluster would double the processes) and the session's vLLM server (one start, ~35 s and ~2 GB)."""
    for item in items:
        if "ray_cluster" in item.fixturenames or item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif "tiny_server" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("tiny_server"))


def require(condition: bool, reason: str) -> None:
    """Skip when a component is missing locally; fail under CI, where setup must provide it."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required component missing under CI: {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def tmpfs(path, size: str, *options: str, skip: bool = True):
    """A fresh tmpfs of `size` mounted on `path` (e.g. "1m"; options such as "ro"). Mounting needs root or
    CAP_SYS_ADMIN: without it the test is skipped, or (`skip=False`) the block gets None instead of the path."""
    path.mkdir(parents=True, exist_ok=True)
    opts = ",".join([f"size={size}", *options])
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, text=True)
    if mounted.returncode:
        if skip:
            pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {mounted.stderr.strip()}")
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextlib.contextmanager
def read_only_dir(path):
    """A directory at `path` that nobody may write: a tmpfs mounted read-only as root (whom permission
    bits do not stop; EROFS for root too), else a directory without write bits."""
    if os.geteuid() == 0:
        with tmpfs(path, "64k", "ro"):
            yield path
        return
    path.mkdir()
    path.chmod(0o555)
    try:
        yield path
    finally:
        path.chmod(0o755)


def rlvr_here(capsys, *argv) -> subprocess.CompletedProcess:
    """`rlvr ARGV` run by the console script's entry point (`rlvr.cli.main`) in this process: its exit
    code and what it printed, without a new interpreter's imports (5-10 s a run). For tests whose
    subject is the run, not the process: a run that a signal ends, that exits at import, or whose
    numbers are compared with a process's stays a process. The torch thread count that `--threads`
    sets is put back, so that the tests after it run as they would have; an exception that escapes
    (the traceback a process would print) fails the test."""
    import torch

    from rlvr.cli import main

    capsys.readouterr()  # what came before is not this run's
    threads = torch.get_num_threads()
    try:
        code = main([str(a) for a in argv])
    finally:
        torch.set_num_threads(threads)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(argv), code, out, err)


def train_device() -> str:
    """The device the suite's training tests follow: "cuda" where torch sees a GPU, else "cpu" (what
    `--device auto` resolves to). Tests about the CPU say `device="cpu"`; tests that exercise the
    device take it from here (or the `train_device` fixture), build their models and heads on it and
    compare after `.cpu()`, so a GPU machine runs them on CUDA and this one on the CPU
    (tests/test_device_explicit.py checks that every training config states its device)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="session", name="train_device")
def train_device_fixture() -> str:
    """`train_device()`, as a fixture."""
    return train_device()


@pytest.fixture(scope="module")
def box():
    """The shared Docker sandbox (`sandbox.shared_sandbox()`), probed once per module: a test that
    needs it is skipped locally (failed under CI) when the engine or the image is missing."""
    from rlvr import sandbox
    from rlvr.sandbox.types import Limits, Status

    shared = sandbox.shared_sandbox()
    probe = shared.run(files={}, command=["python3", "-c", "print(1)"], stdin="", limits=Limits())
    require(probe.status is not Status.UNAVAILABLE, f"the Docker sandbox is unavailable: {probe.detail}")
    return shared


# The shipped default model (trainers/assets/tiny), per test module. Imports are deferred so
# that collecting tests which never touch a model stays light.
@pytest.fixture(scope="module")
def math_pool():
    """The math verifier's worker pool: started before a module's tests, shut down after them."""
    import rlvr.verifiers.math as vm

    vm.warm_up()
    yield
    vm.shutdown()


@pytest.fixture(scope="module")
def model_dir():
    from rlvr.trainers.models import resolve_model

    return resolve_model("tiny")


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from rlvr.trainers.models import load_tokenizer

    return load_tokenizer(model_dir)


@pytest.fixture(scope="module")
def hf_model(model_dir):
    from rlvr.trainers.models import load_causal_lm

    return load_causal_lm(model_dir)


def random_qwen2():
    """A tiny random-init Qwen2 (vocabulary 64, 2 layers, untied), seeded, in eval mode."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(config).eval()


def free_port() -> int:
    from rlvr.trainers.samplers.vllm_server import free_port as port

    return port()


@contextlib.contextmanager
def vllm_server(
    model_dir, log_path, *, name: str = "tiny", max_model_len: int = 256, start_timeout: float = 180, extra_args=()
):
    """vLLM's OpenAI-compatible server of `model_dir` on localhost (`trainers.samplers.vllm_server`);
    yields (base url, served name). Skips (fails under CI) when vLLM is missing or the server does
    not come up within `start_timeout` seconds."""
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    from rlvr.trainers.samplers.vllm_server import ServerError, serve

    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(
                serve(
                    model_dir,
                    log_path,
                    name=name,
                    max_model_len=max_model_len,
                    extra_args=extra_args,
                    start_timeout=start_timeout,
                )
            )
        except ServerError as exc:
            require(False, str(exc))
        yield url, name


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the whole test session (each start costs seconds): 2 CPUs, a
    capped object store, and tests/ on the workers' import path (for the test environments that
    rollout workers make by module name)."""
    require(importlib.util.find_spec("ray") is not None, "ray is not installed (pip install 'rlvr[ray]')")
    import ray

    path = os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")]))
    ray.init(
        num_cpus=2,
        object_store_memory=200 * 2**20,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false"}},
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def tiny_server(tmp_path_factory):
    """One vLLM OpenAI-compatible server of the tiny model (`vllm_server`) for the whole session, shared by the
    OpenAI sampler's tests and the judge's (a start is ~35 s here; idle between them, it holds ~2 GB and no
    CPU): (base url, served name). Context 1024 tokens, the judge's (its too-long prompt must fail); logprobs
    of the distribution sampled from (`processed_logprobs`), which the sampler's token-exact test compares."""
    from rlvr.trainers.models import resolve_model

    log = tmp_path_factory.mktemp("tiny_server") / "server.log"
    extra = ("--logprobs-mode", "processed_logprobs")
    with vllm_server(resolve_model("tiny"), log, max_model_len=1024, extra_args=extra) as served:
        yield served
