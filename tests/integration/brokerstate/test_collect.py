"""collect_broker_state on a real cluster: a leader is killed and comes back; the decoded
metadata log must show the election, the fencing and unfencing, and the replicas must
agree below the HW. One cluster for the module."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from faultline.brokerstate.collect import collect_broker_state
from faultline.checkers.whitebox import check_replicas_agree, final_isr, leader_changes
from faultline.cluster.local.cluster import LocalCluster
from tests.integration.conftest import INTEGRATION_SPEC
from tests.integration.nemeses.nemesis_helpers import partition_state, running, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SPEC = replace(INTEGRATION_SPEC, name="broker-state")
RECORDS = 3000


@dataclass(frozen=True, slots=True)
class Collected:
    run_dir: Path
    old_leader: int
    new_leader: int
    metadata: list[dict[str, Any]]
    replicas: list[dict[str, Any]]
    hw: dict[int, int]
    #: run times (ns since test.json's start_wall_ms, metadata.jsonl's clock) taken just
    #: before the kill and the restart, and once the collection was done
    killed_at: int
    restarted_at: int
    collected_at: int


def _produce(cluster: LocalCluster, start: int, n: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})
    failed: list[str] = []
    for i in range(start, start + n):
        producer.produce(SPEC.topic.name, value=str(i).encode(), partition=i % SPEC.topic.partitions,
                         on_delivery=lambda err, _msg: failed.append(str(err)) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed[:3]


@pytest.fixture(scope="module")
def collected(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collected]:
    spec = replace(SPEC, start_wall_ms=time.time_ns() // 1_000_000)
    run_dir = tmp_path_factory.mktemp("run")

    def now() -> int:
        return time.time_ns() - spec.start_wall_ms * 1_000_000

    with running(spec) as cluster:
        topic = spec.topic.name
        _produce(cluster, 0, RECORDS)
        old = partition_state(cluster, topic).leader
        assert old is not None
        killed_at = now()
        cluster.kill(old)
        wait_until(lambda: cluster.leaders(topic)[0].leader not in (None, old), 60, "a new leader of p0")
        new = cluster.leaders(topic)[0].leader
        assert new is not None
        _produce(cluster, RECORDS, RECORDS)
        restarted_at = now()
        cluster.start_node(old)
        cluster.wait_full_isr(topic, 90)
        errors = collect_broker_state(cluster, spec, run_dir)
        collected_at = now()
        assert errors == []
        assert orjson.loads((run_dir / "cluster.json").read_bytes())["broker_state_errors"] == []
        hw = {p: len(range(p, 2 * RECORDS, spec.topic.partitions)) for p in range(spec.topic.partitions)}
    yield Collected(run_dir, old, new, _lines(run_dir / "metadata.jsonl"),
                    _lines(run_dir / "replicas.jsonl"), hw, killed_at, restarted_at, collected_at)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_the_election_is_in_the_metadata_log(collected: Collected) -> None:
    changes = [c for c in leader_changes(collected.metadata, SPEC.topic.name)
               if c["partition"] == 0 and c["from"] == collected.old_leader]
    assert changes, "no leader change of p0 away from the killed leader"
    first = changes[0]
    assert first["to"] == collected.new_leader
    assert collected.new_leader in first["isr_before"]
    assert first["kind"] == "isr"
    created = next(m for m in collected.metadata
                   if m["type"] == "partition" and m.get("topic") == SPEC.topic.name and m["partition"] == 0)
    assert isinstance(first["epoch"], int) and isinstance(created["leader_epoch"], int)
    assert first["epoch"] > created["leader_epoch"]


def test_the_killed_broker_was_fenced_then_unfenced(collected: Collected) -> None:
    fencing = [m["fenced"] for m in collected.metadata
               if m.get("broker") == collected.old_leader and m.get("fenced") is not None]
    assert True in fencing
    assert False in fencing[fencing.index(True):], "never unfenced after being fenced"


def test_records_are_in_log_order_with_run_times(collected: Collected) -> None:
    """Each record's time is when it happened on the run's clock: the topic is created
    after the run started and before the kill, the old leader is fenced after the kill,
    unfenced after the restart, and nothing is later than the collection (the controller
    appends no-op records all along)."""
    c = collected
    offsets = [m["offset"] for m in c.metadata]
    assert offsets == sorted(offsets)
    times = [m["time"] for m in c.metadata]
    assert all(isinstance(t, int) for t in times)
    assert max(times) <= c.collected_at
    created = next(m for m in c.metadata if m["type"] == "topic" and m.get("topic") == SPEC.topic.name)
    assert 0 <= created["time"] < c.killed_at, (created, c.killed_at)
    broker = [m for m in c.metadata if m.get("broker") == c.old_leader and m.get("fenced") is not None]
    fenced = next(m for m in broker if m["fenced"] is True)
    unfenced = next(m for m in broker if m["fenced"] is False and m["offset"] > fenced["offset"])
    assert c.killed_at <= fenced["time"] <= c.restarted_at, (fenced, c.killed_at, c.restarted_at)
    assert c.restarted_at <= unfenced["time"] <= c.collected_at, (unfenced, c.restarted_at)


def test_replicas_agree_below_the_hw(collected: Collected) -> None:
    assert len(collected.replicas) == SPEC.topic.partitions * SPEC.topic.replication_factor
    for r in collected.replicas:
        assert r["log_end_offset"] == collected.hw[int(r["partition"])]
    isr = final_isr(collected.metadata, SPEC.topic.name)  # every replica in it: compared to the HW
    assert all(len(isr[p]) == SPEC.topic.replication_factor for p in range(SPEC.topic.partitions)), isr
    inv = check_replicas_agree(collected.replicas, SPEC.topic.name, collected.hw, loss_permitted=set(),
                               isr=isr)
    assert inv.checked > 0
    assert inv.violations == 0, inv.examples
