"""The local backend on a real Kafka cluster: client path, failover, partitions, toxics."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from faultline.cluster.local.cluster import LocalCluster
from faultline.cluster.protocol import (
    Cluster,
    Killable,
    Partitionable,
    PartitionState,
    Pausable,
    Stoppable,
    Toxifiable,
    Wipeable,
)
from faultline.errors import ClusterError
from tests.integration.nemeses.nemesis_helpers import wait_until
from tests.unprivileged import assert_toxiproxy_out_of_reach

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
TOPIC = "it-topic"


def partition(cluster: LocalCluster, p: int = 0) -> PartitionState:
    box: list[PartitionState] = []

    def known() -> bool:
        state = cluster.leaders(TOPIC).get(p)
        box[:] = [state] if state is not None and state.leader is not None else []
        return bool(box)

    wait_until(known, 30, f"{TOPIC}[{p}] having a leader")
    return box[0]


def produce(cluster: LocalCluster, p: int, values: list[bytes], timeout: float = 30.0) -> list[int]:
    """Produce with acks=all to partition ``p``; the offsets, or AssertionError."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 0,
                         "message.timeout.ms": int(timeout * 1000)})
    offsets: list[int] = []
    errors: list[str] = []

    def done(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            offsets.append(msg.offset())  # type: ignore[attr-defined]

    for v in values:
        producer.produce(TOPIC, value=v, partition=p, on_delivery=done)
    producer.flush(timeout + 5)
    assert not errors and len(offsets) == len(values), errors[:3]
    return offsets


def test_backend_offers_every_capability(cluster: LocalCluster) -> None:
    for protocol in (Cluster, Killable, Stoppable, Pausable, Partitionable, Toxifiable, Wipeable):
        assert isinstance(cluster, protocol), protocol.__name__


def test_round_trip_through_the_proxies(cluster: LocalCluster) -> None:
    proxies = set(cluster.bootstrap_servers().split(","))
    assert all(s.startswith(f"{cluster.layout.proxy_address}:") for s in proxies)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": "it-rt",
                         "enable.auto.commit": False})
    try:
        # what the cluster tells clients: every broker at its proxy, none at its own address
        brokers = {f"{b.host}:{b.port}" for b in consumer.list_topics(timeout=10).brokers.values()}
        assert brokers == proxies
        values = [f"rt-{uuid.uuid4().hex}-{i}".encode() for i in range(50)]
        offsets = produce(cluster, 1, values)
        consumer.assign([TopicPartition(TOPIC, 1, offsets[0])])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == values
    finally:
        consumer.close()


def test_status_describes_nodes_proxies_and_leaders(cluster: LocalCluster) -> None:
    d = cluster.describe()
    assert [n["id"] for n in d["nodes"]] == [1, 2, 3]
    assert all(n["alive"] and n["pid"] for n in d["nodes"])
    assert all(n["namespace"].startswith(f"fl{d['run_id']}-n") for n in d["nodes"])
    assert cluster.active_controller() in (1, 2, 3)
    state = cluster.leaders(TOPIC)
    assert sorted(state) == [0, 1, 2]
    assert all(s.leader in (1, 2, 3) and s.isr == (1, 2, 3) for s in state.values())


def test_latency_toxic_delays_every_response_of_the_leader(cluster: LocalCluster) -> None:
    """A 400 ms downstream latency toxic on the leader's proxy: no produce round trip can be
    shorter than that (a lower bound, whatever the machine's load); cleared, it is gone."""
    p = 0
    leader = partition(cluster, p).leader
    assert leader is not None
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all", "linger.ms": 0})
    producer.produce(TOPIC, value=b"warm-up", partition=p)
    assert producer.flush(30) == 0

    def latencies(n: int) -> list[float]:
        times = []
        for i in range(n):
            t0 = time.monotonic()
            producer.produce(TOPIC, value=f"lat-{i}".encode(), partition=p)
            assert producer.flush(30) == 0
            times.append(time.monotonic() - t0)
        return times

    name = cluster.add_toxic(leader, "latency", {"latency": 400, "jitter": 0})
    try:
        assert name in {t.name for t in cluster.toxiproxy.toxics(f"n{leader}")}
        slow = latencies(5)
    finally:
        cluster.clear_toxics()
    assert min(slow) >= 0.4, f"a produce under a 400 ms latency toxic took {min(slow):.3f} s"
    assert not cluster.toxiproxy.toxics(f"n{leader}")
    latencies(1)  # the link still carries requests once cleared


def test_no_other_local_user_reaches_the_toxiproxy_api(cluster: LocalCluster) -> None:
    assert_toxiproxy_out_of_reach(cluster)
    produce(cluster, 2, [b"through-the-proxies"])


def test_pause_resume_and_graceful_stop(cluster: LocalCluster) -> None:
    node = 3
    pid = cluster.node(node).pid
    cluster.pause(node)
    assert cluster.node(node).paused and cluster.node(node).is_alive()
    assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    cluster.resume(node)
    assert not cluster.node(node).paused
    cluster.stop_node(node)
    assert not cluster.node(node).is_alive()
    log = (cluster.node(node).log_dir / "server.log").read_text()
    assert "Transition from SHUTTING_DOWN to SHUTDOWN" in log, log[-2000:]  # a controlled shutdown
    cluster.start_node(node)
    assert cluster.node(node).pid not in (None, pid)
    cluster.wait_healthy(90)
    cluster.wait_full_isr(TOPIC, 90)


def test_collect_copies_configs_and_logs(cluster: LocalCluster, tmp_path: Path) -> None:
    cluster.collect(tmp_path / "nodes")
    for i in (1, 2, 3):
        files = {f.name for f in (tmp_path / "nodes" / str(i)).iterdir()}
        assert {"server.properties", "server.log", "stdout.log"} <= files


def test_killing_the_leader_elects_another_from_the_isr_and_writes_go_on(
    fresh_cluster: LocalCluster,
) -> None:
    c = fresh_cluster
    produce(c, 0, [b"before-0", b"before-1"])
    before = partition(c, 0)
    assert before.leader is not None and len(before.isr) == 3
    c.kill(before.leader)
    assert not c.node(before.leader).is_alive()
    wait_until(lambda: partition(c, 0).leader not in (None, before.leader), 60,
               f"a new leader for {TOPIC}[0] after killing node {before.leader}")
    after = partition(c, 0)
    assert after.leader in before.isr
    offsets = produce(c, 0, [b"after-0", b"after-1"])
    assert offsets[0] >= 2
    c.start_node(before.leader)
    c.wait_full_isr(TOPIC, 120)


def test_a_grudge_isolating_the_leader_moves_leadership_away(fresh_cluster: LocalCluster) -> None:
    c = fresh_cluster
    leader = partition(c, 0).leader
    assert leader is not None
    others = [n for n in c.node_ids if n != leader]
    c.partition({leader: others, **{o: [leader] for o in others}})
    rules = subprocess.run(["ip", "netns", "exec", c.node(leader).namespace, "iptables", "-S", "FAULTLINE"],
                           capture_output=True, text=True, check=True).stdout
    assert all(f"-s {c.node(o).address}/32 -j DROP" in rules for o in others), rules
    wait_until(lambda: partition(c, 0).leader in others, 60,
               f"leadership of {TOPIC}[0] moving away from isolated node {leader}")
    c.heal_network()
    c.wait_full_isr(TOPIC, 120)
    produce(c, 0, [b"healed"])


def test_a_heal_clears_every_node_though_one_nodes_iptables_fails(cluster: LocalCluster) -> None:
    """Found by the nemesis review: with node 2's grudge chain gone (its ``iptables -F``
    fails), a heal stopped at node 2 and left node 3 dropping node 1, and so did every
    teardown after it."""
    def ipt(node: int, *args: str, check: bool = True) -> str:
        return subprocess.run(["ip", "netns", "exec", cluster.node(node).namespace, "iptables", "-w", "5",
                               *args], capture_output=True, text=True, check=check).stdout

    ipt(2, "-D", "INPUT", "-j", "FAULTLINE")
    ipt(2, "-X", "FAULTLINE")
    try:
        ipt(3, "-A", "FAULTLINE", "-s", f"{cluster.node(1).address}/32", "-j", "DROP")
        with pytest.raises(ClusterError, match="FAULTLINE"):
            cluster.heal_network()
        assert "-j DROP" not in ipt(3, "-S", "FAULTLINE"), "node 3 still drops node 1 after the heal"
    finally:
        ipt(3, "-F", "FAULTLINE", check=False)
        ipt(2, "-N", "FAULTLINE", check=False)
        ipt(2, "-I", "INPUT", "1", "-j", "FAULTLINE", check=False)
    cluster.heal_network()
