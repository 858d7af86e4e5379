"""lose-unflushed on a real broker: without forced flushes a power loss shortens the
log; with ``log.flush.interval.messages=1`` it changes nothing.

One node and a replication factor of 1, so nothing refills the cut log and Kafka's own
log end offset after the restart shows exactly what the disk kept. Each case destroys
state, so each gets a fresh cluster. The recovery-point checkpoint is written every
second (``log.flush.offset.checkpoint.interval.ms``) instead of every minute, so the
flushes of the second case are recorded before the kill.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from faultline.cluster.local.cluster import LocalCluster
from faultline.nemeses.lose_unflushed import CHECKPOINT, LoseUnflushedNemesis, read_checkpoint
from faultline.spec import KafkaSpec, TestSpec, TopicSpec
from tests.integration.nemeses.nemesis_helpers import nemesis_op, report, running, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

RECORDS = 2000


def _spec(flush_messages: int | None) -> TestSpec:
    return TestSpec(
        name="nemesis-lose-unflushed",
        kafka=KafkaSpec(nodes=1, heap_mb=384, log_flush_interval_messages=flush_messages,
                        broker_config={"log.flush.offset.checkpoint.interval.ms": "1000"}),
        topic=TopicSpec(partitions=1, replication_factor=1, min_insync_replicas=1),
    )


def _produce(cluster: LocalCluster, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                         "linger.ms": 5, "batch.num.messages": 50})
    errors: list[str] = []
    for i in range(n):
        producer.produce(topic, value=str(i).encode(), partition=0,
                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0 and not errors, errors[:3]


def _end_offsets(cluster: LocalCluster, topic: str) -> tuple[int, int]:
    """(log start, high watermark) of partition 0 as the broker reports it."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(),
                         "group.id": f"fl-{uuid.uuid4().hex}", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


@pytest.mark.parametrize("flush_messages", [None, 1], ids=["default-flush", "flush-every-message"])
def test_lose_unflushed(flush_messages: int | None) -> None:
    spec = _spec(flush_messages)
    topic = spec.topic.name
    with running(spec) as cluster:
        _produce(cluster, topic, RECORDS)
        assert _end_offsets(cluster, topic) == (0, RECORDS)
        checkpoint = cluster.node(1).data_dir / CHECKPOINT
        expect_rp = RECORDS if flush_messages == 1 else 0
        wait_until(lambda: read_checkpoint(checkpoint).get((topic, 0)) == expect_rp, 30,
                   f"the recovery point checkpoint of {topic}/0 reaching {expect_rp}")

        nemesis = LoseUnflushedNemesis()
        nemesis.setup(cluster)
        try:
            done = nemesis.invoke(nemesis_op("lose-unflushed", {"nodes": [1]}))
            cut = done.value["truncated"][f"{topic}/0"]
            assert cut["old_end"] == RECORDS and cut["recovery_point"] == expect_rp
            nemesis.invoke(nemesis_op("start", {"nodes": [1]}))
        finally:
            nemesis.teardown()
        cluster.wait_healthy(120)
        _, high = wait_until_answer(cluster, topic)
        report(f"lose-unflushed, log.flush.interval.messages={flush_messages}: log end {RECORDS} "
               f"before the kill, recovery point {cut['recovery_point']}, cut to {cut['new_end']} "
               f"on disk, Kafka reports log end {high} after the restart")
        if flush_messages == 1:
            assert cut["new_end"] == RECORDS and cut["bytes_removed"] == 0
            assert high == RECORDS
        else:
            assert cut["new_end"] < RECORDS
            assert high == cut["new_end"] < RECORDS


def wait_until_answer(cluster: LocalCluster, topic: str) -> tuple[int, int]:
    box: list[tuple[int, int]] = []

    def answered() -> bool:
        try:
            box.append(_end_offsets(cluster, topic))
        except Exception:  # the partition may still be loading
            return False
        return True

    wait_until(answered, 60, f"the broker answering offsets for {topic}/0")
    return box[-1]
