"""Degraded links between brokers on a real cluster: loss and a rate limit take effect (the
rules' own counters, read in the nodes' namespaces, and what the restore journals) and
leave nothing behind (no loss rule, no queueing discipline) once restored.

Both degradations heal fully, so the module shares one cluster; every test starts from
and returns to a full ISR.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from faultline.cluster.host import links, netns
from faultline.cluster.local.cluster import LocalCluster
from faultline.nemeses.links import LinksNemesis
from faultline.spec import KafkaSpec, TestSpec, TopicSpec
from tests.integration.nemeses.nemesis_helpers import (
    nemesis_op,
    on_backend,
    partition_state,
    report,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SPEC = TestSpec(
    name="nemesis-links",
    kafka=KafkaSpec(heap_mb=384, replica_lag_time_max_ms=4000, broker_session_timeout_ms=6000),
    topic=TopicSpec(partitions=1, replication_factor=3, min_insync_replicas=2),
)
TOPIC = SPEC.topic.name


@pytest.fixture(scope="module", params=["local", "docker"])
def cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """The same degradations on each backend (``nsenter`` into the containers there)."""
    with on_backend(request, SPEC) as c:
        yield c


@pytest.fixture(autouse=True)
def _full_isr_around(cluster: LocalCluster) -> Iterator[None]:
    cluster.wait_full_isr(TOPIC, 90)
    yield
    cluster.wait_full_isr(TOPIC, 120)


def _in(cluster: LocalCluster, node: int, cmd: list[str]) -> str:
    enter = cluster._enter(node)
    assert enter is not None, f"node {node} has no network namespace"
    return netns.run([*enter, *cmd])


def _counters(cluster: LocalCluster, node: int) -> dict[str, int] | None:
    chain, shaped = (_in(cluster, node, cmd) for cmd in links.counters_commands())
    return links.parse_counters(chain, shaped)


def _nothing_left(cluster: LocalCluster) -> None:
    for node in cluster.node_ids:
        assert _in(cluster, node, ["iptables", "-w", "5", "-S", netns.LINKS_CHAIN]).split("\n")[:-1] == [
            f"-N {netns.LINKS_CHAIN}"], f"node {node} kept a loss rule"
        qdiscs = _in(cluster, node, ["tc", "qdisc", "show", "dev", links.DEVICE])
        assert "htb" not in qdiscs, f"node {node} kept its rate limit: {qdiscs}"
        assert _counters(cluster, node) is None


def _produce(cluster: LocalCluster, n: int) -> None:
    """``n`` records of 1 KB, acknowledged by the leader alone (a slow follower does not
    hold them up); replication carries them to the degraded links."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": 1, "linger.ms": 5})
    for i in range(n):
        producer.produce(TOPIC, value=b"x" * 1024, key=str(i).encode())
        producer.poll(0)
    assert producer.flush(60) == 0, "records still unacknowledged after 60 s"


def _degrade_and_restore(cluster: LocalCluster, node: int, value: dict[str, Any],
                         took_effect: Callable[[dict[int, dict[str, int]]], bool],
                         what: str) -> dict[str, Any]:  # fmt: skip
    """Degrade ``node``'s links by ``value`` through the nemesis, produce until the counters
    read in the namespaces (node -> counters, nodes without a degradation left out) show
    ``took_effect``, restore; the restore's journaled counters."""
    nemesis = LinksNemesis()
    nemesis.setup(cluster)
    peers = [n for n in cluster.node_ids if n != node]

    def counters() -> dict[int, dict[str, int]]:
        return {n: c for n in cluster.node_ids if (c := _counters(cluster, n)) is not None}

    try:
        nemesis.invoke(nemesis_op("degrade", {"nodes": [node], "peers": peers, **value}))
        _produce(cluster, 300)
        wait_until(lambda: took_effect(counters()), 60, what)
        done = nemesis.invoke(nemesis_op("restore", {"nodes": [node]}))
    finally:
        nemesis.teardown()
    _nothing_left(cluster)
    report(f"{value}: {done.value['result']}; {done.value['counters']}")
    return dict(done.value["counters"])


def test_loss_drops_packets_on_the_links_and_is_restored(cluster: LocalCluster) -> None:
    node = partition_state(cluster, TOPIC).leader
    assert node is not None
    counters = _degrade_and_restore(cluster, node, {"loss": 0.5},
                                    lambda c: c.get(node, {}).get("dropped", 0) > 0,
                                    f"node {node}'s loss rules dropping packets")
    assert list(counters) == [str(node)] and counters[str(node)]["dropped"] > 0


def test_a_rate_limit_shapes_the_links_both_ways_and_is_restored(cluster: LocalCluster) -> None:
    node = partition_state(cluster, TOPIC).leader
    assert node is not None
    every = sorted(cluster.node_ids)

    def shaped(c: dict[int, dict[str, int]]) -> bool:
        # the leader's egress to its followers held back, and each follower's to it shaped
        return (sorted(c) == every and c[node]["overlimits"] > 0
                and all(x["shaped_packets"] > 0 for x in c.values()))

    counters = _degrade_and_restore(cluster, node, {"rate_kbit": 128}, shaped,
                                    f"node {node}'s links shaped both ways, over the limit")
    assert shaped({int(n): c for n, c in counters.items()}), counters
