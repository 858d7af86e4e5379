"""Degraded links between brokers: random packet loss and a bandwidth limit, inside the
nodes' own network namespaces (never the host's firewall or queues).

Loss is iptables' ``statistic`` match in the chain
:data:`~faultline.cluster.host.netns.LINKS_CHAIN` of the degraded node's namespace (beside
the grudge chain, so a partition and a degraded link replace neither's rules), jumped to
from ``INPUT`` and ``OUTPUT``: each packet between it and a
peer, either way, is dropped with the given probability. The bandwidth limit is an
``htb`` class on the egress of :data:`DEVICE`, which a ``u32`` filter feeds the packets
for the peers only (``tbf`` is classless: it would slow the node's client traffic too);
it goes on the degraded node towards its peers and on each peer towards it, so the link
is slow both ways. Client traffic (through the proxies) is never touched.

The functions that build argument lists are pure and take no namespace: the caller puts
the command that enters a node's namespace before them (``ip netns exec`` on the local
backend, ``nsenter`` into a container on the docker backend).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

from faultline.cluster.host.netns import LINKS_CHAIN, Layout

#: A node's interface on the run's bridge (both backends name it so).
DEVICE = "eth0"
#: The htb class the peers' packets go through.
_CLASS = "1:10"
_IPTABLES = ("iptables", "-w", "5")
#: ``Sent B bytes P pkt (dropped D, overlimits O`` of ``tc -s class show``.
_SENT = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)")


def _check(layout: Layout, node: int, peers: Collection[int]) -> list[int]:
    others = sorted(set(peers) - {node})
    unknown = sorted({node, *others} - set(layout.node_ids))
    if unknown:
        raise ValueError(f"links name unknown node(s) {unknown}; nodes are {list(layout.node_ids)}")
    if not others:
        raise ValueError(f"node {node} has no peer to degrade its links to")
    return others


def loss_commands(layout: Layout, node: int, peers: Collection[int],
                  probability: float) -> dict[int, list[list[str]]]:  # fmt: skip
    """node -> commands that drop each packet between ``node`` and each of ``peers``, either
    way, with ``probability`` (all in ``node``'s namespace)."""
    if not 0 < probability <= 1:
        raise ValueError(f"a loss probability must be in (0, 1], not {probability}")
    rules = []
    for peer in _check(layout, node, peers):
        for way in ("-s", "-d"):
            rules.append([*_IPTABLES, "-A", LINKS_CHAIN, way, f"{layout.address(peer)}/32", "-m",
                          "statistic", "--mode", "random", "--probability", f"{probability:g}",
                          "-j", "DROP"])
    return {node: rules}


def rate_commands(layout: Layout, node: int, peers: Collection[int],
                  rate_kbit: int) -> dict[int, list[list[str]]]:  # fmt: skip
    """node -> commands that limit the traffic between ``node`` and each of ``peers`` to
    ``rate_kbit`` kbit/s each way: ``node``'s egress to the peers, each peer's to it."""
    if rate_kbit <= 0:
        raise ValueError(f"a rate must be positive, not {rate_kbit} kbit/s")
    others = _check(layout, node, peers)
    out = {node: _shaper([layout.address(p) for p in others], rate_kbit)}
    for peer in others:
        out[peer] = _shaper([layout.address(node)], rate_kbit)
    return out


def _shaper(destinations: Sequence[str], rate_kbit: int) -> list[list[str]]:
    rate = f"{rate_kbit}kbit"
    # default 0: unclassified packets (the clients', the controller's to others) pass unshaped
    cmds = [["tc", "qdisc", "add", "dev", DEVICE, "root", "handle", "1:", "htb", "default", "0"],
            ["tc", "class", "add", "dev", DEVICE, "parent", "1:", "classid", _CLASS, "htb",
             "rate", rate, "ceil", rate]]
    for dest in destinations:
        cmds.append(["tc", "filter", "add", "dev", DEVICE, "parent", "1:", "protocol", "ip", "prio",
                     "1", "u32", "match", "ip", "dst", f"{dest}/32", "flowid", _CLASS])
    return cmds


def counters_commands() -> list[list[str]]:
    """The reads :func:`parse_counters` takes, in order: the loss chain's counters, the
    shaped class's statistics."""
    return [[*_IPTABLES, "-L", LINKS_CHAIN, "-v", "-x", "-n"],
            ["tc", "-s", "class", "show", "dev", DEVICE, "classid", _CLASS]]


def parse_counters(chain: str, shaped: str) -> dict[str, int] | None:
    """What one node's degraded links did, from the outputs of :func:`counters_commands`:
    ``dropped`` packets the loss rules dropped; ``shaped_packets`` sent through the rate
    limit and ``overlimits`` (packets it held back). None when the node has neither a loss
    rule nor a rate limit."""
    rules = [line.split() for line in chain.splitlines()]
    drops = [int(f[0]) for f in rules if len(f) > 2 and f[0].isdigit() and f[2] == "DROP"]
    m = _SENT.search(shaped)
    if not drops and m is None:
        return None
    return {"dropped": sum(drops), "shaped_packets": int(m.group(2)) if m else 0,
            "overlimits": int(m.group(4)) if m else 0}


def restore_commands(shaped: bool) -> list[list[str]]:
    """Commands that remove a node's loss rules and, when it has one (``shaped``: its
    :func:`counters_commands` found the class), its rate limit."""
    cmds = [[*_IPTABLES, "-F", LINKS_CHAIN]]
    if shaped:
        cmds.append(["tc", "qdisc", "del", "dev", DEVICE, "root"])
    return cmds


def total(counters: Mapping[int, Mapping[str, int]]) -> dict[str, int]:
    """Every node's counters added up."""
    out = {"dropped": 0, "shaped_packets": 0, "overlimits": 0}
    for c in counters.values():
        for k in out:
            out[k] += c.get(k, 0)
    return out


#: What ``faultline doctor`` says where the kernel refuses netem, and where it takes it.
NO_LATENCY = "not offered: this kernel has no netem queueing discipline (loss and bandwidth are)"
NETEM_UNUSED = "not offered: netem works here, but the links family has loss and bandwidth only"


def netem_probe() -> list[list[str]]:
    """Commands that add a netem delay on :data:`DEVICE` and remove it: the first fails on a
    kernel without netem."""
    return [["tc", "qdisc", "add", "dev", DEVICE, "root", "netem", "delay", "1ms"],
            ["tc", "qdisc", "del", "dev", DEVICE, "root"]]
