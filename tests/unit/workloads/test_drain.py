"""The drain's journaled ops beyond a fault-free run, with a fake confluent-kafka Consumer.

The fake serves each partition's records from a dict, answers watermarks and positions as
librdkafka does, and can be told to stall, to raise, or to reveal its records a few at a
time. The drain's clock is a fake that moves only when the fake consumer waits, so a
timeout is reached deterministically and no test sleeps.
"""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_INVALID, KafkaError, KafkaException

from faultline.history import HistoryWriter, Op, read_history
from faultline.spec import TestSpec
from faultline.workloads import drain as drain_module
from faultline.workloads.clients import ProcessIds, decode_value
from faultline.workloads.drain import PartitionDrain, drain
from tests.schemas import valid_lines
from tests.unit.workloads.fakes import FakeMessage

TOPIC = TestSpec().topic.name


class Clock:
    """The drain's ``time``: moves only when something waits on it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Log:
    """One partition as the fake serves it.

    ``records``: offset -> value, an int written as its decimal, or the raw bytes (or
    None) of the record (offsets missing between ``low`` and ``end`` hold no record, as
    a transaction marker does); ``hw`` is what the watermark query answers;
    ``stall_at``: the consumer serves nothing from this offset on; ``per_consume``:
    records one ``consume()`` returns at most, every other call returning none.
    """

    def __init__(self, records: dict[int, Any], low: int = 0, hw: int | None = None,
                 end: int | None = None, stall_at: int | None = None,
                 per_consume: int = 1000) -> None:
        self.records = records
        self.low = low
        self.end = end if end is not None else (max(records) + 1 if records else low)
        self.hw = hw if hw is not None else self.end
        self.stall_at = stall_at
        self.per_consume = per_consume


class FakeKafka:
    """The fake cluster: its partitions, the errors it is told to raise, the consumers made."""

    def __init__(self, clock: Clock, logs: dict[int, Log]) -> None:
        self.clock = clock
        self.logs = logs
        self.watermark_errors: list[KafkaException] = []  # raised by the next queries, in turn
        self.watermarks_down = False  # every query raises _TIMED_OUT
        self.consume_error: KafkaException | None = None
        self.consumers: list[FakeConsumer] = []


class FakeConsumer:
    """What the drain calls on confluent_kafka.Consumer, answered from a FakeKafka."""

    def __init__(self, kafka: FakeKafka, conf: dict[str, Any]) -> None:
        self.kafka, self.conf = kafka, conf
        self.assigned: list[tuple[str, int, int]] = []
        self.next_offset = OFFSET_INVALID  # librdkafka's position before the first fetch
        self.partition: int | None = None
        self.calls = 0
        self.empty = 0  # consume() calls that returned nothing
        self.closed = False

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        assert not cached, "the drain must ask the leader, not a cache"
        if self.kafka.watermark_errors:
            raise self.kafka.watermark_errors.pop(0)
        if self.kafka.watermarks_down:
            self.kafka.clock.sleep(timeout)
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        log = self.kafka.logs[tp.partition]
        return log.low, log.hw

    def assign(self, tps: list[Any]) -> None:
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in tps]
        (self.partition,) = (tp.partition for tp in tps)

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        if self.kafka.consume_error is not None:
            self.kafka.clock.sleep(timeout)
            raise self.kafka.consume_error
        assert self.partition is not None, "consume() before assign()"
        log = self.kafka.logs[self.partition]
        self.calls += 1
        out: list[FakeMessage] = []
        if log.per_consume >= num_messages or self.calls % 2:
            limit = min(num_messages, log.per_consume)
            stop = log.end if log.stall_at is None else log.stall_at
            offset = max(self.next_offset, log.low)
            while offset < stop and len(out) < limit:
                if offset in log.records:
                    raw = log.records[offset]
                    if isinstance(raw, KafkaError):  # an error in place of the record
                        out.append(FakeMessage(self.partition, offset, None, raw))
                        offset += 1
                        self.next_offset = offset
                        continue
                    if isinstance(raw, int):
                        raw = str(raw).encode("ascii")
                    out.append(FakeMessage(self.partition, offset, raw))
                offset += 1
                self.next_offset = offset
        if not out:
            self.empty += 1
            self.kafka.clock.sleep(timeout)  # waited for records that did not come
        return out

    def position(self, tps: list[Any]) -> list[Any]:
        return [SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=self.next_offset)
                for tp in tps]

    def close(self) -> None:
        self.closed = True


class ThreadReader:
    """A reader of one partition in a thread of this process, where the fakes are, not in
    a child process: the messages go through a real pipe all the same."""

    def __init__(self, job: dict[str, Any]) -> None:
        r, w = os.pipe()
        self.stdout, self.stderr = os.fdopen(r, "rb"), io.BytesIO()
        out = os.fdopen(w, "wb")

        def serve() -> None:
            with out:
                drain_module._serve(job, out)

        self.thread = threading.Thread(target=serve)
        self.thread.start()

    def wait(self, timeout: float | None = None) -> int:
        self.thread.join(timeout)
        return 0

    def kill(self) -> None:
        raise AssertionError("a reader outlived its deadline")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(drain_module, "time", c)
    return c


def run_drain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kafka: FakeKafka,
              ends: dict[int, int | str], timeout_s: float = 60.0
              ) -> tuple[list[PartitionDrain], list[Op]]:
    """Drain ``ends`` from ``kafka`` into a real history; the results and the ops read
    back, every line held to the reader's pairing rules and to the history schema."""
    def make(conf: dict[str, Any]) -> FakeConsumer:
        c = FakeConsumer(kafka, conf)
        kafka.consumers.append(c)
        return c

    monkeypatch.setattr(drain_module, "Consumer", make)
    monkeypatch.setattr(drain_module, "_start_reader", ThreadReader)
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        drains = drain(TestSpec(), "fake:9092", history, ProcessIds(10), ends, timeout_s=timeout_s)
    valid_lines(path, "history.schema.json")
    return drains, list(read_history(path))


def oks(ops: list[Op], partition: int) -> list[dict[str, Any]]:
    return [op.value for op in ops if op.type == "ok" and op.value["partition"] == partition]


def test_each_partition_is_read_whole_by_its_own_fresh_consumer(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock) -> None:
    kafka = FakeKafka(clock, {0: Log({0: 5, 1: 7}), 1: Log({3: 9, 4: 2}, low=3)})
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {1: 5, 0: 2})

    assert [(d.partition, d.process, d.complete, d.records, d.error) for d in drains] == [
        (0, 10, True, 2, None), (1, 11, True, 2, None)]
    # the partitions are read in parallel: each process's ops in order, the processes interleaved
    assert [(op.process, op.type, op.value) for op in sorted(ops, key=lambda op: op.process)] == [
        (10, "invoke", {"topic": TOPIC, "partition": 0}),
        (10, "ok", {"topic": TOPIC, "partition": 0, "log_start_offset": 0, "high_watermark": 2,
                    "records": [[0, 5], [1, 7]], "last": True}),
        (11, "invoke", {"topic": TOPIC, "partition": 1}),
        (11, "ok", {"topic": TOPIC, "partition": 1, "log_start_offset": 3, "high_watermark": 5,
                    "records": [[3, 9], [4, 2]], "last": True}),
    ]
    consumers = sorted(kafka.consumers, key=lambda c: c.conf["client.id"])
    assert [c.conf["client.id"] for c in consumers] == ["faultline-drain10", "faultline-drain11"]
    assert [c.assigned for c in consumers] == [[(TOPIC, 0, OFFSET_BEGINNING)],
                                               [(TOPIC, 1, OFFSET_BEGINNING)]]
    assert all(c.closed for c in consumers)


@pytest.mark.parametrize("per_consume", [3, 4, 1000])
def test_a_long_partition_is_journaled_in_chunks_only_the_last_marked(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock, per_consume: int) -> None:
    """More than DRAIN_CHUNK records: ops of DRAIN_CHUNK records but the final one, however
    consume() batches them, every offset once and in order, ``last`` on the final one only."""
    monkeypatch.setattr(drain_module, "DRAIN_CHUNK", 4)
    records = {off: 100 + off for off in range(11)}
    kafka = FakeKafka(clock, {0: Log(records, per_consume=per_consume)})
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: 11})

    chunks = oks(ops, 0)
    assert [op.type for op in ops] == ["invoke", "ok"] * 3
    assert [len(c["records"]) for c in chunks] == [4, 4, 3]
    assert [c.get("last") for c in chunks] == [None] * (len(chunks) - 1) + [True]
    assert [r for c in chunks for r in c["records"]] == [[off, 100 + off] for off in range(11)]
    assert all(c["high_watermark"] == 11 and c["log_start_offset"] == 0 for c in chunks)
    assert not any(op.error for op in ops)
    assert (drains[0].records, drains[0].complete) == (11, True)


def test_records_revealed_slowly_are_waited_for(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock) -> None:
    """An empty consume() is no reason to stop: the drain reads on to the log end."""
    kafka = FakeKafka(clock, {0: Log({off: off for off in range(7)}, per_consume=2)})
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: 7})

    assert kafka.consumers[0].empty >= 3
    (final,) = oks(ops, 0)
    assert (final["records"], final.get("last")) == ([[off, off] for off in range(7)], True)
    assert drains[0].complete


def test_offsets_below_the_end_without_records_complete_by_the_position(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock) -> None:
    """The log end is past the last record (offsets 3 and 4 hold markers, no records): the
    consumer's position, not a record, shows the drain got there."""
    kafka = FakeKafka(clock, {0: Log({0: 1, 1: 2, 2: 3}, end=5)})
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: 5})

    (final,) = oks(ops, 0)
    assert (final["records"], final["high_watermark"], final.get("last")) == (
        [[0, 1], [1, 2], [2, 3]], 5, True)
    assert drains[0].complete and drains[0].error is None


@pytest.mark.parametrize(("low", "stall_at", "read_to"), [(0, 4, 4), (2, 2, 2)])
def test_a_drain_that_does_not_reach_the_log_end_in_time_is_not_last(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock, low: int, stall_at: int,
        read_to: int) -> None:
    """The leader stops serving at ``stall_at``: what was read is journaled, with no
    ``last`` and an error saying how far it got."""
    kafka = FakeKafka(clock, {0: Log({off: off for off in range(low, 9)}, low=low,
                                     stall_at=stall_at)})
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: 9}, timeout_s=20.0)

    (final,) = oks(ops, 0)
    assert "last" not in final
    assert final["records"] == [[off, off] for off in range(low, read_to)]
    assert ops[-1].error == f"_TIMED_OUT: read to {read_to} of log end 9 in 20 s"
    assert (drains[0].complete, drains[0].records, drains[0].error) == (False, read_to - low,
                                                                         ops[-1].error)


def test_a_partition_never_quiescent_is_read_to_its_high_watermark_and_never_last(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock) -> None:
    """No log end to read to: the drain reads to the HW of the moment (6, though records
    above it come in later) and says why the partition is not fully known."""
    reason = "no quiescence within 30 s: replicas' log ends differ"
    kafka = FakeKafka(clock, {0: Log({off: off for off in range(9)}, hw=6),
                              1: Log({0: 40})})
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: reason, 1: 1})

    (final,) = oks(ops, 0)
    assert (final["records"], final["high_watermark"]) == ([[off, off] for off in range(6)], 6)
    assert "last" not in final
    assert [op.error for op in ops if op.value["partition"] == 0] == [
        None, f"not quiescent: {reason}"]
    assert oks(ops, 1)[0].get("last") is True  # the other partition is not held back
    assert [(d.complete, d.high_watermark) for d in drains] == [(False, 6), (True, 1)]


def test_watermarks_that_cannot_be_read_fail_the_drain_with_the_error_name(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock) -> None:
    kafka = FakeKafka(clock, {0: Log({0: 1})})
    kafka.watermarks_down = True
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: 1}, timeout_s=30.0)

    assert [(op.type, op.value, op.error) for op in ops] == [
        ("invoke", {"topic": TOPIC, "partition": 0}, None),
        ("fail", {"topic": TOPIC, "partition": 0}, "_TIMED_OUT")]
    assert drains == [PartitionDrain(0, 10, None, None, 0, False, "_TIMED_OUT")]
    assert kafka.consumers[0].assigned == [] and kafka.consumers[0].closed


def test_watermarks_are_retried_while_a_leader_is_elected(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock) -> None:
    kafka = FakeKafka(clock, {0: Log({0: 1, 1: 2})})
    kafka.watermark_errors = [KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)),
                              KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE))]
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: 2})

    assert [op.type for op in ops] == ["invoke", "ok"]
    assert oks(ops, 0)[0]["records"] == [[0, 1], [1, 2]] and drains[0].complete


def test_a_consume_that_raises_ends_the_partition_without_last(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock) -> None:
    kafka = FakeKafka(clock, {0: Log({0: 1, 1: 2})})
    kafka.consume_error = KafkaException(KafkaError(KafkaError._TRANSPORT))
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: 2})

    assert [(op.type, op.error) for op in ops] == [("invoke", None), ("ok", "_TRANSPORT")]
    assert "last" not in ops[-1].value and ops[-1].value["records"] == []
    assert (drains[0].complete, drains[0].error) == (False, "_TRANSPORT")


@pytest.mark.parametrize("low", [0, 7])
def test_an_empty_partition_is_last_with_no_records(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock, low: int) -> None:
    """High watermark == log start (never written, or everything deleted): nothing to
    read, and the drain is complete at once."""
    kafka = FakeKafka(clock, {0: Log({}, low=low)})
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: low})

    assert [(op.type, op.value) for op in ops] == [
        ("invoke", {"topic": TOPIC, "partition": 0}),
        ("ok", {"topic": TOPIC, "partition": 0, "log_start_offset": low, "high_watermark": low,
                "records": [], "last": True})]
    assert drains == [PartitionDrain(0, 10, low, low, 0, True)]
    assert kafka.consumers[0].calls == 0


def test_each_value_is_journaled_as_decode_value_gives_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock) -> None:
    """A canonical decimal becomes an int; anything else (a leading zero, a sign, text,
    bytes that are not UTF-8, digits that are not ASCII, a null) what decode_value says."""
    raws = [b"0", b"42", b"007", b"-1", b"abc", b"\xff1", None, b"", "\u0663".encode(),
            b"999999999999999999", b"9223372036854775807", b"9223372036854775808"]
    kafka = FakeKafka(clock, {0: Log(dict(enumerate(raws)))})
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: len(raws)})
    records = [r for op in ops if op.type == "ok" for r in op.value["records"]]
    assert records == [[i, decode_value(raw)] for i, raw in enumerate(raws)]
    assert [v for _, v in records[:4]] == [0, 42, "007", "-1"] and drains[0].complete
    assert [v for _, v in records[-3:]] == [10**18 - 1, 2**63 - 1, "9223372036854775808"]


def test_a_consumed_error_stops_the_read_and_withholds_last(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock) -> None:
    """A message that is an error (librdkafka skips a corrupt record so) may stand for a
    record the drain never got: what came is journaled, but the partition is not complete
    (a hole would be a false lost write)."""
    kafka = FakeKafka(clock, {0: Log({0: 5, 1: KafkaError(KafkaError._BAD_MSG), 2: 7})})
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: 3})
    assert not drains[0].complete and drains[0].error is not None
    assert drains[0].error.startswith("_BAD_MSG: ")
    records = [r for op in ops if op.type == "ok" for r in op.value["records"]]
    assert records == [[0, 5], [2, 7]]
    assert not any(op.value.get("last") for op in ops if op.type == "ok")


@pytest.mark.parametrize("moved_after", [1, 2])
def test_a_log_start_that_moves_during_the_drain_withholds_last(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock, moved_after: int) -> None:
    """Found by review: the log start was read once, before reading; when it moved up
    (retention, set in broker_config) before the consumer fetched from the beginning, or
    under a consumer that then reset to the earliest offset, the drain skipped offsets
    yet was journaled ``last`` with the old log start: every ack there a false lost
    write. The drain now reads the log start again at the end: moved, it is not last."""
    kafka = FakeKafka(clock, {0: Log({off: off for off in range(8)}, per_consume=3)})
    consume = FakeConsumer.consume

    def moving(self: FakeConsumer, num_messages: int, timeout: float) -> list[FakeMessage]:
        if self.calls + 1 == moved_after:  # retention deletes offsets 0-4 before this fetch
            kafka.logs[0].low = 5
            self.next_offset = max(self.next_offset, 5)  # the reset to the earliest offset
        return consume(self, num_messages, timeout)

    monkeypatch.setattr(FakeConsumer, "consume", moving)
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: 8})

    records = [r for op in ops if op.type == "ok" for r in op.value["records"]]
    read = [off for off, _ in records]
    assert read == [*range(3 if moved_after == 2 else 0), 5, 6, 7]  # 0-4 (or 3, 4) skipped
    assert not any(op.value.get("last") for op in ops if op.type == "ok")
    assert ops[-1].error == ("log start moved from 0 to 5 during the drain: offsets below may "
                             "not have been read")
    assert (drains[0].complete, drains[0].error) == (False, ops[-1].error)


def test_a_log_start_that_cannot_be_read_again_withholds_last(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: Clock) -> None:
    kafka = FakeKafka(clock, {0: Log({0: 1, 1: 2})})
    consume = FakeConsumer.consume

    def then_down(self: FakeConsumer, num_messages: int, timeout: float) -> list[FakeMessage]:
        kafka.watermarks_down = True
        return consume(self, num_messages, timeout)

    monkeypatch.setattr(FakeConsumer, "consume", then_down)
    drains, ops = run_drain(monkeypatch, tmp_path, kafka, {0: 2})
    assert oks(ops, 0)[-1]["records"] == [[0, 1], [1, 2]] and "last" not in oks(ops, 0)[-1]
    assert ops[-1].error == "_TIMED_OUT: the log start could not be read again after the drain"
    assert not drains[0].complete
