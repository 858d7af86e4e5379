"""The one waiting loop: true as soon as the condition holds, false once the deadline passed,
and the condition always asked at least once."""

from __future__ import annotations

import time

import pytest

from faultline.cluster.waiting import poll_until, wait_until
from faultline.errors import ClusterError


def test_it_returns_as_soon_as_the_condition_holds() -> None:
    calls: list[float] = []

    def third_time() -> bool:
        calls.append(time.monotonic())
        return len(calls) == 3

    assert wait_until(third_time, time.monotonic() + 10) is True
    assert len(calls) == 3


def test_a_past_deadline_still_asks_once() -> None:
    calls: list[int] = []
    assert wait_until(lambda: bool(calls.append(1)), time.monotonic() - 1) is False
    assert calls == [1]
    assert wait_until(lambda: True, time.monotonic() - 1) is True


def test_it_gives_up_after_the_deadline() -> None:
    calls: list[int] = []
    deadline = time.monotonic() + 0.3
    assert wait_until(lambda: bool(calls.append(1)), deadline) is False
    assert time.monotonic() >= deadline and len(calls) >= 2


def test_poll_until_says_what_never_happened() -> None:
    with pytest.raises(ClusterError, match="node 3 never came back"):
        poll_until(lambda: False, time.monotonic() + 0.05, lambda: "node 3 never came back")
