"""Names, addresses and the iptables/ip argument lists of the local backend's network."""

from __future__ import annotations

import ipaddress
from types import SimpleNamespace

import pytest

from faultline.cluster.host import netns
from faultline.cluster.host.netns import CHAIN, Layout
from faultline.cluster.local.cluster import LocalCluster
from faultline.errors import ClusterError
from faultline.spec import TestSpec
from tests.unit.cluster.fakes import FakeIp

NET = ipaddress.IPv4Network("10.241.7.0/24")
LAYOUT = Layout("abc123", NET, (1, 2, 3))


def test_names_fit_in_an_interface_name_and_carry_the_run_id() -> None:
    five = Layout("abc123", NET, (1, 2, 3, 4, 5))
    names = [five.bridge_namespace, five.host_veth, *map(five.namespace, five.node_ids)]
    assert all(len(n) <= 15 for n in names)
    assert {netns.owner_run_id(n) for n in names} == {"abc123"}
    assert LAYOUT.namespace(2) == "flabc123-n2"
    assert LAYOUT.bridge_namespace == "flabc123-br"


def test_each_namespace_and_the_host_veth_is_marked_as_the_runs_right_after_it_is_made() -> None:
    flat = [" ".join(c) for c in netns.setup_commands(LAYOUT)]
    mark = "alias faultline.run=abc123"
    for made, marked in [("ip netns add flabc123-br", f"ip -n flabc123-br link set lo {mark}"),
                         ("ip netns add flabc123-n2", f"ip -n flabc123-n2 link set lo {mark}"),
                         ("ip link add flabc123h type veth peer name host netns flabc123-br",
                          f"ip link set flabc123h {mark}")]:
        assert flat.index(marked) == flat.index(made) + 1, (made, marked)


def test_a_name_alone_makes_no_namespace_or_link_a_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: an unrelated namespace named like ``flowctrl-br`` was deleted as a leftover."""
    ip = FakeIp(["flowctr-br", "flabc123-n1", "flabc123-n2", "flxyz789-n1"],
                ["lo", "flabc123h", "flowctrh", "flxyz789h"],
                {"flabc123-n1": "abc123", "flabc123h": "abc123", "flxyz789-n1": "abc123",
                 "flxyz789h": "abc123"})
    monkeypatch.setattr(netns, "run", ip)
    assert netns.owned_namespaces() == {"flabc123-n1": "abc123"}
    assert netns.owned_links() == {"flabc123h": "abc123"}


def test_names_of_others_are_not_ours() -> None:
    for name in ("eth0", "lo", "docker0", "flannel.1", "fl-queue", "flabc12-n1", "flABC123-n1", "flabc123br"):
        assert netns.owner_run_id(name) is None


def test_addresses() -> None:
    assert LAYOUT.host_address == "10.241.7.1"
    assert [LAYOUT.address(i) for i in (1, 2, 3)] == ["10.241.7.11", "10.241.7.12", "10.241.7.13"]


def test_layout_rejects_bad_values() -> None:
    with pytest.raises(ValueError):
        Layout("ABC", NET, (1,))
    with pytest.raises(ValueError):
        Layout("abc123", ipaddress.IPv4Network("10.241.0.0/16"), (1,))


def test_setup_commands_are_argument_lists_in_order() -> None:
    cmds = netns.setup_commands(LAYOUT)
    assert all(isinstance(c, list) and all(isinstance(a, str) for a in c) for c in cmds)
    assert cmds[0] == ["ip", "netns", "add", "flabc123-br"]
    flat = [" ".join(c) for c in cmds]
    assert flat.index("ip netns add flabc123-n1") < flat.index(
        "ip -n flabc123-br link add v1 type veth peer name eth0 netns flabc123-n1")
    assert "ip -n flabc123-n3 addr add 10.241.7.13/24 dev eth0" in flat
    assert "ip addr add 10.241.7.1/24 dev flabc123h" in flat
    # Toxiproxy's: the proxies on the bridge's address, its API on the namespace's loopback
    assert "ip -n flabc123-br addr add 10.241.7.2/24 dev br0" in flat
    assert "ip -n flabc123-br link set lo up" in flat
    # nothing routes out of a node: no default route is ever added
    assert not any("route" in c for c in flat)


def test_only_the_host_veth_is_made_in_the_host_namespace() -> None:
    """The bridge and every node's veth end are made inside the bridge namespace, so the
    host's firewall never forwards or bridges the nodes' traffic."""
    in_host = [c for c in netns.setup_commands(LAYOUT) if c[:2] == ["ip", "link"] or c[:2] == ["ip", "addr"]]
    assert in_host and all("flabc123h" in c for c in in_host)
    assert ["ip", "-n", "flabc123-br", "link", "add", "br0", "type", "bridge"] in netns.setup_commands(LAYOUT)


def test_grudge_isolating_one_node() -> None:
    plan = netns.grudge_commands(LAYOUT, {1: {2, 3}, 2: {1}, 3: {1}})
    prefix = ["ip", "netns", "exec", "flabc123-n1", "iptables", "-w", "5"]
    assert plan[1] == [
        [*prefix, "-F", CHAIN],
        [*prefix, "-A", CHAIN, "-s", "10.241.7.12/32", "-j", "DROP"],
        [*prefix, "-A", CHAIN, "-s", "10.241.7.13/32", "-j", "DROP"],
    ]
    assert plan[2][1][-4:] == ["-s", "10.241.7.11/32", "-j", "DROP"]
    # every command runs inside a node namespace: the host's iptables is never touched
    assert all(c[:3] == ["ip", "netns", "exec"] for cmds in plan.values() for c in cmds)


def test_a_replication_grudge_drops_only_the_broker_port() -> None:
    plan = netns.grudge_rules(LAYOUT, {3: {1}}, replication={1: {2, 3}, 2: {1}})
    assert plan[1][1:] == [
        ["-A", CHAIN, "-s", f"10.241.7.{a}/32", "-p", "tcp", way, "9092", "-j", "DROP"]
        for a in (12, 13) for way in ("--dport", "--sport")]
    assert plan[2][1:] == [["-A", CHAIN, "-s", "10.241.7.11/32", "-p", "tcp", way, "9092", "-j", "DROP"]
                           for way in ("--dport", "--sport")]
    assert plan[3][1:] == [["-A", CHAIN, "-s", "10.241.7.11/32", "-j", "DROP"]], \
        "a node it drops entirely needs no port rule"
    with pytest.raises(ValueError, match=r"unknown node\(s\) \[4\]"):
        netns.grudge_rules(LAYOUT, {}, replication={4: {1}})


def test_grudge_replaces_and_ignores_self() -> None:
    plan = netns.grudge_commands(LAYOUT, {2: [2, 3]})
    assert [len(plan[i]) for i in (1, 2, 3)] == [1, 2, 1]  # flushed, flush+1 rule, flushed


def test_grudge_with_unknown_nodes_is_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown node\(s\) \[4\]"):
        netns.grudge_commands(LAYOUT, {1: {4}})


def test_heal_flushes_every_chain() -> None:
    assert netns.heal_commands(LAYOUT) == [
        ["ip", "netns", "exec", f"flabc123-n{i}", "iptables", "-w", "5", "-F", CHAIN] for i in (1, 2, 3)
    ]


def test_chain_is_jumped_to_from_input_only() -> None:
    cmds = netns.chain_commands("flabc123-n1")
    assert cmds[1][-5:] == ["-I", "INPUT", "1", "-j", CHAIN]


def test_free_subnets_skip_what_overlaps_but_not_the_default_route() -> None:
    taken = [ipaddress.IPv4Network("0.0.0.0/0"), ipaddress.IPv4Network("10.241.0.0/23"),
             ipaddress.IPv4Network("10.241.5.7/32")]
    free = netns.free_subnets(taken)
    assert ipaddress.IPv4Network("10.241.0.0/24") not in free
    assert ipaddress.IPv4Network("10.241.1.0/24") not in free
    assert ipaddress.IPv4Network("10.241.5.0/24") not in free
    assert ipaddress.IPv4Network("10.241.2.0/24") in free
    assert len(free) == 256 - 3


def test_teardown_deletes_namespaces_then_links() -> None:
    assert netns.teardown_commands(["flabc123-n1"], ["flabc123h"]) == [
        ["ip", "netns", "delete", "flabc123-n1"],
        ["ip", "link", "delete", "flabc123h"],
    ]


def test_probe_outcomes_that_mean_reached() -> None:
    def outcome(o: str) -> netns.Probe:
        return netns.Probe(1, 2, "10.241.7.12", 9093, o)

    assert outcome("open").reached and outcome("refused").reached
    assert not outcome("timed out").reached and not outcome("No route to host").reached
    assert str(outcome("timed out")) == "node 1 could not reach node 2 (10.241.7.12:9093: timed out)"
    assert str(netns.Probe(None, 3, "10.241.7.13", 9, "timed out")).startswith("the host could not")



def test_a_node_whose_iptables_fails_leaves_no_other_node_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the nemesis review on a real cluster: with node 2's chain gone, a heal
    (and the teardown after it) stopped at node 2 and left node 3 dropping node 1."""
    ran: list[list[str]] = []

    def run(cmd: list[str], **_: object) -> str:
        ran.append(list(cmd))
        if "flabc123-n2" in cmd:
            raise ClusterError("iptables: No chain/target/match by that name.")
        return ""

    monkeypatch.setattr(netns, "run", run)
    cluster = LocalCluster(TestSpec())
    cluster._state = SimpleNamespace(layout=LAYOUT)  # type: ignore[assignment]
    with pytest.raises(ClusterError, match="No chain"):
        cluster.heal_network()
    assert ran == netns.heal_commands(LAYOUT), "every node's chain is flushed, node 3's too"
    ran.clear()
    with pytest.raises(ClusterError, match="No chain"):
        cluster.partition({1: frozenset({3}), 2: frozenset({3}), 3: frozenset({1, 2})})
    plan = netns.grudge_commands(LAYOUT, {1: {3}, 2: {3}, 3: {1, 2}})
    assert ran == [*plan[1], plan[2][0], *plan[3]], "node 3 gets its part though node 2's failed"


def test_a_docker_node_whose_iptables_fails_leaves_no_other_node_as_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for the docker backend (its containers' namespaces, entered by pid): a
    heal or partition stopped at the first node whose iptables failed."""
    from faultline.cluster.docker.cluster import DockerCluster

    ran: list[int] = []  # the pid of each command's container

    def run(cmd: list[str], **_: object) -> str:
        ran.append(int(cmd[2]))
        if cmd[2] == "102":
            raise ClusterError("iptables: No chain/target/match by that name.")
        return ""

    monkeypatch.setattr(netns, "run", run)
    cluster = DockerCluster(TestSpec())
    procs = {n: SimpleNamespace(pid=100 + n, alive=lambda: True) for n in (1, 2, 3)}
    cluster._state = SimpleNamespace(layout=LAYOUT, nodes=procs)  # type: ignore[assignment]
    for act in (cluster.heal_network, lambda: cluster.partition({1: frozenset({3}), 3: frozenset({1})})):
        ran.clear()
        with pytest.raises(ClusterError, match="No chain"):
            act()
        assert ran[0] == 101 and ran[-1] == 103 and 102 in ran, "node 3 gets its part though node 2's failed"
