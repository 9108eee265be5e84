"""The sandbox's own seccomp profile: the system calls a sandbox container may make, every other one
refused with EPERM.

Docker applies its default profile to every container unless told otherwise, but which calls that
refuses depends on the engine's version: Docker 20.10 (still common) lets programs set up io_uring,
whose rings run work in kernel threads outside the program's limits and have been a steady source of
kernel exploits; Docker 25 and later refuse it. So the sandbox no longer relies on the engine: it
passes this profile with every container (`security_opt=["seccomp=<this JSON>"]`, see
`container.hardening`), and every engine applies the same rules.

Rules (an allowlist: a system call nobody listed, including any the kernel adds later, is refused):
- What a program may call is what recent Docker default profiles allow a container without extra
  capabilities (the sandbox's programs have none), for the 64-bit native architectures only:
  32-bit and x32 entry points (`int 0x80`, `socketcall`, which bypasses the socket family rule) are
  refused altogether, as no program of the sandbox needs them.
- Refused like there: io_uring, keyrings (`keyctl`, `add_key`, `request_key`), `bpf`,
  `perf_event_open`, `userfaultfd`, namespaces (`unshare`, `setns`, `clone` with a namespace flag),
  mounting (`mount`, `umount2`, `pivot_root`, the new mount API), `chroot`, modules, `kexec_*`,
  `reboot`, `swapon`, `acct`, `quotactl`, clock setting, `open_by_handle_at`, NUMA placement
  (`mbind`, `set_mempolicy`, ...), `syslog`, `vhangup`, sockets of the AF_ALG and AF_VSOCK
  families, and `personality` other than the harmless values.
- Refused here beyond Docker's default, because a program never needs them and each widens what a
  program reaches: `ptrace`, `process_vm_readv`, `process_vm_writev` (a process must not read or
  steer another one of the same user, e.g. the test harness judging it), Linux AIO (`io_setup`,
  `io_submit`, ...: its contexts are counted machine-wide, so one program could deny them to the
  host), `modify_ldt`, `name_to_handle_at`, `fanotify_mark`.
- `clone3` answers ENOSYS, not EPERM: its flags cannot be inspected by seccomp, and ENOSYS makes
  glibc fall back to `clone`, whose flags are (namespace flags refused).
- One exception, for the runner's pid namespace per run (runner_pidns.py): `unshare` with exactly
  CLONE_NEWPID or exactly CLONE_NEWNS, `setns` into a pid namespace, and `mount` with exactly the
  flags the runner uses. They need CAP_SYS_ADMIN, which only the runner holds (container.py): for a
  program, which holds no capability, the kernel refuses them with EPERM all the same.
  CLONE_NEWUSER, which needs no capability, is never let through, nor any other flag or mount.
"""

from __future__ import annotations

import errno
import json

# Namespace flags of clone(2): CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 0x1000, 0x4000, 0x40000
# The runner's namespace calls (runner_pidns.py: its UNSHARE_FLAGS and MOUNT_FLAGS, checked equal by
# the tests): making the mounts private, a /proc, a bind mount, an empty read-only tmpfs.
RUNNER_UNSHARE = (CLONE_NEWPID, CLONE_NEWNS)
RUNNER_SETNS = CLONE_NEWPID
RUNNER_MOUNTS = (
    MS_REC | MS_PRIVATE,
    MS_NOSUID | MS_NODEV | MS_NOEXEC,
    MS_BIND,
    MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
)
AF_ALG, AF_VSOCK = 38, 40
# personality(2) values a program may set: PER_LINUX, its UNAME26 and ADDR_NO_RANDOMIZE variants,
# and the query 0xffffffff.
PERSONALITIES = (0x0, 0x0008, 0x20000, 0x20008, 0xFFFFFFFF)

FILES = (
    "access",
    "faccessat",
    "faccessat2",
    "open",
    "openat",
    "openat2",
    "creat",
    "close",
    "close_range",
    "read",
    "readv",
    "pread64",
    "preadv",
    "preadv2",
    "write",
    "writev",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "lseek",
    "readahead",
    "fadvise64",
    "fallocate",
    "ftruncate",
    "truncate",
    "fsync",
    "fdatasync",
    "sync",
    "syncfs",
    "sync_file_range",
    "copy_file_range",
    "sendfile",
    "splice",
    "tee",
    "vmsplice",
    "stat",
    "lstat",
    "fstat",
    "newfstatat",
    "statx",
    "statfs",
    "fstatfs",
    "cachestat",
    "statmount",
    "listmount",
    "getdents",
    "getdents64",
    "getcwd",
    "chdir",
    "fchdir",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "rmdir",
    "unlink",
    "unlinkat",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "readlink",
    "readlinkat",
    "rename",
    "renameat",
    "renameat2",
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "fchownat",
    "lchown",
    "umask",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "flock",
    "fcntl",
    "dup",
    "dup2",
    "dup3",
    "ioctl",
    "getxattr",
    "lgetxattr",
    "fgetxattr",
    "getxattrat",
    "listxattr",
    "llistxattr",
    "flistxattr",
    "listxattrat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "setxattrat",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "removexattrat",
    "inotify_init",
    "inotify_init1",
    "inotify_add_watch",
    "inotify_rm_watch",
)
MEMORY = (
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "mincore",
    "msync",
    "mlock",
    "mlock2",
    "mlockall",
    "munlock",
    "munlockall",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "remap_file_pages",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "map_shadow_stack",
    "mseal",
    "process_mrelease",
)
PROCESSES = (
    "fork",
    "vfork",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "wait4",
    "waitid",
    "kill",
    "tkill",
    "tgkill",
    "pidfd_open",
    "pidfd_send_signal",
    "getpid",
    "getppid",
    "gettid",
    "getpgid",
    "getpgrp",
    "getsid",
    "setpgid",
    "setsid",
    "prctl",
    "set_tid_address",
    "set_robust_list",
    "get_robust_list",
    "rseq",
    "seccomp",
    "capget",
    "capset",
    "getrlimit",
    "setrlimit",
    "prlimit64",
    "getrusage",
    "getpriority",
    "setpriority",
    "ioprio_get",
    "ioprio_set",
    "sched_getaffinity",
    "sched_setaffinity",
    "sched_getattr",
    "sched_setattr",
    "sched_getparam",
    "sched_setparam",
    "sched_getscheduler",
    "sched_setscheduler",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_rr_get_interval",
    "sched_yield",
    "getcpu",
    "uname",
    "sysinfo",
    "times",
    "getrandom",
    "uretprobe",
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
)
CREDENTIALS = (  # the runner drops to the sandbox user with these; the program can only query
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getresuid",
    "getresgid",
    "getgroups",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setfsuid",
    "setfsgid",
    "setgroups",
)
SIGNALS_AND_TIME = (
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "rt_sigpending",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "pause",
    "alarm",
    "getitimer",
    "setitimer",
    "restart_syscall",
    "clock_gettime",
    "clock_getres",
    "clock_nanosleep",
    "nanosleep",
    "gettimeofday",
    "time",
    "adjtimex",
    "clock_adjtime",
    "timer_create",
    "timer_delete",
    "timer_settime",
    "timer_gettime",
    "timer_getoverrun",
    "timerfd_create",
    "timerfd_settime",
    "timerfd_gettime",
    "futex",
    "futex_waitv",
    "futex_wake",
    "futex_wait",
    "futex_requeue",
)
POLLING = (
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "eventfd",
    "eventfd2",
    "pipe",
    "pipe2",
)
SOCKETS = (  # socket(2) itself has a rule of its own (families); the network is off anyway
    "socketpair",
    "bind",
    "listen",
    "accept",
    "accept4",
    "connect",
    "getsockname",
    "getpeername",
    "getsockopt",
    "setsockopt",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "sendmmsg",
    "recvmmsg",
    "shutdown",
)
IPC = (  # bounded per container by the IPC sysctls in container.py
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
)
X86_64_ONLY = ("arch_prctl",)  # glibc sets up thread-local storage with it
ALLOWED = FILES + MEMORY + PROCESSES + CREDENTIALS + SIGNALS_AND_TIME + POLLING + SOCKETS + IPC + X86_64_ONLY
# Named here only so that tests and docs can say what is refused (the profile refuses all unlisted;
# unshare, setns and mount but for the runner's exact arguments above).
REFUSED = (
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "open_tree",
    "move_mount",
    "mount_setattr",
    "chroot",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "settimeofday",
    "clock_settime",
    "open_by_handle_at",
    "name_to_handle_at",
    "mbind",
    "set_mempolicy",
    "get_mempolicy",
    "migrate_pages",
    "move_pages",
    "syslog",
    "vhangup",
    "iopl",
    "ioperm",
    "lookup_dcookie",
    "fanotify_init",
    "fanotify_mark",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "process_madvise",
    "io_setup",
    "io_submit",
    "io_getevents",
    "io_pgetevents",
    "io_destroy",
    "io_cancel",
    "modify_ldt",
    "sethostname",
    "setdomainname",
    "uselib",
)


def _rule(names, action="SCMP_ACT_ALLOW", args=None, errno_ret=None) -> dict:
    rule: dict = {"names": list(names), "action": action}
    if args:
        rule["args"] = args
    if errno_ret is not None:
        rule["errnoRet"] = errno_ret
    return rule


def _arg(index: int, op: str, value: int, value_two: int = 0) -> dict:
    return {"index": index, "value": value, "valueTwo": value_two, "op": op}


def profile() -> dict:
    """The profile as Docker reads it (the engine picks the entry of `archMap` for its machine)."""
    syscalls = [
        _rule(ALLOWED),
        _rule(["clone"], args=[_arg(0, "SCMP_CMP_MASKED_EQ", CLONE_NAMESPACES, 0)]),
        _rule(["clone3"], "SCMP_ACT_ERRNO", errno_ret=errno.ENOSYS),
        *(_rule(["unshare"], args=[_arg(0, "SCMP_CMP_EQ", flags)]) for flags in RUNNER_UNSHARE),
        _rule(["setns"], args=[_arg(1, "SCMP_CMP_EQ", RUNNER_SETNS)]),
        *(_rule(["mount"], args=[_arg(3, "SCMP_CMP_EQ", flags)]) for flags in RUNNER_MOUNTS),
        _rule(["socket"], args=[_arg(0, "SCMP_CMP_LT", AF_ALG)]),
        _rule(["socket"], args=[_arg(0, "SCMP_CMP_EQ", AF_ALG + 1)]),
        _rule(["socket"], args=[_arg(0, "SCMP_CMP_GT", AF_VSOCK)]),
        *(_rule(["personality"], args=[_arg(0, "SCMP_CMP_EQ", value)]) for value in PERSONALITIES),
    ]
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": errno.EPERM,
        "archMap": [
            {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": []},
            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": []},
        ],
        "syscalls": syscalls,
    }


def profile_json() -> str:
    """The profile as the text Docker's `seccomp=` security option takes."""
    return json.dumps(profile(), separators=(",", ":"))
