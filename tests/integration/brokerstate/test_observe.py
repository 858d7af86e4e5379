"""The observer on a real 3-node cluster: the LEO it reads from each replica's files is
the real one, and it follows a killed, restarted and paused broker.

One cluster for the module; each test leaves it healed (every node up, full ISR).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from confluent_kafka import KafkaError, Producer

from faultline.brokerstate.observe import KafkaSource, Observer, host_data_dirs
from faultline.brokerstate.replica_logs import replica_summary
from faultline.checkers.txn_log import PartitionLog, partition_logs
from faultline.cluster.local.cluster import LocalCluster
from tests.integration.conftest import INTEGRATION_SPEC
from tests.integration.nemeses.nemesis_helpers import report, running, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
TOPIC = INTEGRATION_SPEC.topic.name
PARTS = range(INTEGRATION_SPEC.topic.partitions)
SCHEMA = jsonschema.Draft202012Validator(json.loads(
    (Path(__file__).resolve().parents[3] / "faultline" / "schemas" / "observations.schema.json").read_text()))


@pytest.fixture(scope="module")
def cluster(local_backend: None) -> Iterator[LocalCluster]:
    with running(INTEGRATION_SPEC) as c:
        yield c


@pytest.fixture
def observer(cluster: LocalCluster, tmp_path: Path) -> Iterator[Observer]:
    obs = Observer(tmp_path / "observations.jsonl", time.monotonic_ns, TOPIC, len(PARTS),
                   KafkaSource(cluster.bootstrap_servers()), host_data_dirs(cluster), interval_s=0.2)
    with obs:
        yield obs
    for line in lines(obs):
        SCHEMA.validate(line)


def produce(cluster: LocalCluster, per_partition: int) -> dict[int, int]:
    """Produce ``per_partition`` records with acks=all to every partition; partition ->
    the offset after the last acknowledged one (the real LEO and HW)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 60_000})
    ends: dict[int, int] = {}
    errors: list[str] = []

    def done(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    for p in PARTS:
        for i in range(per_partition):
            producer.produce(TOPIC, value=str(i).encode(), partition=p, on_delivery=done)
    assert producer.flush(90) == 0 and not errors, errors[:3]
    return ends


def lines(obs: Observer) -> list[dict[str, Any]]:
    return [json.loads(line) for line in obs.path.read_bytes().splitlines()]


def latest(obs: Observer) -> dict[int, dict[str, Any]]:
    """partition -> its newest line."""
    return {line["partition"]: line for line in lines(obs)}


def settled(obs: Observer, ends: dict[int, int]) -> bool:
    """The newest round shows every replica at the real LEO, HW there too, a full ISR."""
    now = latest(obs)
    return len(now) == len(PARTS) and all(
        set(now[p]["leo"].values()) == {ends[p]} and now[p]["hw"] == ends[p]
        and now[p]["leader"] in now[p]["isr"] and sorted(now[p]["isr"]) == [1, 2, 3]
        for p in PARTS)


def test_the_observed_leo_and_hw_are_the_real_ones(cluster: LocalCluster, observer: Observer) -> None:
    ends = produce(cluster, 500)
    assert ends == dict.fromkeys(PARTS, 500)
    wait_until(lambda: settled(observer, ends), 30, "every replica observed at the real LEO and HW")
    wait_until(lambda: all(set(ln["hw_checkpoint"].values()) == {500} for ln in latest(observer).values()),
               30, "every replica's HW checkpoint at 500")
    assert all("error" not in line for line in latest(observer).values())
    assert all(type(line["hw_epoch"]) is int for line in latest(observer).values()), \
        "the HW's answer carries the leader epoch of the broker that gave it"
    t0 = time.perf_counter()
    observer.sample()
    report(f"one round, {len(PARTS)} partitions x 3 replicas: {(time.perf_counter() - t0) * 1e3:.1f} ms")


def test_a_killed_replica_stays_behind_and_catches_up(cluster: LocalCluster, observer: Observer) -> None:
    before = produce(cluster, 100)
    wait_until(lambda: settled(observer, before), 30, "the observations settling before the kill")
    victim = 3
    cluster.kill(victim)
    killed_at = time.monotonic_ns()  # the observer's clock
    after = produce(cluster, 200)
    assert all(after[p] == before[p] + 200 for p in PARTS)

    def victim_behind() -> bool:
        now = latest(observer)
        return all(victim not in now[p]["isr"] and now[p]["hw"] == after[p]
                   and (now[p]["leo"]["1"], now[p]["leo"]["2"]) == (after[p], after[p])
                   for p in PARTS)

    wait_until(victim_behind, 30, f"the ISR without n{victim} and the others' LEO at the new end")
    dead = [line for line in lines(observer) if line["time"] > killed_at]
    assert dead and all(line["leo"][str(victim)] == before[line["partition"]] for line in dead), \
        "a dead replica's LEO, read from its files, stays where it was"

    cluster.start_node(victim)
    wait_until(lambda: settled(observer, after), 60, f"n{victim} catching up and rejoining the ISR")
    cluster.wait_full_isr(TOPIC, 30)


def test_the_leo_of_a_paused_broker_is_read(cluster: LocalCluster, observer: Observer) -> None:
    before = produce(cluster, 50)
    wait_until(lambda: settled(observer, before), 30, "the observations settling before the pause")
    victim = 2
    cluster.pause(victim)
    try:
        paused_at = time.monotonic_ns()
        after = produce(cluster, 100)
        wait_until(lambda: all(ln["leo"]["1"] == after[ln["partition"]] for ln in latest(observer).values()),
                   30, "the running replica n1's LEO observed at the new end")
        during = [line for line in lines(observer) if line["time"] > paused_at]
        assert during and all(line["leo"][str(victim)] == before[line["partition"]] for line in during), \
            "the paused replica's LEO, read from its files, stays where it stopped"
    finally:
        cluster.resume(victim)
    wait_until(lambda: settled(observer, after), 60, f"n{victim} catching up after the pause")
    cluster.wait_full_isr(TOPIC, 30)


def test_an_open_transaction_shows_in_the_lso_and_the_log_alike(cluster: LocalCluster,
                                                                tmp_path: Path) -> None:
    """A transaction's records written and acknowledged but not yet ended: the brokers'
    last stable offset (read_committed) stops at its first record below the HW, and the
    replica logs hold it open from there; once aborted, the LSO meets the HW and the logs
    end it with an abort marker. The two witnesses the txn checker holds to each other."""
    obs = Observer(tmp_path / "observations.jsonl", time.monotonic_ns, TOPIC, len(PARTS),
                   KafkaSource(cluster.bootstrap_servers()), host_data_dirs(cluster), lso=True)
    before = produce(cluster, 1)  # partition -> the offset the transaction's first record takes
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "transactional.id": "it-open"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(TOPIC, value=str(i).encode(), partition=0)
    assert producer.flush(30) == 0

    def logs() -> dict[int, PartitionLog]:
        summaries = [{**s, "node": n.id} for n in cluster.nodes
                     if (s := replica_summary(n.data_dir, TOPIC, 0)) is not None]
        return partition_logs(summaries, TOPIC, INTEGRATION_SPEC.topic.replication_factor)

    wait_until(lambda: (obs.sample()[0]["hw"] or 0) >= before[0] + 10, 30, "the HW past the open records")
    line = obs.sample()[0]
    assert line["lso"] == before[0] < line["hw"], line
    log = logs()[0]
    assert log.last_stable_offset == before[0] and list(log.open.values()) == [before[0]]
    producer.abort_transaction(30)
    wait_until(lambda: (ln := obs.sample()[0])["lso"] == ln["hw"], 30, "the LSO at the HW after the abort")
    wait_until(lambda: not logs()[0].open, 30, "the abort marker in the log")
    assert logs()[0].marker_at(before[0]) == "abort"
