"""wipe on a real cluster (a replica comes back empty and refills), then a whole
nemesis package run with every family, after which nothing may be left: no iptables
rule, no paused process, no toxic, no node down.

Both destroy state, so this module has a cluster of its own; the package run goes
last and is cut short while faults are still held, the case a Ctrl-C makes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from faultline.cluster.host import netns
from faultline.cluster.local.cluster import LocalCluster
from faultline.faults import FAMILIES
from faultline.history import HistoryWriter, read_history
from faultline.nemeses.lose_unflushed import end_offset
from faultline.nemeses.package import NemesisPackage
from faultline.nemeses.wipe import WipeNemesis
from faultline.spec import FAULTS, KafkaSpec, NemesisSpec, TestSpec, TopicSpec
from tests.integration.nemeses.nemesis_helpers import nemesis_op, partition_state, report, running, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SPEC = TestSpec(
    name="nemesis-wipe",
    seed=7,
    kafka=KafkaSpec(heap_mb=384, replica_lag_time_max_ms=3000, broker_session_timeout_ms=6000),
    topic=TopicSpec(partitions=1, replication_factor=3, min_insync_replicas=2),
)
TOPIC = SPEC.topic.name
RECORDS = 3000
HEALS = frozenset(a.heal for f in FAMILIES.values() for a in f.all_actions)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with running(SPEC) as c:
        yield c


def _produce(cluster: LocalCluster, n: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all", "linger.ms": 5})
    errors: list[str] = []
    for i in range(n):
        producer.produce(TOPIC, value=str(i).encode(), partition=0,
                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0 and not errors, errors[:3]


def test_wipe_brings_a_replica_back_empty_and_it_refills(cluster: LocalCluster) -> None:
    _produce(cluster, RECORDS)
    state = partition_state(cluster, TOPIC)
    follower = next(n for n in sorted(state.isr) if n != state.leader)
    replica_dir = cluster.node(follower).data_dir / f"{TOPIC}-0"
    assert end_offset(replica_dir) == RECORDS

    nemesis = WipeNemesis()
    nemesis.setup(cluster)
    try:
        done = nemesis.invoke(nemesis_op("wipe", {"nodes": [follower]}))
        assert "deleted its partition data" in done.value["result"]
        assert not replica_dir.exists(), "the wiped replica's log is still on disk"
        out = wait_until(lambda: follower not in partition_state(cluster, TOPIC).isr, 60,
                         f"wiped node {follower} leaving the ISR")
        nemesis.invoke(nemesis_op("start", {"nodes": [follower]}))
        t0 = time.monotonic()
        wait_until(replica_dir.exists, 60, f"node {follower} recreating its replica of {TOPIC}-0")
        recreated = time.monotonic() - t0
        wait_until(lambda: follower in partition_state(cluster, TOPIC).isr, 120,
                   f"wiped node {follower} rejoining the ISR")
        back = time.monotonic() - t0
        refilled = end_offset(replica_dir)
        report(f"wipe: node {follower} left the ISR {out:.1f} s after the wipe; its {TOPIC}-0 log "
               f"was gone; after start it recreated the replica within {recreated:.1f} s, was back "
               f"in the ISR {back:.1f} s after start, its log refilled to {refilled} of {RECORDS}")
        assert refilled == RECORDS
    finally:
        nemesis.teardown()
    cluster.wait_full_isr(TOPIC, 120)


def _chain_rules(cluster: LocalCluster) -> dict[int, list[str]]:
    out = {}
    for node in cluster.nodes:
        text = "\n".join(netns.run(["ip", "netns", "exec", node.namespace, "iptables", "-S", chain])
                       for chain in (netns.CHAIN, netns.LINKS_CHAIN))
        out[node.id] = [ln for ln in text.splitlines() if ln and not ln.startswith("-N")]
    return out


def _stopped_pids(cluster: LocalCluster) -> list[int]:
    stopped = []
    for node in cluster.nodes:
        pid = node.pid
        if pid is None:
            continue
        status = Path(f"/proc/{pid}/status").read_text()
        state = next(ln for ln in status.splitlines() if ln.startswith("State:"))
        if "T" in state.split()[1]:
            stopped.append(pid)
    return stopped


def test_nothing_is_left_after_a_run_cut_short(cluster: LocalCluster, tmp_path: Path) -> None:
    """The package runs every family; once 20 s have passed, it is cut short (heal_all from
    another thread, as on Ctrl-C) at a moment a fault is held."""
    spec = TestSpec(name="nemesis-leftovers", seed=SPEC.seed, time_limit_s=60, kafka=SPEC.kafka,
                    topic=SPEC.topic, nemesis=NemesisSpec(faults=FAULTS, interval_s=3.0, max_concurrent=2))
    report(f"package run: seed {spec.seed}")
    package = NemesisPackage.from_spec(spec, cluster)
    package.setup()
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        runner = threading.Thread(target=package.run, args=(time.monotonic() + 60, history))
        started = time.monotonic()
        runner.start()
        try:
            wait_until(lambda: time.monotonic() - started > 20 and bool(package.active), 40,
                       "a fault held 20 s into the run", every=0.02)
        finally:
            before = len(path.read_bytes().splitlines())  # the history lines written before the cut
            held = package.active
            package.heal_all(history)
            runner.join(60)
        assert not runner.is_alive(), "the package kept running after heal_all"
    ops = list(read_history(path))
    actions = sorted({o.f for o in ops})
    errors = [f"{o.f}: {o.error}" for o in ops if o.error]
    report(f"package run: seed {spec.seed}, {len(ops) // 2} nemesis actions ({', '.join(actions)}); "
           f"cut short holding {[f'{s.family}/{s.kind}' for s in held]}; errors: {errors or 'none'}")
    assert held, "the run was cut short with no fault held"
    assert any(o.f in HEALS for o in ops[before:]), "heal_all healed nothing"
    assert ops and all(o.process == "nemesis" and o.type == "info" for o in ops)
    # every fault that took effect was healed, the held ones by heal_all
    faults = [o for o in ops[1::2] if o.f not in HEALS]
    heals = [o for o in ops[1::2] if o.f in HEALS]
    assert len(heals) == len([f for f in faults if f.value.get("result") != "skipped"])

    assert _chain_rules(cluster) == {n.id: [] for n in cluster.nodes}
    assert _stopped_pids(cluster) == []
    assert all(n.is_alive() for n in cluster.nodes)
    assert not [t for n in cluster.nodes for t in cluster.toxiproxy.toxics(f"n{n.id}")]
    assert package.active == []
    cluster.wait_healthy(120)
    cluster.wait_full_isr(TOPIC, 180)
