"""The local backend's network works whatever the host's firewall does, and says what
blocks it when something does: the doctor's test bridge, a start-up that times out, and
a cluster beside a running Docker engine (which sets the host's FORWARD policy to DROP
with bridged traffic passing iptables: the bug of issue 14)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultline.cluster import kafka_client
from faultline.cluster.host import links, netns, runstate
from faultline.cluster.host.netns import Layout
from faultline.cluster.local.cluster import LocalCluster
from faultline.cluster.setup import ends_check, latency_check, network_check
from faultline.errors import ClusterError
from faultline.spec import KafkaSpec, TestSpec, TopicSpec
from tests.integration.conftest import INTEGRATION_SPEC

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.usefixtures("local_backend")]

SPEC = TestSpec(name="it-network", kafka=KafkaSpec(heap_mb=320), topic=TopicSpec(name="it-network"))


def _drop_bridged(layout: Layout) -> None:
    """What Docker does to the host, done to the run's bridge namespace instead: bridged
    traffic passes iptables (a new namespace's default) and FORWARD drops it."""
    ns = layout.bridge_namespace
    nf = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
    subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", f"echo 1 > {nf}"], check=True)
    subprocess.run(["ip", "netns", "exec", ns, "iptables", "-w", "5", "-P", "FORWARD", "DROP"], check=True)


@pytest.fixture
def bridge() -> Iterator[Layout]:
    """A run's network of three nodes, no JVM; removed at the end."""
    with runstate.locked():
        state = runstate.claim(SPEC, [1, 2, 3], None)
    try:
        netns.build(state.layout, [1, 2, 3])
        yield state.layout
    finally:
        runstate.destroy(state.run_id, state)


def _host_rules() -> str:
    return subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=False).stdout


def test_doctor_sees_nodes_reach_each_other() -> None:
    check = network_check()
    assert check.ok, check.detail


def test_a_dropping_firewall_is_named(bridge: Layout) -> None:
    assert netns.reachability(bridge, 9) is None
    _drop_bridged(bridge)
    lost = netns.reachability(bridge, 9, timeout=1.0)
    assert lost is not None
    for a, b in ((1, 2), (2, 3), (3, 1)):
        assert f"node {a} could not reach node {b} ({bridge.address(b)}:9: timed out)" in lost
        assert f"the host could not reach node {a}" in lost  # its veth is a port of that bridge
    assert f"namespace {bridge.bridge_namespace}: bridged traffic passes iptables" in lost
    assert "FORWARD chain policy DROP" in lost


def test_start_up_that_times_out_says_who_could_not_reach_whom(monkeypatch: pytest.MonkeyPatch) -> None:
    build = netns.build

    def build_then_drop(layout: Layout, node_ids: tuple[int, ...]) -> None:
        build(layout, node_ids)
        _drop_bridged(layout)

    monkeypatch.setattr(netns, "build", build_then_drop)
    cluster = LocalCluster(SPEC)
    with pytest.raises(ClusterError) as err:
        cluster.start(timeout=15)
    message = str(err.value)
    assert "never all registered and unfenced" in message
    assert "node 1 could not reach node 2" in message and "FORWARD chain policy DROP" in message
    assert cluster._state is None  # stopped on the way out


@pytest.mark.usefixtures("docker_engine")
def test_local_cluster_beside_docker() -> None:
    """With a Docker engine on the host (its FORWARD policy DROP, bridged traffic passing
    iptables), a local cluster comes up, serves a round trip, and leaves the host's rules
    as they were."""
    policy = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True, check=True)
    assert "-P FORWARD DROP" in policy.stdout, "the engine did not set the host's FORWARD policy to DROP"
    assert Path("/proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip() == "1"
    rules = _host_rules()
    assert network_check().ok
    with LocalCluster(INTEGRATION_SPEC) as cluster:
        cluster.create_topic()
        kafka_client.round_trip(cluster.bootstrap_servers(), len(cluster.node_ids), 20.0)
    assert _host_rules() == rules


def test_the_doctor_says_whether_the_kernel_has_netem_and_leaves_nothing() -> None:
    """Told apart from a netem delay tried on the loopback of a throwaway namespace."""
    before = set(netns.list_namespaces())
    tried = ["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]
    netem = subprocess.run(tried, capture_output=True, check=False).returncode == 0
    check = latency_check()
    assert check.ok and check.detail == (links.NETEM_UNUSED if netem else links.NO_LATENCY)
    # other runs may come and go meanwhile: what is new belongs to a run still there
    live = runstate.load_all()
    assert [ns for ns in set(netns.list_namespaces()) - before if netns.owner_run_id(ns) not in live] == []


def test_the_doctor_says_whether_iptables_takes_the_held_ends_rules_and_leaves_nothing() -> None:
    """The u32 and connmark matches of ``delay ends``, tried in a throwaway node namespace."""
    before = set(netns.list_namespaces())
    check = ends_check()
    assert check.ok, check.detail
    live = runstate.load_all()
    assert [ns for ns in set(netns.list_namespaces()) - before if netns.owner_run_id(ns) not in live] == []
