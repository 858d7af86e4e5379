"""kill, pause, stop, partition, a replication hold and toxics on one real cluster of
each backend: each fault's effect as Kafka reports it, and its heal.

These faults heal fully, so the module shares one cluster; every test starts from and
returns to a full ISR.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from faultline.cluster.local.cluster import LocalCluster
from faultline.history import HistoryWriter, read_history
from faultline.nemeses.base import NodeFault
from faultline.nemeses.kill import KillNemesis
from faultline.nemeses.partition import PartitionNemesis, complete, to_json
from faultline.nemeses.pause import PauseNemesis
from faultline.nemeses.schedule import ScheduledFault
from faultline.nemeses.stop import StopNemesis
from faultline.nemeses.toxics import ToxicsNemesis
from faultline.spec import KafkaSpec, ProducerSpec, TestSpec, TopicSpec, WorkloadSpec
from faultline.workloads.queue import QueueWorkload
from tests.integration.nemeses.nemesis_helpers import (
    nemesis_op,
    on_backend,
    partition_state,
    report,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

LAG_MS = 3000
SESSION_MS = 6000
SPEC = TestSpec(
    name="nemesis-healable",
    kafka=KafkaSpec(heap_mb=384, replica_lag_time_max_ms=LAG_MS, broker_session_timeout_ms=SESSION_MS),
    topic=TopicSpec(partitions=1, replication_factor=3, min_insync_replicas=2),
    producer=ProducerSpec(delivery_timeout_ms=4000, request_timeout_ms=1500),
    workload=WorkloadSpec(producers=1, consumers=0, rate=50.0),
)
TOPIC = SPEC.topic.name


@pytest.fixture(scope="module", params=["local", "docker"])
def cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """The same faults on each backend (the docker backend's cluster is a LocalCluster
    whose nodes are containers)."""
    with on_backend(request, SPEC) as c:
        yield c


@pytest.fixture(autouse=True)
def _full_isr_around(cluster: LocalCluster) -> Iterator[None]:
    cluster.wait_full_isr(TOPIC, 90)
    yield
    cluster.wait_full_isr(TOPIC, 120)


def _isr(cluster: LocalCluster) -> tuple[int, ...]:
    return partition_state(cluster, TOPIC).isr


def _leader(cluster: LocalCluster) -> int | None:
    return partition_state(cluster, TOPIC).leader


def _follower(cluster: LocalCluster) -> int:
    state = partition_state(cluster, TOPIC)
    return next(n for n in sorted(state.isr) if n != state.leader)


def _isr_out_and_back(cluster: LocalCluster, nemesis: NodeFault, fault: str, heal: str) -> None:
    nemesis.setup(cluster)
    follower = _follower(cluster)
    try:
        nemesis.invoke(nemesis_op(fault, {"nodes": [follower]}))
        out = wait_until(lambda: follower not in _isr(cluster), 60,
                         f"{fault}ed follower {follower} leaving the ISR")
        report(f"{fault}: follower {follower} left the ISR {out:.1f} s after the fault "
               f"(replica.lag.time.max.ms={LAG_MS}, broker.session.timeout.ms={SESSION_MS})")
        nemesis.invoke(nemesis_op(heal, {"nodes": [follower]}))
        back = wait_until(lambda: follower in _isr(cluster), 120, f"follower {follower} rejoining the ISR")
        report(f"{heal}: follower {follower} back in the ISR {back:.1f} s after the heal")
    finally:
        nemesis.teardown()
    assert not nemesis.faulted


def test_killed_follower_drops_out_of_isr_and_rejoins(cluster: LocalCluster) -> None:
    _isr_out_and_back(cluster, KillNemesis(), "kill", "start")


def test_paused_follower_drops_out_of_isr_and_rejoins(cluster: LocalCluster) -> None:
    _isr_out_and_back(cluster, PauseNemesis(), "pause", "resume")


def test_graceful_stop_moves_leadership_cleanly(cluster: LocalCluster) -> None:
    nemesis = StopNemesis()
    nemesis.setup(cluster)
    leader = _leader(cluster)
    assert leader is not None
    try:
        t0 = time.monotonic()
        done = nemesis.invoke(nemesis_op("stop", {"nodes": [leader]}))
        stopped = time.monotonic() - t0
        assert done.value["result"] == f"stopped node {leader}"
        assert not cluster.node(leader).is_alive()
        # controlled shutdown moved leadership before the process exited
        moved = wait_until(lambda: _leader(cluster) not in (None, leader), 10, "leadership moving off")
        report(f"stop: node {leader} shut down in {stopped:.1f} s; new leader {_leader(cluster)} "
               f"seen {moved:.1f} s after exit")
        nemesis.invoke(nemesis_op("start", {"nodes": [leader]}))
        back = wait_until(lambda: leader in _isr(cluster), 120, f"node {leader} rejoining the ISR")
        report(f"stop: node {leader} back in the ISR {back:.1f} s after start")
    finally:
        nemesis.teardown()


def test_isolating_the_leader_moves_leadership(cluster: LocalCluster) -> None:
    nemesis = PartitionNemesis()
    nemesis.setup(cluster)
    leader = _leader(cluster)
    value = nemesis.plan(ScheduledFault(0.0, "partition", "isolate-leader", 10.0, 0), busy=())
    assert value["target"] == leader and value["partition"] == f"{TOPIC}/0"
    others = sorted(n for n in (1, 2, 3) if n != leader)
    assert value["grudge"] == {str(leader): others, **{str(o): [leader] for o in others}}
    assert value["leaders"] == {f"{TOPIC}/0": leader}
    try:
        nemesis.invoke(nemesis_op("partition", value))
        moved = wait_until(lambda: _leader(cluster) not in (None, leader), 60,
                           f"leadership of {TOPIC}/0 moving off isolated node {leader}")
        new = _leader(cluster)
        report(f"partition isolate-leader: leader {leader} -> {new} after {moved:.1f} s")
        nemesis.invoke(nemesis_op("heal", {"nodes": value["nodes"]}))
        back = wait_until(lambda: leader in _isr(cluster), 120, f"node {leader} rejoining the ISR")
        report(f"heal: node {leader} back in the ISR {back:.1f} s after the heal")
    finally:
        nemesis.teardown()


def test_isolating_the_controller_moves_the_controller(cluster: LocalCluster) -> None:
    nemesis = PartitionNemesis()
    nemesis.setup(cluster)
    controller = cluster.active_controller()
    assert controller is not None
    value = nemesis.plan(ScheduledFault(0.0, "partition", "isolate-controller", 10.0, 0), busy=())
    assert value["target"] == controller
    try:
        nemesis.invoke(nemesis_op("partition", value))
        moved = wait_until(lambda: cluster.active_controller() not in (None, controller), 60,
                           f"the active controller moving off isolated node {controller}")
        report(f"partition isolate-controller: controller {controller} -> "
               f"{cluster.active_controller()} after {moved:.1f} s")
    finally:
        nemesis.invoke(nemesis_op("heal", {"nodes": value["nodes"]}))
        nemesis.teardown()
    cluster.wait_healthy(120)


def test_a_held_follower_leaves_the_isr_stays_registered_and_catches_up(
        cluster: LocalCluster, tmp_path: Path) -> None:
    """The replication cut (targeted ``hold``): inter-broker traffic only, so the held
    follower lags out of the ISR while it still heartbeats to the controller, and the
    clients, through the proxies, keep writing."""
    nemesis = PartitionNemesis()
    nemesis.setup(cluster)
    follower = _follower(cluster)
    others = [n for n in (1, 2, 3) if n != follower]
    value = {"grudge": {}, "replication": to_json(complete([[follower], others])), "nodes": [1, 2, 3]}
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        workload = QueueWorkload(SPEC, cluster.bootstrap_servers(), history)
        workload.start()
        try:
            nemesis.invoke(nemesis_op("partition", value))
            out = wait_until(lambda: follower not in _isr(cluster), 60,
                             f"held follower {follower} leaving the ISR")
            shrunk = history.now()
            assert follower in cluster.registered_brokers(), \
                f"held follower {follower} is still registered and unfenced (heartbeats pass)"
            wait_until(lambda: any(at >= shrunk and kind == "ok" for at, kind, _ in _sends(path)), 60,
                       "a send acknowledged with the follower held")
            report(f"hold: follower {follower} left the ISR {out:.1f} s after the cut, registered "
                   f"brokers {sorted(cluster.registered_brokers())}, sends still acknowledged")
            nemesis.invoke(nemesis_op("heal", {"nodes": [follower]}))
            back = wait_until(lambda: follower in _isr(cluster), 120,
                              f"follower {follower} rejoining the ISR")
            report(f"release: follower {follower} back in the ISR {back:.1f} s after the heal")
        finally:
            workload.stop()
            nemesis.teardown()


def _sends(path: Path) -> list[tuple[int, str, int]]:
    """(invoke time, outcome, completion time) of each send the history has completed so far;
    the writer is unbuffered, so every line but a partial last one is whole."""
    invoked: dict[tuple[object, int], int] = {}
    done = []
    for raw in path.read_bytes().split(b"\n")[:-1]:
        op = orjson.loads(raw)
        if op["f"] != "send":
            continue
        key = (op["process"], op["value"]["value"])
        if op["type"] == "invoke":
            invoked[key] = op["time"]
        else:
            done.append((invoked[key], op["type"], op["time"]))
    return done


def test_timeout_toxic_turns_sends_into_info(cluster: LocalCluster, tmp_path: Path) -> None:
    nemesis = ToxicsNemesis()
    nemesis.setup(cluster)
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        workload = QueueWorkload(SPEC, cluster.bootstrap_servers(), history)
        workload.start()
        try:
            wait_until(lambda: any(kind == "ok" for _, kind, _ in _sends(path)), 60,
                       "a send acknowledged before the toxic")
            value = nemesis.plan(ScheduledFault(0.0, "toxics", "timeout", 10.0, 0), busy=())
            value["nodes"] = [n.id for n in cluster.nodes]  # every client link
            done = nemesis.invoke(nemesis_op("toxic", value))
            assert len(done.value["names"]) == 6
            # "on" only once every link has its toxic: a send invoked while the invoke was
            # still adding them could be acknowledged through a link without one
            wait_until(lambda: set(done.value["names"]) == {
                t.name for n in cluster.nodes for t in cluster.toxiproxy.toxics(f"n{n.id}")},
                10, "every toxic listed by Toxiproxy's API")
            on = history.now()
            # hold until sends invoked under the toxic have given up (delivery.timeout.ms)
            wait_until(lambda: any(at >= on for at, _, _ in _sends(path)),
                       SPEC.producer.delivery_timeout_ms / 1000 + 60, "a send invoked under the toxic ending")
            off = history.now()
            nemesis.invoke(nemesis_op("clear-toxics", {"nodes": value["nodes"]}))
            assert not [t for n in cluster.nodes for t in cluster.toxiproxy.toxics(f"n{n.id}")]
            wait_until(lambda: any(at >= off and kind == "ok" for at, kind, _ in _sends(path)), 60,
                       "a send acknowledged after the toxics were cleared")
        finally:
            workload.stop()
            nemesis.teardown()
    sends = _sends(path)
    before = [kind for at, kind, end in sends if at < on and end < on]
    during = [kind for at, kind, end in sends if on <= at and end <= off]
    assert "ok" in before, "no send succeeded before the toxic"
    assert during, "no send was invoked and completed while the toxic was on"
    assert set(during) == {"info"}, during
    errors = sorted({o.error or "" for o in read_history(path) if o.f == "send" and on <= o.time <= off
                     and o.type == "info"})
    report(f"toxic timeout: {len(before)} sends ok before; {len(during)} sends during the toxic all "
           f"ended info ({', '.join(errors)})")
