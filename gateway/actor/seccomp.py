"""The seccomp filter bwrap puts on every sandboxed job (``bwrap --seccomp``).

The sandbox's namespaces take the host's processes, files and network out
of a job's sight; they do not take kernel interfaces out of its reach. One
mattered most: a job of an actor running as root runs as an unprivileged
uid in namespaces bwrap made without a user namespace, and nothing stopped
it from making a user namespace of its own, where it holds every
capability, and from there mount, network and other namespaces: the kernel
code an unprivileged process is otherwise kept from, where many of the
local privilege escalations of recent years were found. (An unprivileged
actor's jobs had bwrap's ``--disable-userns``; a root actor's had nothing.)

So every job, whatever its actor's uid, runs under this filter:

- no new namespaces: ``unshare`` and ``setns`` fail with EPERM, ``clone``
  with a namespace flag too, and ``clone3`` (whose flags a filter cannot
  read) with ENOSYS, which makes the C library fall back to ``clone``, as
  Flatpak and Docker's default profile do;
- none of what no job needs and unprivileged processes are still allowed:
  the kernel keyrings (``add_key``, ``keyctl``, ``request_key``, which are
  not namespaced), ``io_uring`` (ENOSYS: a program falls back to plain
  I/O), ``bpf``, ``perf_event_open`` and ``userfaultfd``.

Everything else is allowed: the filter closes doors, it is not a whitelist
that an interpreter upgrade could trip over. A call of another architecture
than the actor's (a 32-bit or x32 syscall on x86-64) kills the job's
process. The program is built once per process with libseccomp (through
``pyseccomp``) and handed to each bwrap down a pipe of its own, since bwrap
reads it to the end (``sandbox.sandbox_pipes``).
"""

from __future__ import annotations

import errno
import functools
import tempfile

#: ``clone`` flags that make a namespace (linux/sched.h). CLONE_NEWTIME is
#: not among them: ``clone`` reads that bit as part of the exit signal, and
#: only ``unshare`` and ``clone3`` take it, both refused whole.
NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}

#: Refused outright with EPERM.
DENIED = ("unshare", "setns", "add_key", "keyctl", "request_key", "bpf", "perf_event_open",
          "userfaultfd")  # fmt: skip

#: Refused with ENOSYS ("not in this kernel"), which their callers fall back from.
ABSENT = ("clone3", "io_uring_setup", "io_uring_enter", "io_uring_register")


class FilterUnavailable(Exception):
    """libseccomp is not there to compile the filter (the message says what to install)."""


@functools.cache
def program() -> bytes:
    """The compiled filter (classic BPF, as ``bwrap --seccomp`` reads it), or
    FilterUnavailable. pyseccomp loads libseccomp when imported, so it is
    imported here: an actor with the sandbox off never needs it."""
    try:
        import pyseccomp as seccomp  # type: ignore[import-untyped]
    except (ImportError, RuntimeError, OSError) as exc:
        raise FilterUnavailable(
            f"libseccomp cannot be loaded ({exc}); install it (Debian: apt-get install libseccomp2)"
        ) from None
    try:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
        for name in DENIED:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
        for name in ABSENT:
            rules.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
        for flag in NAMESPACE_FLAGS.values():  # clone's flags: its first argument (x86-64, arm64)
            rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone",
                           seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))  # fmt: skip
        with tempfile.TemporaryFile() as out:
            rules.export_bpf(out)
            out.seek(0)
            return out.read()
    except (OSError, ValueError, RuntimeError) as exc:  # a libseccomp too old for clone3
        why = f"libseccomp cannot build the filter ({exc}): 2.5 or later is needed"
        raise FilterUnavailable(f"{why} (Debian 12: apt-get install libseccomp2)") from None
