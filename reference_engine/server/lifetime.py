"""The processes a server starts end with it.

A child of a server has two ways to outlive it, both seen: its parent is killed outright
(SIGKILL, an OOM kill) and never stops it, or the child inherited the parent's signal handlers
— uvicorn's, which only set a flag on a server object the child never runs — and so ignores
the SIGTERM meant to stop it. `die_with_parent` closes the first (Linux sends the child a signal
when its parent dies), `default_stop_signals` the second.
"""

from __future__ import annotations

import ctypes
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> None:
    """Ask Linux to send `sig` to this process when its parent dies (elsewhere: nothing)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig)


def default_stop_signals() -> None:
    """SIGTERM ends this process again, whatever handler it inherited; SIGINT (a terminal's
    Ctrl-C reaches the whole process group) is left to the parent, which stops its children."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
