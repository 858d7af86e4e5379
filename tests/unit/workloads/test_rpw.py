"""Read-process-write (``transactions.reads``): the txn workload's producer with its
processor's consumer, against fakes of confluent-kafka's Producer and Consumer: what a
transaction reads and sends to the transaction, what it journals, and what an abort or an
unknown end does to the consumer."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, TopicPartition

from faultline.history import Op
from faultline.spec import TransactionSpec
from faultline.workloads import rpw
from tests.unit.workloads.fakes import FakeMessage
from tests.unit.workloads.test_txn import SPEC, FakeProducer, Scene, error, run

READS = [FakeMessage(0, 5, b"17"), FakeMessage(1, 3, b"18"), FakeMessage(0, 6, b"19")]


class FakeConsumer:
    """A subscribed consumer whose first ``consume`` returns :data:`READS`, then nothing."""

    instances: ClassVar[list[FakeConsumer]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.batches = [READS]
        self.topics: list[str] = []
        self.seeks: list[tuple[int, int]] = []
        self.closed = False
        FakeConsumer.instances.append(self)

    def subscribe(self, topics: list[str]) -> None:
        self.topics = topics

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        return self.batches.pop(0)[:num_messages] if self.batches else []

    def consumer_group_metadata(self) -> str:
        return f"metadata of {self.conf['client.id']}"

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append((tp.partition, tp.offset))

    def close(self) -> None:
        self.closed = True


class OffsetsProducer(FakeProducer):
    """A fake producer that keeps what ``send_offsets_to_transaction`` got."""

    sent: ClassVar[list[tuple[list[tuple[int, int]], Any]]] = []

    def send_offsets_to_transaction(self, offsets: list[TopicPartition], metadata: Any,
                                    timeout: float) -> None:
        OffsetsProducer.sent.append(([(tp.partition, tp.offset) for tp in offsets], metadata))


def run_rpw(tmp_path: Path, scene: Scene, monkeypatch: pytest.MonkeyPatch, reads: int = 5,
            abort_probability: float = 0.0) -> list[Op]:
    FakeConsumer.instances, OffsetsProducer.sent = [], []
    monkeypatch.setattr(rpw, "Consumer", FakeConsumer)
    spec = replace(SPEC, transactions=TransactionSpec(sends=2, abort_probability=abort_probability,
                                                      reads=reads))
    return run(tmp_path, scene, monkeypatch, spec, OffsetsProducer)


def test_a_transaction_reads_sends_the_positions_after_what_it_read_and_journals_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = run_rpw(tmp_path, [None], monkeypatch)
    assert [op.type for op in ops] == ["invoke", "ok"]
    assert "reads" not in ops[0].value
    assert ops[1].value["reads"] == [[0, 5, 17], [1, 3, 18], [0, 6, 19]]
    assert ops[1].value["group_offsets"] == [[0, 7], [1, 4]]
    assert OffsetsProducer.sent == [([(0, 7), (1, 4)], "metadata of faultline-p0-rpw")]
    (consumer,) = FakeConsumer.instances
    assert (consumer.conf["group.id"], consumer.conf["isolation.level"]) == (
        "faultline-queue-rpw", "read_committed")
    assert consumer.topics == [SPEC.topic.name] and consumer.closed


def test_a_transaction_reads_at_most_as_many_records_as_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = run_rpw(tmp_path, [None], monkeypatch, reads=2)
    assert ops[1].value["reads"] == [[0, 5, 17], [1, 3, 18]]


def test_an_aborted_transaction_rewinds_to_the_first_record_it_read_of_each_partition(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = run_rpw(tmp_path, [None], monkeypatch, abort_probability=1.0)
    assert [op.type for op in ops] == ["invoke", "fail"]
    assert FakeConsumer.instances[0].seeks == [(0, 5), (1, 3)]


def test_an_unknown_end_retires_the_consumer_with_the_producer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = run_rpw(tmp_path, [error(KafkaError._FATAL, fatal=True), None], monkeypatch)
    assert [(op.type, op.process) for op in ops] == [("invoke", 0), ("info", 0), ("invoke", 1), ("ok", 1)]
    first, second = FakeConsumer.instances
    assert first.closed and first.conf["client.id"] == "faultline-p0-rpw"
    assert second.conf["client.id"] == "faultline-p1-rpw" and second.seeks == []


def test_without_reads_no_consumer_is_made_and_nothing_more_is_journaled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = run_rpw(tmp_path, [None], monkeypatch, reads=0)
    assert FakeConsumer.instances == [] and OffsetsProducer.sent == []
    assert "reads" not in ops[1].value and "group_offsets" not in ops[1].value
