"""Who owns a sandbox container, and reaping the containers of owners that are gone.

Every container carries `rlvr.sandbox=1` and an owner token: host name, boot id, pid and the
process start time (so a recycled pid is not mistaken for the owner). At start a sandbox removes
labelled containers whose owner on this host no longer runs; other live processes' containers and
other hosts' containers are left alone."""

from __future__ import annotations

import os
import socket

import docker
import docker.errors

LABEL = "rlvr.sandbox"
OWNER_LABEL = "rlvr.sandbox.owner"
POOL_LABEL = "rlvr.sandbox.pool"  # one pool: tells one sandbox's containers from another's


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return "unknown"


def process_start(pid: int) -> str | None:
    """The start time of a process in clock ticks since boot, or None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            tail = handle.read().rpartition(b")")[2].split()
        return tail[19].decode()
    except (OSError, IndexError):
        return None


def owner_token(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{_boot_id()}:{pid}:{process_start(pid)}"


def owner_alive(token: str) -> bool:
    parts = token.split(":")
    if len(parts) != 4 or not parts[2].isdigit():
        return False  # not a token we wrote: nobody can be using it
    host, boot, pid, start = parts
    if host != socket.gethostname():
        return True  # another machine's container: not ours to judge
    return boot == _boot_id() and process_start(int(pid)) == start


def reap_stale(client: docker.DockerClient) -> list[str]:
    """Remove labelled containers whose owner is gone. Returns their ids."""
    removed = []
    for info in client.api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        if owner_alive((info.get("Labels") or {}).get(OWNER_LABEL, "")):
            continue
        try:
            client.api.remove_container(info["Id"], force=True)
            removed.append(info["Id"])
        except docker.errors.APIError:  # already gone or being removed
            pass
    return removed
