"""The zygote: the process every program is forked from, so that no program finds an earlier run's
data in its own memory (issue #40).

A forked process starts with a copy of its parent's memory, freed buffers included: forked from the
runner, a program could read (/proc/self/mem, or ctypes over its own mappings) what the runner held
for earlier runs in the same warm container: their files, their stdin (a harness's held-out inputs),
their output, the requests' headers. So the runner forks the zygote once, at start, before it reads
any request, and asks it for each run's child; the zygote's memory never holds a request:
- the runner sends it a fixed one-byte message and the run's descriptors (SCM_RIGHTS): the
  program's stdin, stdout, stderr and report pipes, a memfd holding the request (command, files,
  limits: read by the child itself, in runner_child.py) and, with a pid namespace per run, pid 1's
  report pipe (runner_pidns.py); stdin stays fed by the runner through its pipe, as before;
- the zygote forks (runner_pidns.fork where each run gets its own pid namespace, else os.fork),
  answers with the child's pid and a pidfd of it (the runner polls and signals it; only the parent
  could reap it), reaps it, and then sends its wait status: the program's, where the child is the
  program; where it is the run's pid 1, that one relays the program's own and the zygote's says only
  how pid 1 ended. One child at a time: the runner asks for the next once it has the last one's status.

Out of the program's reach (it runs as another user, with no capability): the zygote's real and
saved uid are ZYGOTE_UID, its effective uid root's (it keeps the runner's capabilities for the
children it forks, which take root's identity back at once). So no program can signal it or read
its memory (/proc/<pid>/mem and ptrace need the same uids and the seccomp profile refuses ptrace and
process_vm_readv anyway), and the runner's sweep, whose kill(-1) runs with a program user's uid as its
effective one (runner.py), does not reach it either.

If the zygote dies, the runner's next call to it fails (a closed socket, never a hang): the runner
answers that request with an error, and the host replaces the container.

Standard library only: this runs on the image's python3."""

import os
import socket
import struct

ZYGOTE_UID = 10003  # nobody else's: the zygote's real and saved uid
ASK = b"F"  # the runner's only message: fork one child holding these descriptors
REPORT = struct.Struct("!ii")  # (pid, 0) with a pidfd once forked, (0, errno) if not; (pid, wait status) once reaped
MAX_FDS = 8
REAP_S = 5.0  # for the last child to be reaped (a killed pid 1 goes in well under a millisecond)


class ZygoteGone(OSError):
    """The zygote died or broke the protocol: the runner answers with an error and is replaced."""


class Zygote:
    """The runner's end: forks the zygote now (`start(fds)` is what its children run: it never returns)."""

    def __init__(self, fork, start, close=()):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # one message a send
        self.pid = os.fork()
        if self.pid == 0:
            try:
                ours.close()
                for fd in close:  # the runner's channel to the host: none of the zygote's business
                    os.close(fd)
                os.setresuid(ZYGOTE_UID, 0, ZYGOTE_UID)  # root's capabilities; kill(-1) as a program user misses it
                serve(theirs, fork, start)
            finally:
                os._exit(1)
        theirs.close()
        self.sock, self.waiting, self.last = ours, None, None

    def spawn(self, fds):
        """A new child of the zygote, holding `fds`: (its pid, a pidfd of it)."""
        if self.waiting is not None and self.status(REAP_S) is None:
            raise ZygoteGone(f"the last run's process {self.waiting} is still there after {REAP_S}s")
        socket.send_fds(self.sock, [ASK], fds)
        data, pidfds, _, _ = socket.recv_fds(self.sock, REPORT.size, 1)
        pid, err = self._unpack(data)
        if pid == 0:
            raise OSError(err, f"the zygote could not fork: {os.strerror(err)}")
        if len(pidfds) != 1:
            raise ZygoteGone(f"the zygote sent {len(pidfds)} pidfds")
        self.waiting = pid
        return pid, pidfds[0]

    def status(self, timeout=None):
        """The last child's wait status once the zygote has reaped it; None if `timeout` seconds
        pass first (None: wait for it)."""
        if self.waiting is None:
            return self.last
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(REPORT.size)
        except TimeoutError:
            return None
        finally:
            self.sock.settimeout(None)
        pid, status = self._unpack(data)
        if pid != self.waiting:
            raise ZygoteGone(f"the zygote reported {pid}, not {self.waiting}")
        self.waiting, self.last = None, status
        return status

    @staticmethod
    def _unpack(data):
        if len(data) != REPORT.size:
            raise ZygoteGone("the zygote is gone" if not data else f"a garbled report from the zygote: {data!r}")
        return REPORT.unpack(data)


def serve(sock, fork, start):
    """The zygote's loop: one child per message, reaped before the next message is read."""
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, len(ASK), MAX_FDS)
        if not msg:
            return  # the runner is gone
        if msg != ASK:
            raise ZygoteGone(f"unexpected message {msg!r}")
        try:
            pid = fork()
        except OSError as exc:
            sock.send(REPORT.pack(0, exc.errno or 5))  # EIO when the error has no number
            pid = None
        if pid == 0:
            try:
                sock.close()
                os.setresuid(0, 0, 0)  # root again: the child's setup works as the runner's own did
                start(fds)
            finally:
                os._exit(125)
        for fd in fds:
            os.close(fd)
        if pid is None:
            continue
        pidfd = os.pidfd_open(pid)
        socket.send_fds(sock, [REPORT.pack(pid, 0)], [pidfd])
        os.close(pidfd)
        sock.send(REPORT.pack(pid, os.waitpid(pid, 0)[1]))
