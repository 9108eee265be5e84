"""The host end of the runner protocol, over a container's attached stdin/stdout.

A frame is `!II` (header length, blob length), a JSON header, then the blob. Requests go raw to the
runner's stdin; replies come back inside Docker's multiplexed attach stream (8-byte headers naming
stdout or stderr), whose stderr part carries the runner's own diagnostics."""

from __future__ import annotations

import json
import socket
import struct
import time

FRAME = struct.Struct("!II")
DOCKER_FRAME = struct.Struct(">BxxxL")  # stream id (1 stdout, 2 stderr), payload size
DIAG_CAP = 8192


# These two stay plain: the pool and DockerSandbox.run catch them and answer `unavailable` (they never escape).
class RunnerGone(ConnectionError):
    """The runner or its container went away (the connection closed or broke)."""


class RunnerTimeout(TimeoutError):
    """The runner did not answer in time."""


class Channel:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._raw = bytearray()  # multiplexed bytes not yet split into frames
        self._out = bytearray()  # the runner's stdout: protocol frames
        self.diag = bytearray()  # the runner's stderr: diagnostics, last DIAG_CAP bytes

    def send(self, header: dict, blobs: list[bytes] | tuple[bytes, ...] = ()) -> None:
        head = json.dumps(header).encode()
        frame = FRAME.pack(len(head), sum(len(b) for b in blobs))
        try:
            self.sock.settimeout(30)
            self.sock.sendall(b"".join([frame, head, *blobs]))
        except TimeoutError as exc:
            raise RunnerTimeout("the runner does not read its requests") from exc
        except OSError as exc:
            raise RunnerGone(f"sending to the runner failed: {exc}{self._diag_note()}") from exc

    def recv(self, deadline: float) -> tuple[dict, bytes]:
        """One reply frame, waiting at most until `deadline` (time.monotonic())."""
        while len(self._out) < FRAME.size:
            self._fill(deadline)
        hlen, blen = FRAME.unpack_from(self._out)
        while len(self._out) < FRAME.size + hlen + blen:
            self._fill(deadline)
        end = FRAME.size + hlen
        header = json.loads(bytes(self._out[FRAME.size : end]))
        blob = bytes(self._out[end : end + blen])
        del self._out[: end + blen]
        return header, blob

    def readable(self) -> bool:
        """Whether anything (or EOF) is waiting: an idle runner never speaks, so it means death."""
        try:
            self.sock.settimeout(0)
            self.sock.recv(1, socket.MSG_PEEK)
            return True
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RunnerTimeout(f"no reply from the runner in time{self._diag_note()}")
        try:
            self.sock.settimeout(left)
            data = self.sock.recv(1 << 17)
        except TimeoutError as exc:
            raise RunnerTimeout(f"no reply from the runner in time{self._diag_note()}") from exc
        except OSError as exc:
            raise RunnerGone(f"connection to the runner broke: {exc}{self._diag_note()}") from exc
        if not data:
            raise RunnerGone(f"the runner's container stopped{self._diag_note()}")
        self._raw += data
        while len(self._raw) >= DOCKER_FRAME.size:
            stream, size = DOCKER_FRAME.unpack_from(self._raw)
            if len(self._raw) < DOCKER_FRAME.size + size:
                break
            payload = self._raw[DOCKER_FRAME.size : DOCKER_FRAME.size + size]
            if stream == 2:
                self.diag = (self.diag + payload)[-DIAG_CAP:]
            else:
                self._out += payload
            del self._raw[: DOCKER_FRAME.size + size]

    def _diag_note(self) -> str:
        text = self.diag.decode(errors="replace").strip()
        return f"; runner said: {text[-600:]}" if text else ""
