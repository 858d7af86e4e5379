"""The queue workload's clients against fakes of confluent-kafka's Producer and Consumer.

Each client's ``run`` is called on the test's own thread: the fake broker decides each
send's delivery report and sets ``stop`` once the scene it stages has played out, so
every test is deterministic and nothing waits on a clock. What the clients journal goes
to a real HistoryWriter and is read back through the history reader (its pairing and
retirement rules) and the history schema.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException

from faultline.history import HistoryWriter, Op, read_history
from faultline.spec import TestSpec
from faultline.workloads import queue
from faultline.workloads.clients import MAX_OUTSTANDING, ClientLog, Journal, ProcessIds, Values
from faultline.workloads.queue import QueueConsumer, QueueProducer
from tests.schemas import validator
from tests.unit.workloads.fakes import FakeMessage

SPEC = TestSpec()
TOPIC = SPEC.topic.name
HOLD = "hold"  # a decision: no delivery report yet
#: (the instance, partition, value) -> HOLD, None for success, or an error name.
Decide = Callable[["FakeProducer", int, int], str | None]


class Broker:
    """Decides every send's report; ``stop_when`` is checked after each poll."""

    def __init__(self, decide: Decide, stop_when: Callable[[Broker], bool]) -> None:
        self.decide, self.stop_when = decide, stop_when
        self.stop = threading.Event()
        self.producers: list[FakeProducer] = []
        self.offsets = [0] * SPEC.topic.partitions
        self.queued = [0] * SPEC.topic.partitions  # sends without a report, per partition
        self.max_queued = [0] * SPEC.topic.partitions
        self.delivered = 0


class FakeProducer:
    """confluent_kafka.Producer as the workload uses it: produce() queues, poll() reports."""

    def __init__(self, broker: Broker, conf: dict[str, Any]) -> None:
        self.broker, self.conf = broker, conf
        self.queue: list[tuple[int, bytes, Callable[[KafkaError | None, FakeMessage], None]]] = []
        self.purged = False
        self.produced = 0
        broker.producers.append(self)

    def produce(self, topic: str, value: bytes, partition: int,
                on_delivery: Callable[[KafkaError | None, FakeMessage], None]) -> None:
        assert topic == TOPIC
        self.queue.append((partition, value, on_delivery))
        self.produced += 1
        b = self.broker
        b.queued[partition] += 1
        b.max_queued[partition] = max(b.max_queued[partition], b.queued[partition])

    def poll(self, timeout: float) -> int:
        b = self.broker
        keep, served = [], 0
        for partition, value, cb in self.queue:
            decision = "_PURGE_QUEUE" if self.purged else b.decide(self, partition, int(value))
            if decision == HOLD:
                keep.append((partition, value, cb))
                continue
            served += 1
            b.delivered += 1
            b.queued[partition] -= 1
            if decision is None:
                cb(None, FakeMessage(partition, b.offsets[partition], value))
                b.offsets[partition] += 1
            else:
                cb(KafkaError(getattr(KafkaError, decision)), FakeMessage(partition, -1, value))
        self.queue = keep
        if b.stop_when(b):
            b.stop.set()
        return served

    def flush(self, timeout: float) -> int:
        self.poll(timeout)
        return len(self)

    def purge(self) -> None:
        self.purged = True

    def __len__(self) -> int:
        return len(self.queue)


def validate_each_kind(ops: list[Op]) -> None:
    """Hold the first op of each (process, type, f, error) to the history schema (all of
    them would take seconds: the ops of one kind differ only in their numbers)."""
    check, seen = validator("history.schema.json"), set()
    for op in ops:
        kind = (op.process, op.type, op.f, op.error)
        if kind not in seen:
            seen.add(kind)
            check.validate(op.to_dict())


def run_producer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, broker: Broker,
                 spec: TestSpec = SPEC, fake: type[FakeProducer] = FakeProducer,
                 client_log: bool = False) -> tuple[QueueProducer, list[Op]]:
    """Producer 0 (later processes from 5 on) run against ``broker`` until it stops;
    with ``client_log``, its client library's lines go to ``tmp_path/client-log.jsonl``."""
    monkeypatch.setattr(queue, "Producer", lambda conf: fake(broker, conf))
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        log = ClientLog(tmp_path / "client-log.jsonl", history.now) if client_log else None
        producer = QueueProducer(spec, "fake:9092", Journal(history), 0, ProcessIds(5), Values(),
                                 client_log=log)
        producer.run(broker.stop)
        if log is not None:
            log.close()
    ops = list(read_history(path))
    validate_each_kind(ops)
    return producer, ops


@pytest.mark.parametrize(("retries", "error"), [
    (SPEC.producer.retries, "_MSG_TIMED_OUT"),
    (SPEC.producer.retries, "NOT_ENOUGH_REPLICAS"),
    (0, "NOT_ENOUGH_REPLICAS"),  # an uncounted re-send may have gone before it
])
def test_an_indeterminate_send_retires_the_producer_instance(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, retries: int, error: str) -> None:
    """Value 3's report is ``error``, which makes it ``info``: the next sends come from a
    fresh instance under a new process number, while the retired instance's outstanding
    sends (held until then) complete under the old one. (A refused send, the one way to
    ``fail``, retires nothing: the test below.)"""
    def decide(p: FakeProducer, partition: int, value: int) -> str | None:
        if value == 3:
            return error
        successor = broker.producers[1:]
        if (p is broker.producers[0] and not broker.stop.is_set()
                and (not successor or not successor[0].produced)):
            return HOLD  # in flight until the successor has sent
        return None

    # Ends also when sends pile up with no successor, so a producer never retired fails.
    broker = Broker(decide, lambda b: b.delivered >= 600 or sum(b.queued) >= 1000)
    spec = replace(SPEC, producer=replace(SPEC.producer, retries=retries,
                                          enable_idempotence=retries > 0))
    producer, ops = run_producer(monkeypatch, tmp_path, broker, spec)

    (report,) = [op for op in ops if op.type != "invoke" and op.value["value"] == 3]
    assert (report.process, report.type, report.error) == (0, "info", error)
    assert all(op.type == "ok" for op in ops if op.type != "invoke" and op.value["value"] != 3)
    assert [p.conf["client.id"] for p in broker.producers] == ["faultline-p0", "faultline-p5"]
    assert (producer.retired, producer.counts.info) == (1, 1)
    first_new = next(i for i, op in enumerate(ops) if op.process == 5)
    later_old = [op for op in ops[first_new:] if op.process == 0]
    assert later_old, "the retired instance's held sends complete after its successor started"
    assert all(op.type == "ok" for op in later_old)
    old_values = {op.value["value"] for op in ops if op.process == 0 and op.type == "invoke"}
    new_values = {op.value["value"] for op in ops if op.process == 5 and op.type == "invoke"}
    assert max(old_values) < min(new_values)
    assert len(ops) == 2 * (len(old_values) + len(new_values))  # every send completed


def test_a_partition_without_a_leader_holds_only_its_share_of_the_budget(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Partition 0's sends get no report (its leader is gone) until the run stops: it
    holds MAX_OUTSTANDING / partitions of them, and sends to the others go on."""
    def decide(p: FakeProducer, partition: int, value: int) -> str | None:
        if partition == 0:
            return "_MSG_TIMED_OUT" if broker.stop.is_set() else HOLD
        return None

    share = MAX_OUTSTANDING // SPEC.topic.partitions
    broker = Broker(decide, lambda b: b.offsets[1] + b.offsets[2] >= 4 * share)
    producer, ops = run_producer(monkeypatch, tmp_path, broker)

    invoked = [sum(1 for op in ops if op.type == "invoke" and op.value["partition"] == p)
               for p in range(SPEC.topic.partitions)]
    assert broker.max_queued[0] == invoked[0] == share
    assert min(invoked[1:]) > share
    reports = [op for op in ops if op.type != "invoke" and op.value["partition"] == 0]
    assert len(reports) == share and {(op.type, op.error) for op in reports} == {
        ("info", "_MSG_TIMED_OUT")}
    assert producer.counts.info == share


def test_a_refused_produce_fails_the_send_and_frees_its_room(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """produce() raising BufferError: the send is ``fail`` _QUEUE_FULL, the instance is
    kept, and the refused send does not count against the partition's budget."""
    broker = Broker(lambda p, partition, value: None, lambda b: b.delivered >= MAX_OUTSTANDING)

    class Refusing(FakeProducer):
        def produce(self, topic: str, value: bytes, partition: int,
                    on_delivery: Callable[[KafkaError | None, FakeMessage], None]) -> None:
            if partition == 2:
                raise BufferError("queue full")
            super().produce(topic, value, partition, on_delivery)

    producer, ops = run_producer(monkeypatch, tmp_path, broker, fake=Refusing)

    refused = [op for op in ops if op.type != "invoke" and op.value["partition"] == 2]
    assert len(refused) > MAX_OUTSTANDING // SPEC.topic.partitions
    assert {(op.process, op.type, op.error) for op in refused} == {(0, "fail", "_QUEUE_FULL")}
    assert len(broker.producers) == 1 and producer.counts.fail == len(refused)


def test_a_fatal_error_raised_by_poll_retires_the_instance(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """librdkafka raises a fatal idempotence error (OUT_OF_ORDER_SEQUENCE_NUMBER after a
    loss) from poll(): the instance is retired, its held sends complete ``info`` _FATAL
    under its process, and a fresh instance goes on sending; the run does not die of it."""
    def decide(p: FakeProducer, partition: int, value: int) -> str | None:
        if p is broker.producers[0]:
            return "_FATAL" if p.raised else HOLD
        return None

    broker = Broker(decide, lambda b: b.delivered >= 300)

    class Fatal(FakeProducer):
        raised = False

        def poll(self, timeout: float) -> int:
            if self is self.broker.producers[0] and self.produced and not self.raised:
                self.raised = True
                raise KafkaException(KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True))
            return super().poll(timeout)

    producer, ops = run_producer(monkeypatch, tmp_path, broker, fake=Fatal)

    first = [op for op in ops if op.process == 0 and op.type != "invoke"]
    assert first and {(op.type, op.error) for op in first} == {("info", "_FATAL")}
    assert len(broker.producers) == 2 and producer.retired == 1
    assert any(op.process == 5 and op.type == "ok" for op in ops)


def test_an_ack_under_acks_0_carries_no_offset(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With acks=0 the broker answers nothing and librdkafka numbers a batch's messages
    up from an invalid base offset (``rd_kafka_msgq_set_metadata``: -1001, -1000, ...),
    so from the 1002nd message of a batch on a report names offset 0, 1, ...: no offset
    of an acks=0 report is the record's, and every ack is journaled with offset -1."""
    class Unanswered(FakeProducer):
        """Reports nothing until partition 0 has 1100 sends queued, then each partition's
        queue as one batch, numbered as librdkafka numbers an unanswered one."""

        def poll(self, timeout: float) -> int:
            if sum(1 for q in self.queue if q[0] == 0) < 1100 and not self.purged:
                return 0
            served, self.queue = self.queue, []
            batch_index = [0] * SPEC.topic.partitions
            for partition, value, cb in served:
                cb(None, FakeMessage(partition, -1001 + batch_index[partition], value))
                batch_index[partition] += 1
            self.broker.delivered += len(served)
            self.broker.stop.set()
            return len(served)

    broker = Broker(lambda p, partition, value: None, lambda b: False)
    spec = replace(SPEC, producer=replace(SPEC.producer, acks="0", enable_idempotence=False))
    _, ops = run_producer(monkeypatch, tmp_path, broker, spec, fake=Unanswered)

    acks = [op for op in ops if op.type == "ok"]
    assert len(acks) == broker.delivered >= 1100
    assert {op.value["offset"] for op in acks} == {-1}


# -- consumers ---------------------------------------------------------------------------------


class FakeConsumer:
    """confluent_kafka.Consumer as the workload uses it; each consume() plays the next step
    of a script shared by every instance: a list of messages, or an exception to raise."""

    def __init__(self, script: list[list[FakeMessage] | Exception], stop: threading.Event,
                 conf: dict[str, Any], made: list[FakeConsumer]) -> None:
        self.script, self.stop, self.conf = script, stop, conf
        self.assigned: list[tuple[str, int, int]] = []
        self.closed = False
        made.append(self)

    def assign(self, tps: list[Any]) -> None:
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in tps]

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        step = self.script.pop(0)
        if not self.script:
            self.stop.set()
        if isinstance(step, Exception):
            raise step
        return step

    def close(self) -> None:
        self.closed = True


def test_a_poll_that_raises_is_info_and_a_fresh_consumer_reads_from_the_start(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    transport = KafkaError(KafkaError._TRANSPORT)
    script: list[list[FakeMessage] | Exception] = [
        [FakeMessage(1, 0, b"7"), FakeMessage(2, 0, b"8")],
        KafkaException(KafkaError(KafkaError._FATAL)),
        [FakeMessage(1, 0, None, transport)],
        [FakeMessage(1, 0, b"7"), FakeMessage(1, 0, None, transport), FakeMessage(1, 1, b"007")],
    ]
    stop = threading.Event()
    made: list[FakeConsumer] = []
    monkeypatch.setattr(queue, "Consumer", lambda conf: FakeConsumer(script, stop, conf, made))
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        consumer = QueueConsumer(SPEC, "fake:9092", Journal(history), 2, ProcessIds(3))
        consumer.run(stop)
    ops = list(read_history(path))

    assert [(op.process, op.type, op.value, op.error) for op in ops] == [
        (2, "invoke", None, None),
        (2, "ok", {"records": [[TOPIC, 1, 0, 7], [TOPIC, 2, 0, 8]]}, None),
        (2, "invoke", None, None),
        (2, "info", None, "_FATAL"),
        (3, "invoke", None, None),
        (3, "fail", {"records": []}, "_TRANSPORT"),
        (3, "invoke", None, None),
        (3, "ok", {"records": [[TOPIC, 1, 0, 7], [TOPIC, 1, 1, "007"]]}, "_TRANSPORT"),
    ]
    assert [c.conf["client.id"] for c in made] == ["faultline-c2", "faultline-c3"]
    every_partition = [(TOPIC, p, OFFSET_BEGINNING) for p in range(SPEC.topic.partitions)]
    assert all(c.assigned == every_partition for c in made)
    assert all(c.closed for c in made)
    assert (consumer.polls, consumer.records, consumer.retired) == (4, 4, 1)


class Logging(FakeProducer):
    """Logs as librdkafka does through confluent-kafka when it is made, and reports a
    transport error through the error callback on its first poll."""

    def __init__(self, broker: Broker, conf: dict[str, Any]) -> None:
        super().__init__(broker, conf)
        name = f"{conf['client.id']}#producer-{len(broker.producers)}"
        conf["logger"].log(logging.DEBUG, "%s [%s] %s", "DRAIN", name, "bumped epoch to PID{Id:7,Epoch:1}")
        self.errors = [KafkaError(KafkaError._TRANSPORT)]

    def poll(self, timeout: float) -> int:
        while self.errors:
            self.conf["error_cb"](self.errors.pop())
        return super().poll(timeout)


def test_the_producers_client_library_lines_go_to_the_client_log(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Each instance logs under its own process, on the history's clock; with idempotence
    librdkafka's eos debug context is on; the error callback's lines go there too, and
    only lines at info or above reach the faultline log."""
    broker = Broker(lambda fp, part, v: "_MSG_TIMED_OUT" if len(broker.producers) == 1 else None,
                    lambda b: len(b.producers) == 2 and b.delivered > 300)
    with caplog.at_level(logging.DEBUG, logger="faultline.rdkafka"):
        _, ops = run_producer(monkeypatch, tmp_path, broker, fake=Logging, client_log=True)
    assert [fp.conf["debug"] for fp in broker.producers] == ["eos", "eos"]
    lines = [orjson.loads(x) for x in (tmp_path / "client-log.jsonl").read_bytes().splitlines()]
    assert [(x["process"], x["level"], x["facility"]) for x in lines] == [
        (0, "debug", "DRAIN"), (0, "warning", "ERROR"), (5, "debug", "DRAIN"), (5, "warning", "ERROR")]
    assert lines[2]["client"] == "faultline-p5#producer-2"
    assert lines[0]["message"] == "bumped epoch to PID{Id:7,Epoch:1}"
    assert 0 < lines[0]["time"] <= lines[-1]["time"] <= ops[-1].time
    assert [r.levelno for r in caplog.records if r.name == "faultline.rdkafka"] == [logging.WARNING] * 2
