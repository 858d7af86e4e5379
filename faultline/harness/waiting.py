"""Waiting for a real condition: poll it with a deadline, and say what never happened."""

from __future__ import annotations

import time
from collections.abc import Callable

from faultline.errors import ClusterError


def poll_until(condition: Callable[[], bool], deadline: float, message: Callable[[], str]) -> None:
    """Poll ``condition`` every 50-250 ms until it is true, or raise ``ClusterError(message())``
    once ``time.monotonic()`` has passed ``deadline``. ``condition`` is called at least
    once, also with a deadline already past."""
    delay = 0.05
    while True:
        if condition():
            return
        if time.monotonic() >= deadline:
            raise ClusterError(message())
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)
