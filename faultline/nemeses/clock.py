"""clock / reset-clock: a broker's wall clock set apart from the true time, later set true
again (:mod:`faultline.cluster.host.clocks` says how; docs/design.md, "Clock faults", what
it touches in Kafka).

Kinds, drawn from ``pick``:

==========  ================================================================
kind        value
==========  ================================================================
bump        ``offset_s``: -300, -60, -10, 10, 60 or 300 s, held until the heal
strobe      ``offset_s``: 5, 30 or 120 s, taken and dropped every
            ``period_s`` (2 s) until the heal, or for ``for_s`` seconds (a
            targeted strobe), after which the clock is true again
==========  ================================================================

The invoke value names the node (``nodes``); the completion says what each node's clock
was told, ``clocks``: node -> its offset in seconds (a strobe's: the offset it jumps to
and back from), and what its broker then believed, ``believed`` (:func:`believed`). The
``reset-clock`` completion's ``clocks`` has every node at 0. A broker follows a new
offset within :data:`~faultline.cluster.host.clocks.REREAD_S`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from faultline.cluster.host.clocks import REREAD_S
from faultline.cluster.waiting import wait_until
from faultline.errors import NemesisError
from faultline.history import Op
from faultline.nemeses.base import Bound, choose, completed, error_text, leaders_snapshot, skewable
from faultline.nemeses.schedule import ScheduledFault

log = logging.getLogger(__name__)

BUMPS_S = (-300, -60, -10, 10, 60, 300)
STROBES_S = (5, 30, 120)
#: How long a strobing clock stays at each end: twice the brokers' re-read of their
#: offset file, so each end is seen.
STROBE_PERIOD_S = 2 * REREAD_S
#: How far a broker's believed offset may be from what its clock was told and still count
#: as following it: the read-back's error with room to spare (docs/design.md).
TOLERANCE_S = 1.0
#: How long a clock change waits for its brokers to follow: a JVM re-reads its offset file
#: each :data:`~faultline.cluster.host.clocks.REREAD_S`, then a read-back takes its round
#: trip; the rest is room for a loaded machine.
FOLLOW_S = 5.0
#: How long one read-back waits for a broker's answer.
READ_S = 1.0

Reader = Callable[[Collection[int], float], Mapping[int, float | None]]


def offset(kind: str, pick: int) -> int:
    """The ``offset_s`` of clock kind ``kind``, drawn reproducibly from ``pick``."""
    rng = random.Random(f"clock:{kind}:{pick}")
    if kind == "bump":
        return rng.choice(BUMPS_S)
    if kind == "strobe":
        return rng.choice(STROBES_S)
    raise NemesisError(f"unknown clock fault {kind!r}; known: bump, strobe")


def believed(read: Reader, told: Mapping[int, int], within_s: float) -> dict[int, float | None]:
    """What each node's broker believes its clock's offset is (``read(nodes, READ_S)``),
    read again until every node's is within :data:`TOLERANCE_S` of what it was ``told``
    or ``within_s`` has passed: each node's last answer, None for one that never answered."""
    last: dict[int, float | None] = dict.fromkeys(told)

    def follows(node: int) -> bool:
        seen = last[node]
        return seen is not None and abs(seen - told[node]) <= TOLERANCE_S

    def all_follow() -> bool:
        answers = read([n for n in told if not follows(n)], READ_S)
        last.update({n: s for n, s in answers.items() if s is not None})
        return all(follows(n) for n in told)

    wait_until(all_follow, time.monotonic() + within_s)
    return last


class ClockNemesis(Bound):
    """``clock`` sets the named nodes' clocks off (held, or strobing); ``reset-clock``
    ends every strobe and sets every clock true."""

    family = "clock"

    def __init__(self) -> None:
        super().__init__()
        self._strobes: dict[int, tuple[threading.Thread, threading.Event]] = {}
        self._lock = threading.Lock()

    def plan(self, step: ScheduledFault, busy: Collection[int]) -> dict[str, Any]:
        node = choose([n.id for n in self.cluster.nodes], step.pick)
        value: dict[str, Any] = {"nodes": [node], "offset_s": offset(step.kind, step.pick)}
        if step.kind == "strobe":
            value["period_s"] = STROBE_PERIOD_S
        return {**value, "leaders": leaders_snapshot(self.cluster)}

    def invoke(self, op: Op) -> Op:
        clock = skewable(self.cluster, self.family)
        value = op.value or {}
        if op.f == "clock":
            nodes, seconds = [int(n) for n in value["nodes"]], int(value["offset_s"])
            if value.get("kind") == "strobe":
                for_s = value.get("for_s")
                for node in nodes:
                    self._strobe(node, seconds, None if for_s is None else float(for_s))
                how = (f"jumping {seconds:+d} s and back every {STROBE_PERIOD_S} s"
                       + ("" if for_s is None else f" for {float(for_s):g} s"))
            else:
                for node in nodes:
                    self._end_strobe(node)
                    clock.set_clock(node, seconds)
                how = f"{seconds:+d} s"
            return completed(op, result=f"clocks of nodes {nodes}: {how}",
                             **_journaled(clock.read_clocks, dict.fromkeys(nodes, seconds)))
        if op.f == "reset-clock":
            self._end_strobes()
            clock.reset_clocks()
            return completed(op, result="clocks reset",
                             **_journaled(clock.read_clocks, {n.id: 0 for n in self.cluster.nodes}))
        raise NemesisError(f"the 'clock' nemesis cannot {op.f!r}")

    def teardown(self) -> None:
        """End every strobe and set every clock true, whatever is known to be in effect."""
        if self._cluster is None:
            return
        self._end_strobes()
        skewable(self._cluster, self.family).reset_clocks()

    @property
    def strobing(self) -> frozenset[int]:
        """Nodes whose clocks a strobe may still be moving (for tests)."""
        with self._lock:
            return frozenset(n for n, (t, _) in self._strobes.items() if t.is_alive())

    def _strobe(self, node: int, seconds: int, for_s: float | None) -> None:
        """Move ``node``'s clock between ``seconds`` off and true every
        :data:`STROBE_PERIOD_S`, from a thread, until ended or for ``for_s``; then true."""
        self._end_strobe(node)
        clock = skewable(self.cluster, self.family)
        stop = threading.Event()
        deadline = None if for_s is None else time.monotonic() + for_s

        def flip() -> None:
            try:
                off = True
                while deadline is None or time.monotonic() < deadline:
                    clock.set_clock(node, seconds if off else 0)
                    off = not off
                    left = STROBE_PERIOD_S if deadline is None else min(STROBE_PERIOD_S,
                                                                        deadline - time.monotonic())
                    if stop.wait(max(0.0, left)):
                        break
                clock.set_clock(node, 0)
            except Exception as e:  # the heal's reset sets it true all the same
                log.warning("strobe of node %s's clock ended: %s", node, error_text(e))

        thread = threading.Thread(target=flip, name=f"nemesis-strobe-{node}", daemon=True)
        with self._lock:
            self._strobes[node] = (thread, stop)
        thread.start()

    def _end_strobe(self, node: int) -> None:
        with self._lock:
            running = self._strobes.pop(node, None)
        if running is not None:
            thread, stop = running
            stop.set()
            thread.join()

    def _end_strobes(self) -> None:
        with self._lock:
            nodes = list(self._strobes)
        for node in nodes:
            self._end_strobe(node)


def _journaled(read: Reader, told: Mapping[int, int]) -> dict[str, dict[str, Any]]:
    """A clock change's completion fields: what each node was ``told`` (``clocks``) and
    then believed (``believed``, seconds to the millisecond, or None)."""
    seen = believed(read, told, FOLLOW_S)
    return {"clocks": {str(n): s for n, s in told.items()},
            "believed": {str(n): None if b is None else round(b, 3) for n, b in seen.items()}}
