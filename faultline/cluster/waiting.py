"""Waiting for a real condition: poll it with a deadline, and say what never happened.

The one waiting loop of the harness: every wait for a process, a server, a broker or a
partition goes through :func:`wait_until` (or :func:`poll_until`, which raises), never
a fixed sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from faultline.errors import ClusterError


def wait_until(condition: Callable[[], bool], deadline: float) -> bool:
    """Poll ``condition`` until it is true (True) or ``time.monotonic()`` has passed
    ``deadline`` (False). It is called at least once, also with a deadline already past;
    the pause between calls grows from 5 ms to 250 ms, so a quick change is seen quickly
    and a slow one costs little."""
    delay = 0.005
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def poll_until(condition: Callable[[], bool], deadline: float, message: Callable[[], str]) -> None:
    """:func:`wait_until`, raising ``ClusterError(message())`` when the deadline passed."""
    if not wait_until(condition, deadline):
        raise ClusterError(message())
