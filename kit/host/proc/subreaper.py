"""The helper in front of a command whose CPU time the kit accounts for (:attr:`kit.host.proc.RunSpec.cpu_account`):
a child subreaper that runs the command as its child and waits for every process of its tree before it leaves.

Why: the kit reads a command's CPU time from ``wait4``'s rusage of its direct child, which holds that child's
own time and that of every descendant it (or a descendant) waited for.  bubblewrap with ``--unshare-pid`` breaks
that chain: its outer process returns the sandbox's exit status as soon as the namespace's init reports it (an
eventfd) and leaves without waiting for the init, so the init (and the runner it waited for) is reparented to
the system's init and its CPU time lost (measured: a command that burned 0.5 s of CPU in the sandbox showed
0.004 s).  As a subreaper this helper inherits the orphaned init, waits for it, and so its own rusage (what the
kit's ``wait4`` reads) holds the whole tree's.  It adds itself (a Python start-up, before the command's) and
nothing during the command: it sleeps in ``wait``.

The kit's launcher (:mod:`kit.host.proc.launch`) does the same in C, ~12 ms less per command (this Python
start); this helper runs where the launcher cannot be compiled.

Run as ``python -I -S <this file> <argv...>``: it exits as the command did (128 + N when a signal N killed it, as
bubblewrap and a shell report it).  Imports nothing of the kit.
"""

import ctypes
import os
import sys

#: prctl(2) options
PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG = 36, 1


def main(argv: list[str]) -> int:
    """Run ``argv`` as a child, wait for it and every orphan of its tree; its exit status (128 + N for signal N)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.stderr.write("mkb subreaper: prctl(PR_SET_CHILD_SUBREAPER) failed\n")
        return 126
    parent = os.getpid()
    try:
        child = os.fork()
    except OSError as e:
        sys.stderr.write(f"mkb subreaper: fork failed: {e}\n")
        return 126
    if child == 0:
        try:
            libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # SIGKILL when this helper dies, as the kit's own children
            if os.getppid() != parent:  # the helper died before prctl took effect
                os._exit(137)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    status = 127
    while True:
        try:
            pid, st = os.waitpid(-1, 0)
        except ChildProcessError:
            return status
        except InterruptedError:
            continue
        if pid == child:
            code = os.waitstatus_to_exitcode(st)
            status = code if code >= 0 else 128 - code


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: the kit's clock runs until this exit
