"""One warm, hardened sandbox container running the runner, and the settings every sandbox
container gets (also used by the benchmark's cold `docker run --rm`)."""
from __future__ import annotations

import time
from dataclasses import dataclass

import docker

from .channel import Channel, RunnerGone
from .owner import LABEL, OWNER_LABEL, POOL_LABEL, owner_token
from .types import Limits

RUNNER_COMMAND = ["python3", "/opt/rlvr/runner.py"]
STARTUP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Shape:
    """The per-container cgroup limits; a run needs a container of its own shape."""
    memory_mb: int
    pids: int

    @classmethod
    def of(cls, limits: Limits) -> Shape:
        return cls(limits.memory_mb, limits.pids)


@dataclass(frozen=True)
class Settings:
    work_mb: int = 64    # the tmpfs holding each run's working directory
    tmp_mb: int = 16     # /tmp (noexec)
    shm_mb: int = 16     # /dev/shm (noexec; multiprocessing needs it)
    runner_mb: int = 64  # headroom for the runner itself
    cpus: float = 1.0    # CPU share per container

    def memory_mb(self, shape: Shape) -> int:
        # tmpfs pages are charged to the container, so the outer wall covers them too
        return shape.memory_mb + self.work_mb + self.tmp_mb + self.shm_mb + self.runner_mb


def hardening(shape: Shape, settings: Settings) -> dict:
    """Options for docker's create/run: valid for both `client.containers.run` and
    `client.api.create_host_config`."""
    memory = f"{settings.memory_mb(shape)}m"
    return dict(
        network_mode="none", read_only=True, init=True, ipc_mode="private", cgroupns="private",
        tmpfs={"/work": f"rw,exec,nosuid,nodev,size={settings.work_mb}m,mode=1777",
               "/tmp": f"rw,noexec,nosuid,nodev,size={settings.tmp_mb}m,mode=1777"},
        shm_size=f"{settings.shm_mb}m",
        cap_drop=["ALL"], cap_add=["SETUID", "SETGID", "KILL"],  # the runner's; programs get none
        security_opt=["no-new-privileges"],
        pids_limit=shape.pids + 2,  # the program's processes, plus init and the runner
        mem_limit=memory, memswap_limit=memory, nano_cpus=int(settings.cpus * 1e9),
        log_config=docker.types.LogConfig(type="none"),  # program output never lands on disk
    )


class WarmContainer:
    """A started container whose runner has said it is ready."""

    def __init__(self, client: docker.DockerClient, image: str, shape: Shape, settings: Settings,
                 pool_id: str = ""):
        self.client, self.shape = client, shape
        api = client.api
        host_config = api.create_host_config(auto_remove=True, **hardening(shape, settings))
        # stdin_once: when this process dies its connection closes, the runner reads EOF and
        # exits, and Docker removes the container: no orphans even after a kill -9.
        created = api.create_container(
            image, command=RUNNER_COMMAND, stdin_open=True, detach=False, tty=False, user="0:0",
            working_dir="/work", hostname="sandbox", network_disabled=True,
            labels={LABEL: "1", OWNER_LABEL: owner_token(), POOL_LABEL: pool_id}, host_config=host_config)
        self.id = created["Id"]
        try:
            attached = api.attach_socket(self.id, params={"stdin": 1, "stdout": 1, "stderr": 1,
                                                          "stream": 1})
            self._keep = attached  # holds the HTTP response (and so the socket) open
            self.channel = Channel(getattr(attached, "_sock", attached))
            api.start(self.id)
            hello, _ = self.channel.recv(time.monotonic() + STARTUP_TIMEOUT_S)
            if "ready" not in hello:
                raise RunnerGone(f"unexpected greeting from the runner: {hello}")
        except BaseException:
            self.destroy()
            raise
        self.runs = 0

    def call(self, header: dict, blobs: list[bytes], timeout_s: float) -> tuple[dict, bytes]:
        self.channel.send(header, blobs)
        reply = self.channel.recv(time.monotonic() + timeout_s)
        self.runs += 1
        return reply

    def dead(self) -> bool:
        return self.channel.readable()

    def destroy(self) -> None:
        """Close the connection (the runner then exits) and remove the container. Never raises."""
        channel = getattr(self, "channel", None)
        if channel is not None:
            channel.close()
        try:
            self.client.api.remove_container(self.id, force=True)
        except Exception:  # already gone, being removed by auto_remove, or the engine is down
            pass
