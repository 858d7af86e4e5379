"""toxics: Toxiproxy toxics on the client links (clients <-> brokers), then clear them.

Only client traffic passes the proxies (docs/design.md), so these faults never touch
replication: they provoke client timeouts, indeterminate sends (``info``), retries and
duplicates. Kinds and what each does to a proxied connection:

============  ==========================  ==================================================
kind          streams                     attributes (drawn from ``pick``)
============  ==========================  ==================================================
latency       downstream                  ``latency`` 50-1000 ms, ``jitter`` half of it
bandwidth     downstream                  ``rate`` 1-64 KB/s
timeout       upstream and downstream     ``timeout`` 0: no data passes, connections hang
reset_peer    upstream                    ``timeout`` 0-2000 ms, then TCP RST
slicer        downstream                  ``average_size`` 16-128 bytes, ``size_variation``
                                          half, ``delay`` 100-2000 us between slices
============  ==========================  ==================================================

The toxic goes on one node's proxy or on every proxy (drawn from ``pick``, half the
time each). The value records ``toxic`` (kind, streams, attributes) and ``nodes``.

A targeted schedule's ``delay ends`` is kind ``late-end``, not a toxic: the nodes hold
each client connection that carries a transaction's end, its packets dropped
(:mod:`faultline.cluster.host.ends`), so the request lands after its client retried it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Collection
from typing import Any

from faultline.errors import NemesisError
from faultline.faults import TOXIC_KINDS
from faultline.history import Op
from faultline.nemeses.base import Bound, choose, completed, leaders_snapshot, toxifiable
from faultline.nemeses.schedule import ScheduledFault

#: Seconds a held request may take to land past twice its hold's length: TCP sends it again
#: after a retransmission timeout that doubles each time (at most 1 s for the first: Linux's
#: before the connection has a round trip measured, 200 ms after), so the first time after
#: the release comes before 2 * release - start + 1 s; a second more for the broker to read it.
LANDING_S = 2.0


def landed_by(start: float, released: float) -> float:
    """The time by which every request a hold that began at ``start`` and let go at
    ``released`` held has landed: a request first sent at ``s`` >= ``start``, sent again at
    ``s + r * (2**k - 1)``, is sent again after ``released`` before
    ``s + 2 * (released - s) + r`` (the time before that one came before ``released``)."""
    return 2 * released - start + LANDING_S


def toxic_for(kind: str, pick: int) -> tuple[tuple[str, ...], dict[str, int]]:
    """The streams and attributes of toxic ``kind``, drawn reproducibly from ``pick``."""
    rng = random.Random(f"toxic:{kind}:{pick}")
    if kind == "latency":
        latency = rng.choice([50, 100, 250, 500, 1000])
        return ("downstream",), {"latency": latency, "jitter": latency // 2}
    if kind == "bandwidth":
        return ("downstream",), {"rate": rng.choice([1, 4, 16, 64])}
    if kind == "timeout":
        return ("upstream", "downstream"), {"timeout": 0}
    if kind == "reset_peer":
        return ("upstream",), {"timeout": rng.choice([0, 500, 2000])}
    if kind == "slicer":
        size = rng.choice([16, 64, 128])
        return ("downstream",), {"average_size": size, "size_variation": size // 2,
                                 "delay": rng.choice([100, 500, 2000])}
    raise NemesisError(f"unknown toxic {kind!r}; known: {', '.join(TOXIC_KINDS)}")


class ToxicsNemesis(Bound):
    """``toxic`` adds one toxic to one or every client proxy, or (``kind`` ``late-end``, a
    targeted step's) holds the transactions' ends on the nodes' client links for ``hold_ms``
    and returns once it let them go; ``clear-toxics`` removes all, and completes once every
    request a ``late-end`` held has landed (:func:`landed_by`)."""

    family = "toxics"

    def __init__(self) -> None:
        super().__init__()
        self._landed_by = 0.0  # time.monotonic() by which every request held so far has landed
        self._unreleased: list[float] = []  # when each hold began whose release failed

    def plan(self, step: ScheduledFault, busy: Collection[int]) -> dict[str, Any]:
        nodes = sorted(n.id for n in self.cluster.nodes)
        if (step.pick >> 16) % 2 == 1:
            nodes = [choose(nodes, step.pick)]
        streams, attributes = toxic_for(step.kind, step.pick)
        # leaders first: once the toxic is on, admin calls through the proxies suffer too
        return {"nodes": nodes,
                "toxic": {"kind": step.kind, "streams": list(streams), "attributes": attributes},
                "leaders": leaders_snapshot(self.cluster)}

    def invoke(self, op: Op) -> Op:
        tox = toxifiable(self.cluster, self.family)
        value = op.value or {}
        if op.f == "toxic" and value.get("kind") == "late-end":
            start = time.monotonic()
            try:
                counters = tox.hold_ends(value["nodes"], value["window_ms"] / 1000, value["hold_ms"] / 1000)
            except BaseException:
                self._unreleased.append(start)  # clear-toxics lets them go, and waits from then
                raise
            self._landed_by = max(self._landed_by, landed_by(start, time.monotonic()))
            held = sum(c["connections"] for c in counters.values())
            return completed(op, result=f"held {held} connection(s)",
                             held={str(n): c for n, c in counters.items()})
        if op.f == "toxic":
            spec = value["toxic"]
            names = []
            for node in value["nodes"]:
                for stream in spec["streams"]:
                    names.append(tox.add_toxic(int(node), spec["kind"], spec["attributes"], stream=stream,
                                               toxicity=spec.get("toxicity", 1.0)))
            return completed(op, result=f"added {len(names)} toxic(s)", names=names)
        if op.f == "clear-toxics":
            try:
                tox.clear_toxics()
            finally:  # the window stays open until every held request has landed, cleared or not
                released = time.monotonic()
                self._landed_by = max([self._landed_by, *(landed_by(s, released) for s in self._unreleased)])
                self._unreleased.clear()
                time.sleep(max(0.0, self._landed_by - time.monotonic()))
            return completed(op, result="toxics cleared")
        raise NemesisError(f"the 'toxics' nemesis cannot {op.f!r}")

    def teardown(self) -> None:
        """Remove every toxic from every proxy."""
        if self._cluster is None:
            return
        toxifiable(self._cluster, self.family).clear_toxics()
