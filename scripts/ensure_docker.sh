#!/usr/bin/env bash
# Make sure a Docker engine answers and debootstrap is present (for `rlvr sandbox build`).
# Idempotent: installs docker.io and debootstrap with apt-get only when missing, starts dockerd in
# the background (log in $DOCKERD_LOG) only when `docker info` fails, then waits a bounded time.
# Meant for setup and CI on a fresh machine, as root.
#
# What counts as present is the ENGINE (`dockerd`), not the client: a fresh machine of this kind has
# a `docker` client on PATH and no engine, and a client alone cannot run anything.
#
#   bash scripts/ensure_docker.sh          # install what is missing, start the engine, wait for it
#   bash scripts/ensure_docker.sh --plan   # only print the Debian packages it would install
set -euo pipefail

DOCKERD_LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
WAIT_S="${DOCKER_WAIT_S:-60}"

fail() { echo "docker: $*" >&2; exit 1; }
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
have() { command -v "$1" >/dev/null 2>&1; }

missing=()
# The engine decides; docker.io brings client, engine, containerd and runc together.
{ have dockerd && have docker; } || missing+=(docker.io)
have debootstrap || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)

if [ "${1:-}" = "--plan" ]; then
    echo "${missing[*]}"
    exit 0
fi

if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    as_root apt-get update -qq || fail "apt-get update failed; cannot install ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 \
        || fail "apt-get install ${missing[*]} failed"
fi
export PATH="$PATH:/usr/sbin:/usr/bin"
have dockerd || fail "no Docker engine (dockerd) after installing docker.io; PATH=$PATH"

if docker info >/dev/null 2>&1; then
    echo "docker: engine already running" >&2
    exit 0
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "docker: starting dockerd (log: $DOCKERD_LOG)" >&2
    as_root mkdir -p "$(dirname "$DOCKERD_LOG")"
    dockerd_bin=$(command -v dockerd)
    as_root sh -c "nohup '$dockerd_bin' >>'$DOCKERD_LOG' 2>&1 &"
fi

for _ in $(seq "$WAIT_S"); do
    if docker info >/dev/null 2>&1; then
        echo "docker: engine ready" >&2
        exit 0
    fi
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        echo "docker: dockerd exited at start; last lines of $DOCKERD_LOG:" >&2
        as_root tail -n 20 "$DOCKERD_LOG" >&2 || true
        exit 1
    fi
    sleep 1
done
echo "docker: the engine did not answer within ${WAIT_S}s; last lines of $DOCKERD_LOG:" >&2
as_root tail -n 20 "$DOCKERD_LOG" >&2 || true
exit 1
