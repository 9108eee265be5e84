"""One warm, hardened sandbox container running the runner, and the settings every sandbox
container gets (also used by the benchmark's cold `docker run --rm`).

Rules, each because a program could otherwise turn its own verdict or a neighbour's into `error`
(the runner or the container dying is the sandbox's failure, never the program's, unless proved):
- Every writable file system is a tmpfs bounded in bytes *and in inodes* (`nr_inodes`), `/dev/shm`
  included (mounted here rather than by Docker's `shm_size`, which bounds bytes only). An empty
  directory costs no bytes but about a kilobyte of kernel memory, charged to the container and freed
  by no process's death: unbounded, a program filled the container's memory with them and the OOM
  killer could only take the runner. The container's memory limit has room for every tmpfs full,
  in bytes and in inodes (`Settings.memory_mb`).
- System V IPC, the other memory that outlives a program, is bounded by the IPC namespace's sysctls:
  a shared memory segment is removed when its last user goes (`kernel.shm_rmid_forced`), and few
  small message queues and semaphore sets may exist (`IPC_SYSCTLS`).
- OOM scores, by the kernel's rule: anyone may raise a process's `oom_score_adj`, but only a writer
  holding CAP_SYS_RESOURCE may lower it below the process's floor (`oom_score_adj_min`), and only
  such a writer sets that floor (to the value written); children inherit both. So the runner keeps
  CAP_SYS_RESOURCE (with SETUID, SETGID, KILL; programs hold no capability at all), puts itself at
  -1000 (never an OOM victim) and each program at 1000 with a floor of 1000 that the program cannot
  lower (runner_child.py). An engine that cannot grant CAP_SYS_RESOURCE (some hosts run Docker
  without it: starting the container then fails with "unable to apply caps") gets containers
  without it (`oom_floor=False`, found by the pool on its first start): there every process keeps
  the floor it inherited (the container's own score), a program can lower its 1000 back to the
  runner's score and an OOM may then take the runner; the sandbox then charges the run that killed
  its container to the program (docker_sandbox.py), so the verdict is still the program's.
- The system calls allowed are the sandbox's own seccomp profile (seccomp.py), whatever the
  engine's default.
- Each run gets a pid namespace of its own (runner_pidns.py), so no run learns from pids what an
  earlier one forked: the runner holds CAP_SYS_ADMIN for it (programs still hold no capability, and
  the seccomp profile lets through only the runner's exact namespace and mount calls), and the pids
  limit counts the run's pid 1. An engine that refuses it (an AppArmor profile that refuses mount,
  as Docker's default one does) gets runs that share the container's pid namespace, as before
  (`WarmContainer.own_pids` False).
- Each run's process is forked from the runner's zygote (runner_zygote.py), whose memory never held
  a request, so no program reads an earlier run's data in its own memory; the pids limit counts the
  zygote too."""

from __future__ import annotations

import time
from dataclasses import dataclass

import docker

from .channel import Channel, RunnerGone
from .owner import LABEL, OWNER_LABEL, POOL_LABEL, owner_token
from .seccomp import profile_json
from .types import Limits

RUNNER_COMMAND = ["python3", "/opt/rlvr/runner.py"]
STARTUP_TIMEOUT_S = 30.0
NO_CAP_ERRORS = ("unable to apply caps", "capset", "capabilit")  # runtimes that cannot grant a capability
INODE_KERNEL_BYTES = 2048  # kernel memory of one tmpfs inode and its dentry (about 1 KiB), with room to spare
# Per IPC namespace: shared memory dies with its last user; at most 16 message queues of 16 KiB and
# 16 semaphore sets of 32 (the defaults allow gigabytes of kernel memory that no process owns).
IPC_SYSCTLS = {
    "kernel.shm_rmid_forced": "1",
    "kernel.shmmni": "64",
    "kernel.msgmni": "16",
    "kernel.msgmnb": "16384",
    "kernel.sem": "32 512 32 16",
}


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
    work_mb: int = 64  # the tmpfs holding each run's working directory
    tmp_mb: int = 16  # /tmp (noexec)
    shm_mb: int = 16  # /dev/shm (noexec; multiprocessing needs it)
    runner_mb: int = 64  # headroom for the runner itself
    cpus: float = 1.0  # CPU share per container
    work_inodes: int = 8192  # files and directories each tmpfs may hold at once
    tmp_inodes: int = 1024
    shm_inodes: int = 1024

    def memory_mb(self, shape: Shape) -> int:
        # tmpfs pages and inodes are charged to the container, so the outer wall covers them too
        inodes = self.work_inodes + self.tmp_inodes + self.shm_inodes
        kernel_mb = -(-inodes * INODE_KERNEL_BYTES // (1 << 20))
        return shape.memory_mb + self.work_mb + self.tmp_mb + self.shm_mb + kernel_mb + self.runner_mb

    def tmpfs(self) -> dict[str, str]:
        def mount(options: str, mb: int, inodes: int) -> str:
            return f"rw,{options},nosuid,nodev,size={mb}m,nr_inodes={inodes},mode=1777"

        return {
            "/work": mount("exec", self.work_mb, self.work_inodes),
            "/tmp": mount("noexec", self.tmp_mb, self.tmp_inodes),
            "/dev/shm": mount("noexec", self.shm_mb, self.shm_inodes),
        }


def hardening(shape: Shape, settings: Settings, oom_floor: bool = False, own_pids: bool = False) -> dict:
    """Options for docker's create/run: valid for both `client.containers.run` and
    `client.api.create_host_config`. `oom_floor`: grant CAP_SYS_RESOURCE, for the runner to set
    OOM score floors; `own_pids`: CAP_SYS_ADMIN, for its pid namespace per run (see above). A
    container that runs no runner needs neither."""
    memory = f"{settings.memory_mb(shape)}m"
    caps = ["SETUID", "SETGID", "KILL"] + (["SYS_RESOURCE"] if oom_floor else []) + (["SYS_ADMIN"] if own_pids else [])
    return dict(
        network_mode="none",
        read_only=True,
        init=True,
        ipc_mode="private",
        cgroupns="private",
        tmpfs=settings.tmpfs(),
        sysctls=dict(IPC_SYSCTLS),
        cap_drop=["ALL"],
        cap_add=caps,  # the runner's; programs get none
        security_opt=["no-new-privileges", "seccomp=" + profile_json()],
        pids_limit=shape.pids + 4,  # the program's processes, plus init, the runner, its zygote and the run's pid 1
        mem_limit=memory,
        memswap_limit=memory,
        nano_cpus=int(settings.cpus * 1e9),
        log_config=docker.types.LogConfig(type="none"),  # program output never lands on disk
    )


class WarmContainer:
    """A started container whose runner has said it is ready."""

    def __init__(
        self,
        client: docker.DockerClient,
        image: str,
        shape: Shape,
        settings: Settings,
        pool_id: str = "",
        oom_floor: bool = True,
    ):
        self.client, self.shape = client, shape
        api = client.api
        host_config = api.create_host_config(auto_remove=True, **hardening(shape, settings, oom_floor, own_pids=True))
        # stdin_once: when this process dies its connection closes, the runner reads EOF and
        # exits, and Docker removes the container: no orphans even after a kill -9.
        created = api.create_container(
            image,
            command=RUNNER_COMMAND,
            stdin_open=True,
            detach=False,
            tty=False,
            user="0:0",
            working_dir="/work",
            hostname="sandbox",
            network_disabled=True,
            labels={LABEL: "1", OWNER_LABEL: owner_token(), POOL_LABEL: pool_id},
            host_config=host_config,
        )
        self.id = created["Id"]
        try:
            attached = api.attach_socket(self.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            self._keep = attached  # holds the HTTP response (and so the socket) open
            self.channel = Channel(getattr(attached, "_sock", attached))
            api.start(self.id)
            hello, _ = self.channel.recv(time.monotonic() + STARTUP_TIMEOUT_S)
            if "ready" not in hello:
                raise RunnerGone(f"unexpected greeting from the runner: {hello}")
        except BaseException:
            self.destroy()
            raise
        self.own_pids = bool(hello.get("own_pids"))  # each run in a pid namespace of its own
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
