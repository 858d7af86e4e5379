"""Signals around a cluster's lifetime: SIGTERM tears down like Ctrl-C, and teardown
itself is not interrupted. Both act in the main thread only (elsewhere they do nothing).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType


def term_raises_exit() -> Callable[[], None]:
    """Turn SIGTERM into SystemExit, so ``with`` blocks still tear down; returns the
    function that restores the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, on_term)

    def restore() -> None:
        signal.signal(signal.SIGTERM, old)

    return restore


@contextlib.contextmanager
def ignored() -> Iterator[None]:
    """Ignore Ctrl-C and SIGTERM inside the block (a teardown must run to its end)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
