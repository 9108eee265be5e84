"""The sandbox image: a minimal Debian with full python3 and the runner, built locally without any
registry (debootstrap, then `docker import`), tagged by a hash of its recipe and reused.

The slow part, debootstrap (a minute or two), is cached as a tarball keyed by the Debian recipe
alone, so a change to the runner only re-composes and re-imports the image (seconds)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import docker
import docker.errors

from .errors import SandboxError

REPOSITORY = "rlvr-sandbox"
SANDBOX_UID = 10001  # the non-root user every program runs as (also in runner.py)
RUNNER_DIR = "opt/rlvr"  # runner.py (the entry point) and the modules it imports go here
RUNNER_FILES = ("runner.py", "runner_child.py", "runner_pidns.py", "runner_zygote.py")
_HERE = Path(__file__).resolve().parent
# What debootstrap builds. The mirror is left out of the hash: any mirror gives the same suite.
DEBIAN = {"suite": "bookworm", "variant": "minbase", "include": ["python3"]}
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Left out of the image: documentation and package caches (size), device nodes (Docker mounts /dev).
_DROP_PREFIXES = (
    "./usr/share/doc/",
    "./usr/share/man/",
    "./usr/share/info/",
    "./var/cache/apt/",
    "./var/lib/apt/lists/",
    "./dev/",
)


class ImageBuildError(SandboxError, RuntimeError):
    """The sandbox image is missing and cannot be built here (not root, no debootstrap, no mirror)."""


def cache_dir() -> Path:
    root = os.environ.get("RLVR_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "rlvr")
    return Path(root) / "sandbox"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def base_key() -> str:
    return _sha(json.dumps(DEBIAN, sort_keys=True).encode())[:16]


def runner_sources() -> dict[str, bytes]:
    """The runner's files as they go into the image: read once, so hash and content agree."""
    return {name: (_HERE / name).read_bytes() for name in RUNNER_FILES}


def recipe_hash(sources: dict[str, bytes] | None = None) -> str:
    """Covers everything that goes into the image: the Debian recipe, the runner and this builder."""
    sources = runner_sources() if sources is None else sources
    parts = [
        json.dumps(DEBIAN, sort_keys=True).encode(),
        str(SANDBOX_UID).encode(),
        Path(__file__).read_bytes(),
        *(sources[name] for name in RUNNER_FILES),
    ]
    return _sha(b"\0".join(parts))[:16]


def image_tag() -> str:
    return f"{REPOSITORY}:{recipe_hash()}"


def image_present(client: docker.DockerClient, tag: str | None = None) -> bool:
    try:
        client.images.get(tag or image_tag())
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_image(client: docker.DockerClient | None = None, *, force: bool = False, log=lambda message: None) -> str:
    """Return the tag of the sandbox image, building it first when it is missing (or `force`)."""
    client = client or docker.from_env(timeout=600)
    sources = runner_sources()
    version = recipe_hash(sources)
    tag = f"{REPOSITORY}:{version}"
    if not force and image_present(client, tag):
        return tag
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / "build.lock"):  # one builder at a time, across processes
        if not force and image_present(client, tag):
            return tag
        base = _base_tarball(cache, log)
        start = time.monotonic()
        with tempfile.NamedTemporaryFile(dir=cache, suffix=".tar") as out:
            _compose(base, out, sources)
            out.flush()
            log(f"importing {tag} ({os.path.getsize(out.name) >> 20} MiB)")
            client.api.import_image_from_file(
                out.name,
                repository=REPOSITORY,
                tag=version,
                changes=[f"LABEL rlvr.sandbox.recipe={version}", "ENV LANG=C.UTF-8"],
            )
        if not image_present(client, tag):
            raise ImageBuildError(f"docker import did not produce {tag}")
        log(f"built {tag} in {time.monotonic() - start:.1f}s (from cached rootfs {base.name})")
        for old in prune_images(client, keep=tag):
            log(f"removed the outdated image {old}")
    return tag


def prune_images(client: docker.DockerClient, keep: str) -> list[str]:
    """Remove other versions of the sandbox image that no container uses. Returns their tags."""
    removed = []
    for found in client.images.list(name=REPOSITORY):
        tags = [t for t in found.tags if t.startswith(REPOSITORY + ":")]
        if keep in found.tags or not tags:
            continue
        try:
            client.images.remove(found.id)  # refused while a container still uses it
            removed += tags
        except docker.errors.APIError:
            pass
    return removed


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_blocker(euid: int, debootstrap: str | None) -> str | None:
    """Why the root file system cannot be built here, or None."""
    if euid != 0:
        return (
            "building the sandbox image needs root for debootstrap: run "
            "`sudo rlvr sandbox build` once (the image is then reused)"
        )
    if debootstrap is None:
        return "debootstrap is not installed: `apt-get install -y debootstrap` (scripts/ensure_docker.sh does it)"
    return None


def _base_tarball(cache: Path, log) -> Path:
    """The debootstrapped root file system as a tarball, built once and cached."""
    path = cache / f"rootfs-{DEBIAN['suite']}-{base_key()}.tar"
    if path.exists():
        return path
    debootstrap = shutil.which("debootstrap") or next(
        (p for p in ("/usr/sbin/debootstrap", "/sbin/debootstrap") if os.path.exists(p)), None
    )
    problem = build_blocker(os.geteuid(), debootstrap)
    if problem:
        raise ImageBuildError(problem)
    mirror = os.environ.get("RLVR_DEBIAN_MIRROR", DEFAULT_MIRROR)
    work = Path(tempfile.mkdtemp(prefix="debootstrap-", dir=cache))
    try:
        root = work / "root"
        cmd = [
            debootstrap,
            f"--variant={DEBIAN['variant']}",
            f"--include={','.join(DEBIAN['include'])}",
            DEBIAN["suite"],
            str(root),
            mirror,
        ]
        log("running " + " ".join(cmd) + " (a minute or two)")
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr)[-2000:]
            raise ImageBuildError(f"debootstrap failed (exit {done.returncode}):\n{tail}")
        partial = work / "rootfs.tar"
        packed = subprocess.run(
            ["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."], capture_output=True, text=True
        )
        if packed.returncode != 0:
            raise ImageBuildError(f"packing the root file system failed: {packed.stderr[-1000:]}")
        os.replace(partial, path)  # atomic: a crash never leaves a half tarball in the cache
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return path


def _compose(base: Path, out, sources: dict[str, bytes]) -> None:
    """Copy the base tarball into `out`, adding the runner and the sandbox user, and removing every
    setuid/setgid bit (no program may gain privileges, even if no-new-privileges were missing)."""
    with tarfile.open(base, "r:") as src, tarfile.open(fileobj=out, mode="w:", format=tarfile.GNU_FORMAT) as dst:
        for member in src:
            name = member.name if member.name.startswith("./") else "./" + member.name.lstrip("/")
            if name.startswith(_DROP_PREFIXES):
                continue
            member.mode &= ~0o6000
            if name in ("./etc/passwd", "./etc/group"):
                text = src.extractfile(member).read().decode()
                line = (
                    f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/work:/usr/sbin/nologin\n"
                    if name.endswith("passwd")
                    else f"sandbox:x:{SANDBOX_UID}:\n"
                )
                _add_bytes(dst, name, (text + line).encode(), member.mode)
            elif member.isfile():
                dst.addfile(member, src.extractfile(member))
            else:
                dst.addfile(member)
        _add_dir(dst, "./opt/rlvr")
        _add_dir(dst, "./work", mode=0o1777)
        for name, data in sources.items():
            _add_bytes(dst, f"./{RUNNER_DIR}/{name}", data, 0o644)
        link = tarfile.TarInfo("./usr/bin/python")  # model-written commands often say `python`
        link.type, link.linkname, link.mtime = tarfile.SYMTYPE, "python3", int(time.time())
        dst.addfile(link)


def _add_bytes(dst: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, int(time.time())
    dst.addfile(info, io.BytesIO(data))


def _add_dir(dst: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, int(time.time())
    dst.addfile(info)
