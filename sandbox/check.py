"""The hostile suite: run each attack (hostile.py) in a one-container sandbox, check its status and
output, that the next run finds a clean container (replaced when it had to be, the same one when
not), and that the host is unharmed. Used by `rlvr sandbox check` and the tests."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import docker
import docker.errors

from .docker_sandbox import DockerSandbox
from .hostile import CASES, Case
from .owner import LABEL, POOL_LABEL
from .types import Limits, Result, Status

# Run after every case: what a fresh program sees. Prints the problems and the container identity:
# its id, in the paths of the files Docker mounts (/etc/hostname), else its root file system. The
# program sees only its own pid namespace (runner_pidns.py): the processes left anywhere else in the
# container are counted from the host (`leftovers`).
PROBE = """import json, os, re
me, parent = os.getpid(), os.getppid()
# in a shared pid namespace the parent is the runner's zygote, and the runner is its parent
runner = int(open(f"/proc/{parent}/stat").read().rpartition(")")[2].split()[1])
problems = []
others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me, parent, runner)]
if others:
    problems.append(f"processes left: {others}")
for path, allowed in (("/work", ["run"]), (".", ["probe.py"]), ("/tmp", []), ("/dev/shm", []),
                      ("/dev/mqueue", [])):
    names = sorted(os.listdir(path))
    if names != allowed:
        problems.append(f"{path} holds {names[:5]}")
for kind in ("shm", "msg", "sem"):
    if len(open(f"/proc/sysvipc/{kind}").readlines()) > 1:
        problems.append(f"System V {kind} objects left")
disk = os.statvfs("/work")
if disk.f_bavail < disk.f_blocks * 0.9:
    problems.append("the disk is not empty")
if os.getuid() == 0 or os.geteuid() == 0:
    problems.append("running as root")
mounts = open("/proc/self/mountinfo").read()
found = re.search(r"/containers/([0-9a-f]{64})/", mounts)
root = [line.split(" - ")[1] for line in mounts.splitlines() if line.split()[4] == "/"]
print(json.dumps({"problems": problems, "container": found.group(1) if found else root[0]}))
"""
DISK_SLACK = 1 << 30  # other work on the machine moves the host's free space too
DYING_S = 2.0  # for the last run's pid 1 to go (`leftovers`)
CONTAINER_ID = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Outcome:
    case: str
    expected: frozenset[Status]
    result: Result
    replaced: bool | None  # whether the next run found a new container (None: unknown)
    next_clean: bool  # whether the next run found nothing left behind
    problems: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.problems


def probe(box: DockerSandbox, limits: Limits) -> tuple[str | None, list[str]]:
    """(container identity, problems) as seen by a fresh program. Same memory and pids limits as
    the case, so it lands in the same container."""
    limits = dataclasses.replace(limits, timeout_s=10)
    result = box.run({"probe.py": PROBE}, ["python3", "probe.py"], limits=limits)
    if not result.ok:
        return None, [f"next run failed: {result.status} {result.detail} {result.stderr[-300:]}"]
    report = json.loads(result.stdout)
    problems = [f"next run: {p}" for p in report["problems"]]
    return report["container"], problems + leftovers(report["container"])


def leftovers(container: str) -> list[str]:
    """Live processes in an idle container beyond its init, its runner and the runner's zygote, as
    the engine lists them. The zygote's child gets DYING_S to go: the last run's pid 1, which the
    runner killed at the run's end and the zygote reaps (runner_pidns.Run.end), may still be exiting
    (tens of milliseconds on a loaded machine). Zombies are left out."""
    if not CONTAINER_ID.fullmatch(container):
        return []  # not a Docker container id: nothing to ask
    deadline = time.monotonic() + DYING_S
    while True:
        try:
            left, dying = _unexpected(container)
        except docker.errors.DockerException as exc:
            return [f"could not list the container's processes: {exc}"]
        if not dying or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    left += dying
    return [f"next run: processes left: {left}"] if left else []


def _unexpected(container: str) -> tuple[list[str], list[str]]:
    """(the command lines of live processes other than init, the runner, its zygote and the zygote's
    children; those of the zygote's children)."""
    client = docker.from_env(timeout=30)
    try:
        found = client.api.top(container, ps_args="-o pid,ppid,stat,args")["Processes"] or []
    finally:
        client.close()
    live = {int(pid): (int(ppid), args) for pid, ppid, stat, args in found if not stat.startswith("Z")}

    def oldest_child(parent: int) -> list[int]:
        return sorted(pid for pid, (ppid, _) in live.items() if ppid == parent)[:1]

    init = [pid for pid, (ppid, _) in live.items() if ppid not in live]
    runner = [pid for parent in init for pid in oldest_child(parent)]
    zygote = [pid for parent in runner for pid in oldest_child(parent)]
    expected = set(init + runner + zygote)
    dying = [args for pid, (ppid, args) in live.items() if ppid in zygote]
    left = [args for pid, (ppid, args) in live.items() if pid not in expected and ppid not in zygote]
    return left, dying


def run_case(box: DockerSandbox, case: Case) -> Outcome:
    if case.before is not None:
        box.run({"main.py": case.before}, ["python3", "main.py"], limits=case.limits)
    before, problems = probe(box, case.limits)
    disk = shutil.disk_usage("/").free
    result = box.run(case.files(), list(case.command), limits=case.limits)
    if result.status not in case.expect:
        problems.append(
            f"expected {'/'.join(sorted(case.expect))}, got {result.status}: {result.detail} {result.stderr[-300:]!r}"
        )
    if case.verify is not None and (problem := case.verify(result)):
        problems.append(problem)
    after, next_problems = probe(box, case.limits)
    problems += next_problems
    replaced = None if before is None or after is None else before != after
    if replaced is not None and replaced != case.replaced:
        problems.append(
            "container replaced without cause" if replaced else "container was reused but should have been replaced"
        )
    if shutil.disk_usage("/").free < disk - DISK_SLACK:
        problems.append("the host lost disk space")
    return Outcome(case.name, case.expect, result, replaced, not next_problems, tuple(problems))


def run_suite(
    cases: Iterable[Case] = CASES, *, image: str | None = None, on_outcome: Callable[[Outcome], None] = lambda o: None
) -> tuple[list[Outcome], list[str]]:
    """Every case in a fresh one-container sandbox. Returns the outcomes and host-level problems
    (engine down, containers left behind after close)."""
    outcomes = []
    with DockerSandbox(image=image, pool_size=1) as box:
        for case in cases:
            outcomes.append(run_case(box, case))
            on_outcome(outcomes[-1])
    return outcomes, host_problems(box.pool_id)


def host_problems(pool_id: str, wait_s: float = 15.0) -> list[str]:
    client = docker.from_env(timeout=30)
    try:
        client.ping()
    except Exception as exc:  # the engine itself must survive every attack
        return [f"the Docker engine no longer answers: {exc}"]
    deadline = time.monotonic() + wait_s  # Docker's auto-remove finishes asynchronously
    while True:
        mine = client.api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{POOL_LABEL}={pool_id}"]})
        if not mine or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return [f"{len(mine)} sandbox container(s) left after close"] if mine else []


def format_table(outcomes: list[Outcome]) -> str:
    rows = [("case", "expected", "got", "exit", "time", "container", "next run", "result")]
    for o in outcomes:
        r = o.result
        container = {None: "?", True: "replaced", False: "kept"}[o.replaced]
        rows.append(
            (
                o.case,
                "/".join(sorted(o.expected)),
                str(r.status),
                "-" if r.exit_code is None else str(r.exit_code),
                f"{r.wall_time:.2f}s",
                container,
                "clean" if o.next_clean else "DIRTY",
                "PASS" if o.passed else "FAIL",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for o in outcomes:
        lines += [f"  {o.case}: {p}" for p in o.problems]
    return "\n".join(lines)
