"""What the Docker engine sees of a sandbox container: the processes in it, counted from the host.
A program sees only its own pid namespace (runner_pidns.py), so what an earlier run left behind is
checked from here."""

from __future__ import annotations

from rlvr.sandbox.check import leftovers

# A program's line that prints the id of the container it runs in (in the paths of the files
# Docker mounts into it, /etc/hostname and the like).
PRINT_CONTAINER = (
    "import re\nprint(re.search(r'/containers/([0-9a-f]{64})/', open('/proc/self/mountinfo').read()).group(1))\n"
)


def idle(container: str) -> bool:
    """Whether only the container's init and runner are left in it."""
    return not leftovers(container)
