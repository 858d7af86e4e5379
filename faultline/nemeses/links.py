"""degrade / restore: random packet loss or a bandwidth limit on one broker's links to
every other broker, later removed (:mod:`faultline.cluster.host.links` says how).

Loss drops each packet of the node's inter-broker and controller traffic, either way,
with a probability; a limit slows it to a rate, each way. Client traffic (the proxies)
is untouched. A lossy or slow link delays replication (a follower may lag out of the
ISR after ``replica.lag.time.max.ms``) and heartbeats (a broker may be fenced after
``broker.session.timeout.ms``): at worst what an isolation of the node does, which is
how the model reads it. Kinds, drawn from ``pick``:

==========  ===========================================
kind        value
==========  ===========================================
loss        ``loss``: probability 0.1, 0.3 or 0.5
bandwidth   ``rate_kbit``: 128, 512 or 2048 kbit/s
==========  ===========================================

unless the spec sets ``nemesis.link_loss_percent`` or ``nemesis.link_rate_kbit`` (a
sweep axis), which every such fault then uses.

The invoke value names the degraded node (``nodes``) and its ``peers``; the restore's
completion carries ``counters``, per node, what the degradation did (``dropped``
packets, ``shaped_packets``, ``overlimits``), read just before it was removed.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from typing import Any

from faultline.cluster.host.links import total
from faultline.errors import NemesisError
from faultline.faults import LINK_KINDS
from faultline.history import Op
from faultline.nemeses.base import Bound, choose, completed, degradable, leaders_snapshot
from faultline.nemeses.schedule import ScheduledFault
from faultline.spec import NemesisSpec

LOSSES = (0.1, 0.3, 0.5)
RATES_KBIT = (128, 512, 2048)
#: A nemesis spec that sets neither loss nor rate: both drawn.
_DRAWN = NemesisSpec()


def degradation(kind: str, pick: int, nemesis: NemesisSpec = _DRAWN) -> dict[str, Any]:
    """The ``loss`` or ``rate_kbit`` of link kind ``kind``: ``nemesis``'s
    ``link_loss_percent`` or ``link_rate_kbit`` when set, else drawn reproducibly from ``pick``."""
    rng = random.Random(f"links:{kind}:{pick}")
    if kind == "loss":
        loss = rng.choice(LOSSES)
        return {"loss": loss if nemesis.link_loss_percent is None else nemesis.link_loss_percent / 100}
    if kind == "bandwidth":
        rate = rng.choice(RATES_KBIT)
        return {"rate_kbit": rate if nemesis.link_rate_kbit is None else nemesis.link_rate_kbit}
    raise NemesisError(f"unknown link degradation {kind!r}; known: {', '.join(LINK_KINDS)}")


class LinksNemesis(Bound):
    """``degrade`` degrades one node's links to every other node; ``restore`` removes it."""

    family = "links"

    def plan(self, step: ScheduledFault, busy: Collection[int]) -> dict[str, Any]:
        nodes = sorted(n.id for n in self.cluster.nodes)
        node = choose(nodes, step.pick)
        return {"nodes": [node], "peers": [n for n in nodes if n != node],
                **degradation(step.kind, step.pick, self.cluster.spec.nemesis),
                "leaders": leaders_snapshot(self.cluster)}

    def invoke(self, op: Op) -> Op:
        net = degradable(self.cluster, self.family)
        value = op.value or {}
        if op.f == "degrade":
            if len(value["nodes"]) != 1:
                raise NemesisError(f"degrade takes the links of one node, not of {value['nodes']}")
            [node] = value["nodes"]
            peers = value["peers"]
            if "loss" in value:
                net.drop_on_links(node, peers, float(value["loss"]))
                what = f"dropping {float(value['loss']):.0%} of packets"
            else:
                net.limit_links(node, peers, int(value["rate_kbit"]))
                what = f"limited to {int(value['rate_kbit'])} kbit/s each way"
            return completed(op, result=f"links of node {node} to {peers}: {what}")
        if op.f == "restore":
            counters = net.restore_links()
            t = total(counters)
            return completed(op, result=f"links restored: {t['dropped']} packets dropped, "
                                        f"{t['shaped_packets']} shaped ({t['overlimits']} over the limit)",
                             counters={str(n): c for n, c in sorted(counters.items())})
        raise NemesisError(f"the 'links' nemesis cannot {op.f!r}")

    def teardown(self) -> None:
        """Remove every loss rule and rate limit, whether or not one is known to be in effect."""
        if self._cluster is None:
            return
        degradable(self._cluster, self.family).restore_links()
