"""A thread-safe pool of warm sandbox containers: one container per run, contaminated ones replaced
in the background before reuse, and an honest `Unavailable` (never a hang) when Docker is gone."""

from __future__ import annotations

import os
import threading
import time
import uuid

import docker
import docker.errors

from .channel import RunnerGone, RunnerTimeout
from .container import NO_CAP_ERRORS, Settings, Shape, WarmContainer
from .errors import SandboxError
from .image import ImageBuildError, ensure_image
from .owner import reap_stale

RETRY_AFTER_S = 1.0  # after a failure to reach Docker, answer `unavailable` at once for this long


class Unavailable(SandboxError):
    """The sandbox cannot run programs now; the message says why."""


class Pool:
    def __init__(self, size: int, image: str | None, base_url: str | None, settings: Settings, api_timeout_s: float):
        self.size, self.image, self.base_url, self.settings = size, image, base_url, settings
        self.api_timeout_s = api_timeout_s
        self._cond = threading.Condition()
        self._connect_lock = threading.Lock()
        self._idle: list[WarmContainer] = []
        self._all: set[WarmContainer] = set()
        self._removing: set[threading.Thread] = set()  # containers being destroyed
        self._refilling: set[threading.Thread] = set()  # replacements being created
        self._live = 0  # idle + in use + being created
        self._closed = False
        self._client: docker.DockerClient | None = None
        self._tag: str | None = None
        self._down_until, self._down_reason = 0.0, ""
        self._oom_floor = True  # False once the engine refused CAP_SYS_RESOURCE (container.py)
        self._pid = os.getpid()
        self.pool_id = uuid.uuid4().hex

    @property
    def where(self) -> str:
        return self.base_url or os.environ.get("DOCKER_HOST") or "the default Docker socket"

    def acquire(self, shape: Shape) -> WarmContainer:
        """An idle container of this shape, a new one, or (all busy) the next one released."""
        while True:
            with self._cond:
                if self._closed:
                    raise Unavailable("the sandbox is closed")
                found = next((c for c in self._idle if c.shape == shape), None)
                if found is not None:
                    self._idle.remove(found)
                elif self._live < self.size:
                    self._live += 1
                elif self._idle:  # only other shapes idle: swap one for a new one
                    self._retire(self._idle.pop(0))
                else:
                    self._cond.wait()
                    continue
            if found is None:
                return self._create_counted(shape)
            if not found.dead():
                return found
            self.discard(found)  # e.g. the engine restarted while it sat idle

    def release(self, container: WarmContainer, replace: bool = False) -> None:
        if replace:
            self._retire(container)
            thread = threading.Thread(target=self._refill, args=(container.shape,), daemon=True)
            with self._cond:  # started under the lock, so close() never joins an unstarted one
                self._refilling.add(thread)
                thread.start()
            return
        with self._cond:
            if not self._closed:
                self._idle.append(container)
                self._cond.notify()
                return
        self._retire(container)

    def discard(self, container: WarmContainer) -> None:
        """Drop a broken container without replacing it now."""
        self._retire(container)
        with self._cond:
            self._live -= 1
            self._cond.notify()

    def close(self) -> None:
        if os.getpid() != self._pid:
            return  # a forked child must not tear down its parent's containers
        with self._cond:
            self._closed = True
            refilling = list(self._refilling)
        for thread in refilling:  # a container half-created at exit would be left behind
            thread.join(timeout=60)
        with self._cond:
            doomed, self._idle = list(self._all), []
            self._all.clear()
            self._cond.notify_all()
        for container in doomed:
            self._retire(container)
        with self._cond:
            pending = list(self._removing)
        for thread in pending:
            thread.join(timeout=30)

    def _retire(self, container: WarmContainer) -> None:
        """Forget a container and destroy it in the background."""

        def destroy():
            container.destroy()
            with self._cond:
                self._removing.discard(thread)

        thread = threading.Thread(target=destroy, daemon=True)
        with self._cond:
            self._all.discard(container)
            self._removing.add(thread)
            thread.start()

    def _refill(self, shape: Shape) -> None:
        try:
            new = self._create(shape)
        except Unavailable:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            return
        finally:
            with self._cond:
                self._refilling.discard(threading.current_thread())
        self.release(new)

    def _create_counted(self, shape: Shape) -> WarmContainer:
        try:
            return self._create(shape)
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise

    def _create(self, shape: Shape) -> WarmContainer:
        with self._cond:
            if time.monotonic() < self._down_until:
                raise Unavailable(self._down_reason)
        try:
            client, tag = self._connect()
            container = self._start(client, tag, shape)
        except ImageBuildError as exc:
            raise self._down(f"sandbox image unavailable: {exc}") from exc
        except docker.errors.ImageNotFound as exc:
            missing, self._tag = self._tag, None  # removed under us: ensure (build) it again next time
            raise self._down(f"sandbox image {missing} not found: {exc}") from exc
        except (docker.errors.DockerException, OSError, RunnerGone, RunnerTimeout) as exc:
            raise self._down(f"Docker engine unreachable or failing at {self.where}: {exc}") from exc
        except Exception as exc:  # whatever it is, a run must get `unavailable`, not a crash
            raise self._down(f"could not start a sandbox container: {exc!r}") from exc
        with self._cond:
            if not self._closed:
                self._all.add(container)
                return container
        container.destroy()
        raise Unavailable("the sandbox is closed")

    def _start(self, client: docker.DockerClient, tag: str, shape: Shape) -> WarmContainer:
        floor = self._oom_floor
        try:
            return WarmContainer(client, tag, shape, self.settings, self.pool_id, floor)
        except docker.errors.APIError as exc:
            if not floor or not any(text in str(exc) for text in NO_CAP_ERRORS):
                raise
        self._oom_floor = False  # this engine cannot grant CAP_SYS_RESOURCE: containers without OOM floors
        return WarmContainer(client, tag, shape, self.settings, self.pool_id, False)

    def _down(self, reason: str) -> Unavailable:
        with self._cond:
            self._down_until, self._down_reason = time.monotonic() + RETRY_AFTER_S, reason
        return Unavailable(reason)

    def _connect(self) -> tuple[docker.DockerClient, str]:
        with self._connect_lock:
            if self._client is None:
                kwargs = {"timeout": int(self.api_timeout_s)}
                client = (
                    docker.DockerClient(base_url=self.base_url, **kwargs)
                    if self.base_url
                    else docker.from_env(**kwargs)
                )
                reap_stale(client)  # containers of crashed owners
                self._client = client
            if self._tag is None:
                self._tag = self.image or ensure_image(self._client)
            return self._client, self._tag
