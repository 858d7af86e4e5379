"""The commands that degrade a node's links, and the counters read before they go."""

from __future__ import annotations

import ipaddress

import pytest

from faultline.cluster.host import links
from faultline.cluster.host.netns import LINKS_CHAIN, Layout

LAYOUT = Layout("abc123", ipaddress.IPv4Network("10.241.7.0/24"), (1, 2, 3))


def test_loss_drops_either_way_in_the_degraded_nodes_namespace_only() -> None:
    plan = links.loss_commands(LAYOUT, 2, [1, 2, 3], 0.3)
    assert list(plan) == [2]
    rules = [cmd[cmd.index("-A"):] for cmd in plan[2]]
    assert rules == [["-A", LINKS_CHAIN, way, f"10.241.7.{10 + peer}/32", "-m", "statistic", "--mode",
                      "random", "--probability", "0.3", "-j", "DROP"]
                     for peer in (1, 3) for way in ("-s", "-d")]
    assert all(cmd[:3] == ["iptables", "-w", "5"] for cmd in plan[2])


def test_a_rate_limit_shapes_only_the_packets_between_the_node_and_its_peers_both_ways() -> None:
    plan = links.rate_commands(LAYOUT, 1, [2, 3], 512)
    assert sorted(plan) == [1, 2, 3]
    assert [c[c.index("dst") + 1] for c in plan[1] if "filter" in c] == ["10.241.7.12/32", "10.241.7.13/32"]
    for peer in (2, 3):
        assert [c[c.index("dst") + 1] for c in plan[peer] if "filter" in c] == ["10.241.7.11/32"]
    root, klass = plan[1][:2]
    # default 0: what no filter classifies (client and controller traffic) passes unshaped
    assert root[-3:] == ["htb", "default", "0"]
    assert klass[-4:] == ["rate", "512kbit", "ceil", "512kbit"]


def test_bad_links_are_one_line() -> None:
    with pytest.raises(ValueError, match="unknown node"):
        links.loss_commands(LAYOUT, 4, [1], 0.1)
    with pytest.raises(ValueError, match="no peer"):
        links.rate_commands(LAYOUT, 1, [1], 100)
    with pytest.raises(ValueError, match="probability"):
        links.loss_commands(LAYOUT, 1, [2], 0)
    with pytest.raises(ValueError, match="positive"):
        links.rate_commands(LAYOUT, 1, [2], 0)


CHAIN = """Chain FAULTLINE-LINKS (2 references)
    pkts      bytes target     prot opt in     out     source               destination
      17     1020 DROP       0    --  *      *       10.241.7.12  0.0.0.0/0    statistic mode random
       5      300 DROP       0    --  *      *       0.0.0.0/0    10.241.7.12  statistic mode random
"""
SHAPED = """class htb 1:10 root prio 0 rate 512Kbit ceil 512Kbit burst 1600b cburst 1600b
 Sent 91234 bytes 812 pkt (dropped 3, overlimits 57 requeues 0)
 backlog 0b 0p requeues 0
"""


def test_counters() -> None:
    assert links.parse_counters(CHAIN, SHAPED) == {"dropped": 22, "shaped_packets": 812, "overlimits": 57}
    assert links.parse_counters(CHAIN, "") == {"dropped": 22, "shaped_packets": 0, "overlimits": 0}
    empty = CHAIN.split("\n", 2)[0] + "\n" + CHAIN.split("\n", 2)[1]
    assert links.parse_counters(empty, "") is None
    assert links.total({1: {"dropped": 2}, 2: {"dropped": 3, "overlimits": 1}}) == {
        "dropped": 5, "shaped_packets": 0, "overlimits": 1}


def test_restore_removes_the_rate_limit_only_where_there_is_one() -> None:
    assert links.restore_commands(shaped=False) == [["iptables", "-w", "5", "-F", LINKS_CHAIN]]
    assert links.restore_commands(shaped=True)[1] == ["tc", "qdisc", "del", "dev", "eth0", "root"]
