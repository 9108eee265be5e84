#!/usr/bin/env bash
# Make sure a Docker engine answers and debootstrap is present (for `rlvr sandbox build`).
# Idempotent: installs docker.io and debootstrap with apt-get only when missing, starts dockerd in
# the background (log in $DOCKERD_LOG) only when `docker info` fails, then waits a bounded time.
# Meant for setup and CI on a fresh machine, as root.
set -euo pipefail

DOCKERD_LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
WAIT_S="${DOCKER_WAIT_S:-60}"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
command -v docker >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi

if docker info >/dev/null 2>&1; then
    echo "docker: engine already running" >&2
    exit 0
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "docker: starting dockerd (log: $DOCKERD_LOG)" >&2
    as_root mkdir -p "$(dirname "$DOCKERD_LOG")"
    as_root sh -c "nohup dockerd >>'$DOCKERD_LOG' 2>&1 &"
fi

for _ in $(seq "$WAIT_S"); do
    if docker info >/dev/null 2>&1; then
        echo "docker: engine ready" >&2
        exit 0
    fi
    sleep 1
done
echo "docker: the engine did not answer within ${WAIT_S}s; last lines of $DOCKERD_LOG:" >&2
as_root tail -n 20 "$DOCKERD_LOG" >&2 || true
exit 1
