"""`DockerSandbox`: run untrusted programs in hardened Docker containers from a warm pool.

Whose failure a lost container is: a run whose container dies under it (the runner's connection
closes) is retried once in another container. When that one dies too, the sandbox runs a trivial
program in a new container: if that works, the engine is fine and the program's run is what kills
its containers, so the run ends `killed` with `Result.killed_container` set (the program's fault,
scored like any crash); otherwise it is `unavailable` (the grader's failure). A runner that stops
answering, a garbled reply or a runner error stay `unavailable`: nothing a program can do makes a
runner hang or fail (runner.py keeps it out of the OOM killer's reach), the machine can."""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence

from .channel import RunnerGone, RunnerTimeout
from .container import Settings, Shape
from .pool import Pool, Unavailable
from .types import MAX_OUTPUT_BYTES, Limits, Result, Sandbox, Status, valid_text

MAX_STDIN_BYTES = 64 << 20
REPLY_GRACE_S = 15.0  # beyond the time limit: the runner's setup (5 s), killing (2 s) and cleanup (5 s), and some
ATTEMPTS = 2  # containers a run may take down before it is charged with them (a healthy engine given)
PROBE_LIMITS = Limits(timeout_s=5.0, output_bytes=1024)  # the trivial run that tells whether the engine is fine


class DockerSandbox:
    """Runs programs in a pool of `pool_size` warm containers (created on first use).

    Thread-safe: each `run` gets a container to itself. Use as a context manager, or `close()`;
    either removes its containers. Not picklable: hold None and call `sandbox.shared_sandbox()`."""

    def __init__(
        self,
        image: str | None = None,
        pool_size: int = 4,
        *,
        base_url: str | None = None,
        limits: Limits | None = None,
        settings: Settings | None = None,
        api_timeout_s: float = 30.0,
    ):
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self.limits = limits or Limits()
        self.settings = settings or Settings()
        self._pool = Pool(pool_size, image, base_url, self.settings, api_timeout_s)
        self._pid = os.getpid()
        self._finalizer = weakref.finalize(self, self._pool.close)  # also runs at exit

    def run(
        self,
        files: Mapping[str, str | bytes],
        command: Sequence[str],
        stdin: str | bytes = "",
        limits: Limits | None = None,
    ) -> Result:
        """Run `command` in a fresh working directory holding `files`. Never raises for sandbox
        trouble: an engine that is missing or dies gives `Status.UNAVAILABLE` with the reason."""
        if os.getpid() != self._pid:
            raise RuntimeError(
                "a DockerSandbox cannot be used from a forked process; call sandbox.shared_sandbox() there"
            )
        limits = limits or self.limits
        header, blobs = self._request(files, command, stdin, limits)
        start = time.monotonic()
        problem, lost = "", []
        for _ in range(ATTEMPTS):  # a container that died under us is replaced and the run retried
            try:
                container = self._pool.acquire(Shape.of(limits))
            except Unavailable as exc:
                return _unavailable(str(exc), start)
            try:
                reply, blob = container.call(header, blobs, limits.timeout_s + REPLY_GRACE_S)
            except RunnerGone as exc:
                self._pool.discard(container)
                lost.append(str(exc))
                problem = f"the sandbox container died during the run: {exc}"
                continue
            except RunnerTimeout as exc:
                self._pool.discard(container)
                return _unavailable(f"the sandbox runner stopped answering: {exc}", start)
            except Exception as exc:  # a garbled reply: never trust that container again
                self._pool.discard(container)
                return _unavailable(f"sandbox protocol error: {exc!r}", start)
            except BaseException:  # interrupted mid-run: the container's state is unknown
                self._pool.discard(container)
                raise
            dirty = reply.get("dirty") or []
            self._pool.release(container, replace=bool(dirty) or "error" in reply)
            if "error" in reply:
                problem = valid_text(f"the sandbox runner failed: {reply['error']}")
                continue
            return _result(reply, blob, dirty)
        if len(lost) == ATTEMPTS:
            trouble = self._probe(Shape.of(limits))
            if trouble is None:
                return Result(
                    status=Status.KILLED,
                    exit_code=None,
                    stdout="",
                    stderr="",
                    wall_time=time.monotonic() - start,
                    killed_container=True,
                    detail=valid_text(
                        f"the run killed its sandbox container {ATTEMPTS} times; a new container "
                        f"runs programs normally ({lost[-1][:80]})"
                    ),
                )
            problem = f"{problem}; then a trivial run failed too: {trouble}"
        return _unavailable(problem, start)

    def _probe(self, shape: Shape) -> str | None:
        """Whether the engine still runs programs (None) or what went wrong: `true` in a container of
        `shape` (a new one, as the run's were discarded, unless another is idle)."""
        limits = Limits(PROBE_LIMITS.timeout_s, shape.memory_mb, PROBE_LIMITS.output_bytes, shape.pids)
        header, blobs = self._request({}, ["true"], "", limits)
        try:
            container = self._pool.acquire(shape)
        except Unavailable as exc:
            return str(exc)
        try:
            reply, _ = container.call(header, blobs, limits.timeout_s + REPLY_GRACE_S)
        except BaseException as exc:
            self._pool.discard(container)
            if not isinstance(exc, Exception):
                raise
            return f"{type(exc).__name__}: {exc}"
        dirty = reply.get("dirty") or []
        self._pool.release(container, replace=bool(dirty) or "error" in reply)
        if "error" in reply or reply.get("status") != "ok" or reply.get("exit_code") != 0:
            return f"the runner answered {reply}"
        return None

    def _request(self, files, command, stdin, limits) -> tuple[dict, list[bytes]]:
        """Validate the inputs (typed errors for bad ones) and encode them for the runner."""
        if not isinstance(limits, Limits):
            raise TypeError(f"limits must be a sandbox.Limits, got {type(limits).__name__}")
        if limits.output_bytes > MAX_OUTPUT_BYTES:
            raise ValueError(f"output_bytes is capped at {MAX_OUTPUT_BYTES} ({MAX_OUTPUT_BYTES >> 20} MiB)")
        if isinstance(command, (str, bytes)) or not command or not all(isinstance(a, str) for a in command):
            raise TypeError("command must be a non-empty list of strings, e.g. ['python3', 'main.py']")
        if any("\0" in a for a in command):
            raise ValueError("command arguments cannot contain NUL bytes")
        for arg in command:
            _utf8(arg, "command argument")
        if not isinstance(files, Mapping):
            raise TypeError(f"files must be a mapping of name to content, got {type(files).__name__}")
        names, blobs = [], []
        for name, content in files.items():
            _check_name(name)
            data = _utf8(content, f"file {name!r}") if isinstance(content, str) else content
            if not isinstance(data, (bytes, bytearray)):
                raise TypeError(f"file {name!r}: content must be str or bytes")
            names.append([name, len(data)])
            blobs.append(bytes(data))
        if sum(len(b) for b in blobs) > (self.settings.work_mb << 20) // 2:
            raise ValueError(f"files exceed half of the {self.settings.work_mb} MiB sandbox disk")
        data = _utf8(stdin, "stdin") if isinstance(stdin, str) else stdin
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("stdin must be str or bytes")
        if len(data) > MAX_STDIN_BYTES:
            raise ValueError(f"stdin is larger than {MAX_STDIN_BYTES >> 20} MiB")
        header = {
            "command": list(command),
            "files": names,
            "limits": {
                "timeout_s": limits.timeout_s,
                "memory_mb": limits.memory_mb,
                "output_bytes": limits.output_bytes,
                "pids": limits.pids,
                "supervise": limits.supervise,
            },
        }
        return header, blobs + [bytes(data)]

    @property
    def pool_id(self) -> str:
        """Labels this sandbox's containers (`rlvr.sandbox.pool`), apart from other sandboxes'."""
        return self._pool.pool_id

    def close(self) -> None:
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __reduce__(self):
        raise TypeError(
            "DockerSandbox holds live containers and sockets and cannot be pickled; "
            "keep None in what you pickle and call sandbox.shared_sandbox() in the worker"
        )


def unavailable_reason(build: bool = True) -> str | None:
    """Why sandboxes cannot run here (no engine, no image), or None. Builds the image when it is
    missing and `build` is set. For tests that skip without Docker."""
    import docker

    from .image import ImageBuildError, ensure_image, image_present

    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # any failure to reach the engine means the same thing here
        return f"no Docker engine: {exc}"
    try:
        if build:
            ensure_image(client)
        elif not image_present(client):
            return "the sandbox image is not built (run `rlvr sandbox build`)"
    except (ImageBuildError, docker.errors.DockerException) as exc:
        return f"no sandbox image: {exc}"
    return None


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} is not valid UTF-8 text: {exc}") from None


def _check_name(name) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"file names must be non-empty strings, got {name!r}")
    _utf8(name, "file name")
    parts = name.split("/")
    if name.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\0" in name:
        raise ValueError(f"file name {name!r} must be a relative path without '.', '..' or '//'")


def _result(reply: dict, blob: bytes, dirty: list[str]) -> Result:
    out_len = reply["stdout"]
    detail = str(reply.get("detail") or "")
    if dirty:
        note = "container replaced: " + "; ".join(map(str, dirty))
        detail = f"{detail}; {note}" if detail else note
    return Result(
        status=Status(reply["status"]),
        exit_code=reply["exit_code"],
        stdout=blob[:out_len].decode("utf-8", "replace"),
        stderr=blob[out_len:].decode("utf-8", "replace"),
        wall_time=float(reply["wall_time"]),
        detail=valid_text(detail),
    )


def _unavailable(reason: str, start: float) -> Result:
    return Result(
        status=Status.UNAVAILABLE,
        exit_code=None,
        stdout="",
        stderr="",
        wall_time=time.monotonic() - start,
        detail=valid_text(reason),
    )


class _Shared:
    """The process-wide default sandbox: created on first use (or put in place by
    `use_shared_sandbox`), closed at exit, and forgotten in a forked child (which must make its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sandbox: Sandbox | None = None
        os.register_at_fork(after_in_child=self._forget)
        atexit.register(self.close)

    def get(self) -> Sandbox:
        with self._lock:
            if self._sandbox is None or self._sandbox.closed:
                self._sandbox = DockerSandbox()
            return self._sandbox

    def put(self, box: Sandbox | None) -> Sandbox | None:
        with self._lock:
            previous, self._sandbox = self._sandbox, box
            return previous

    def close(self) -> None:
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._sandbox = None


_SHARED = _Shared()


def shared_sandbox() -> Sandbox:
    """The process-wide default sandbox, so environments share one warm pool: a `DockerSandbox`
    made on first use, or what `use_shared_sandbox` put in place."""
    return _SHARED.get()


def use_shared_sandbox(box: Sandbox | None) -> Sandbox | None:
    """Make `shared_sandbox()` return `box` in this process (None: a `DockerSandbox` of its own again,
    made on next use); returns the one it held before (None if none yet), to restore it with.

    Meant for a dedicated worker process, e.g. a Ray rollout worker whose environments should
    verify on a `sandbox.RaySandbox` instead of starting containers of their own: environments and
    verifiers given no sandbox call `shared_sandbox()` at step time. The previous sandbox is not
    closed (the caller restores or closes it); `box` is closed at exit, like the default one, and
    once closed it is replaced by a new `DockerSandbox` on demand."""
    return _SHARED.put(box)
