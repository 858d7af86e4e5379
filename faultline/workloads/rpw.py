"""Read-process-write: the consumer a transactional producer owns when ``transactions.reads`` > 0.

Each :class:`~faultline.workloads.txn.TxnProducer` then holds a :class:`Processor`: a
consumer subscribed to the test topic in the group ``<group id>-rpw`` (``read_committed``,
no auto commit). Each transaction polls up to ``transactions.reads`` records, sends its
values, and sends the positions one past what it read to the transaction with the group's
metadata (``send_offsets_to_transaction``: KIP-98, and KIP-447's fencing of a member of an
older generation); an aborted transaction's records are read again, from the first it read
of each partition. With ``transactions.reads`` 0 the processor does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from faultline.spec import TestSpec
from faultline.workloads.clients import (
    POLL_TIMEOUT_S,
    close_quietly,
    consumer_config,
    decode_value,
    rdkafka_log,
)

#: A record read: ``(partition, offset, value)``, its value as the history holds it.
Read = tuple[int, int, int | str | None]


@dataclass(slots=True, eq=False)
class Processor:
    """The consuming half of one read-process-write processor; see the module docstring.
    Not thread-safe: its producer's thread alone calls it."""

    spec: TestSpec
    bootstrap: str
    consumer: Consumer | None = None

    def open(self, process: int) -> None:
        """Subscribe a fresh consumer for ``process``, after closing (so leaving the group
        with) the one before; nothing with ``transactions.reads`` 0."""
        self.close()
        if self.spec.transactions.reads == 0:
            return
        conf = consumer_config(self.spec, self.bootstrap, f"faultline-p{process}-rpw")
        conf.update({"group.id": self.spec.rpw_group_id, "isolation.level": "read_committed",
                     "enable.auto.commit": False})
        self.consumer = Consumer(conf)
        self.consumer.subscribe([self.spec.topic.name])

    def read(self) -> list[Read] | None:
        """Poll up to ``transactions.reads`` records (None when off); raises KafkaException."""
        if self.consumer is None:
            return None
        out: list[Read] = []
        for msg in self.consumer.consume(self.spec.transactions.reads, POLL_TIMEOUT_S):
            err, partition, offset = msg.error(), msg.partition(), msg.offset()
            if err is not None or partition is None or offset is None:
                rdkafka_log.warning("read-process-write consumer: %s", err)
                continue
            out.append((partition, offset, decode_value(msg.value())))
        return out

    def send_offsets(self, producer: Producer, reads: list[Read], timeout: float) -> list[tuple[int, int]]:
        """Send the positions one past the last of ``reads`` of each partition to
        ``producer``'s open transaction with the group's metadata, waiting at most ``timeout``
        seconds; the positions, as ``(partition, offset)`` (none without reads); raises
        KafkaException."""
        if self.consumer is None or not reads:
            return []
        last: dict[int, int] = {}
        for partition, offset, _ in reads:
            last[partition] = max(last.get(partition, -1), offset)
        positions = sorted((p, o + 1) for p, o in last.items())
        producer.send_offsets_to_transaction(
            [TopicPartition(self.spec.topic.name, p, o) for p, o in positions],
            self.consumer.consumer_group_metadata(), timeout)
        return positions

    def rewind(self, reads: list[Read]) -> None:
        """After an abort: seek each partition of ``reads`` back to the first record read
        there, where the consumer still holds it (a new owner starts at the group's
        committed offset anyway)."""
        if self.consumer is None:
            return
        first: dict[int, int] = {}
        for partition, offset, _ in reads:
            first[partition] = min(first.get(partition, offset), offset)
        for partition, offset in first.items():
            try:
                self.consumer.seek(TopicPartition(self.spec.topic.name, partition, offset))
            except KafkaException as e:
                rdkafka_log.warning("read-process-write consumer: rewinding partition %s: %s",
                                    partition, e)

    def close(self) -> None:
        """Close the consumer, leaving the group; idempotent."""
        if self.consumer is not None:
            close_quietly(self.consumer)
            self.consumer = None
