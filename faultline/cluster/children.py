"""How a child process the harness starts dies with it: ``prctl(PR_SET_PDEATHSIG)``, so a
run killed outright leaves none behind. The kernel sends the signal when the *thread*
that started the child ends, so a child that threads share and outlive
(:class:`~faultline.cluster.admin_child.AdminChild`'s) watches its parent process
instead."""

from __future__ import annotations

import ctypes
import signal

#: prctl(2): the signal the kernel sends this process when its parent dies.
_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: signal.Signals = signal.SIGKILL) -> None:
    """Have the kernel send ``sig`` to this process when the thread that started it ends;
    OSError if it refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
