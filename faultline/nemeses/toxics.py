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


def landed_after(hold_s: float) -> float:
    """Seconds from the start of a hold of ``hold_s`` seconds by which every request it held
    has landed: its sender's TCP sends it again at 0.2, 0.6, 1.4 ... s (the backoff doubles
    from Linux's least retransmission timeout, 200 ms), so the first time after the hold
    comes before twice the hold and 0.2 s; a second more for the broker to read it."""
    return 2 * hold_s + 1.2


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
    and returns once it let them go; ``clear-toxics`` removes all, after a ``late-end``
    once its held requests have landed (:func:`landed_after`)."""

    family = "toxics"

    def __init__(self) -> None:
        super().__init__()
        self._landed_by = 0.0  # time.monotonic() by which every held request has landed

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
            start, hold_s = time.monotonic(), value["hold_ms"] / 1000
            self._landed_by = max(self._landed_by, start + landed_after(hold_s))
            counters = tox.hold_ends(value["nodes"], value["window_ms"] / 1000, hold_s)
            held = sum(c["held"] for c in counters.values())
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
            time.sleep(max(0.0, self._landed_by - time.monotonic()))
            tox.clear_toxics()
            return completed(op, result="toxics cleared")
        raise NemesisError(f"the 'toxics' nemesis cannot {op.f!r}")

    def teardown(self) -> None:
        """Remove every toxic from every proxy."""
        if self._cluster is None:
            return
        toxifiable(self._cluster, self.family).clear_toxics()
