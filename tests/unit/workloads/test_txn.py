"""The txn workload's producer against a fake transactional confluent-kafka Producer: how
each transaction ends in the history, and that an unknown end retires the instance for
one with the same transactional.id. The producer runs on the test's thread; the fake sets
``stop`` once its scene has played out."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from faultline.history import HistoryWriter, Op, read_history
from faultline.spec import TestSpec, TransactionSpec, WorkloadSpec, build_spec
from faultline.workloads import txn
from faultline.workloads.clients import Journal, ProcessIds, Values
from tests.schemas import validator
from tests.unit.workloads.fakes import FakeMessage

SPEC = replace(TestSpec(), workload=WorkloadSpec(name="txn", producers=1, consumers=0),
               transactions=TransactionSpec(sends=2, abort_probability=0.0))
#: How a commit ends: None (acknowledged) or the error it raises.
Scene = list[KafkaError | None]


class FakeProducer:
    """A transactional producer whose commits end as ``scene`` says, one per transaction."""

    instances: ClassVar[list[FakeProducer]] = []

    def __init__(self, conf: dict[str, Any], scene: Scene, stop: threading.Event) -> None:
        self.conf, self.scene, self.stop = conf, scene, stop
        self.pending: list[tuple[int, bytes, Callable[..., None]]] = []
        self.aborted = 0
        self.offset = 0
        FakeProducer.instances.append(self)

    def init_transactions(self, timeout: float) -> None:
        pass

    def begin_transaction(self) -> None:
        self.ended = False

    def produce(self, topic: str, value: bytes, partition: int, on_delivery: Callable[..., None]) -> None:
        self.pending.append((partition, value, on_delivery))

    def flush(self, timeout: float) -> int:
        for partition, value, report in self.pending:
            report(None, FakeMessage(partition, self.offset, value))
            self.offset += 1
        self.pending = []
        return 0

    def commit_transaction(self, timeout: float) -> None:
        error = self._end()
        if error is not None:
            raise KafkaException(error)

    def abort_transaction(self, timeout: float) -> None:
        self.aborted += 1
        if not self.ended:  # meant to abort: this ends the transaction
            self._end()

    def _end(self) -> KafkaError | None:
        self.ended = True
        error = self.scene.pop(0)
        if not self.scene:
            self.stop.set()
        return error

    def purge(self) -> None:
        pass


def run(tmp_path: Path, scene: Scene, monkeypatch: pytest.MonkeyPatch, spec: TestSpec = SPEC,
        fake: type[FakeProducer] = FakeProducer) -> list[Op]:
    stop = threading.Event()
    FakeProducer.instances = []
    monkeypatch.setattr(txn, "Producer", lambda conf: fake(conf, scene, stop))
    with HistoryWriter(tmp_path / "history.jsonl") as w:
        producer = txn.TxnProducer(spec, "b:9092", Journal(w), 0, ProcessIds(1), Values(),
                                   random.Random(0))
        producer.run(stop)
    ops = list(read_history(tmp_path / "history.jsonl"))
    schema = validator("history.schema.json")
    for op in ops:
        schema.validate(op.to_dict())
    return ops


def error(code: int, **kind: bool) -> KafkaError:
    return KafkaError(code, "staged", **kind)


def test_an_acknowledged_commit_is_ok_with_every_offset(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ops = run(tmp_path, [None], monkeypatch)
    assert [(op.type, op.process) for op in ops] == [("invoke", 0), ("ok", 0)]
    assert ops[1].value["sends"] == [{"partition": 0, "value": 0, "offset": 0},
                                     {"partition": 1, "value": 1, "offset": 1}]


@pytest.mark.parametrize("gap_ms", [0, 250])
def test_a_transactions_sends_go_out_the_gap_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   gap_ms: int) -> None:
    """transactions.gap_ms: a pause before each send of a transaction but its first, so that
    the client adds each partition to the transaction as it first sends to it."""
    events: list[Any] = []
    monkeypatch.setattr(txn.time, "sleep", lambda s: events.append(s))

    class Watched(FakeProducer):
        def produce(self, topic: str, value: bytes, partition: int, on_delivery: Callable[..., None]) -> None:
            events.append(partition)
            super().produce(topic, value, partition, on_delivery)

    gapped = replace(SPEC, transactions=replace(SPEC.transactions, gap_ms=gap_ms))
    run(tmp_path, [None], monkeypatch, gapped, Watched)
    assert events == ([0, 0.25, 1] if gap_ms else [0, 1])


def test_a_commit_that_requires_an_abort_ends_fail_once_the_abort_is_acknowledged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = run(tmp_path, [error(KafkaError.INVALID_TXN_STATE, txn_requires_abort=True)], monkeypatch)
    assert [op.type for op in ops] == ["invoke", "fail"]
    assert ops[1].error == "INVALID_TXN_STATE"
    assert FakeProducer.instances[0].aborted == 1


def test_an_unknown_commit_ends_info_and_a_new_instance_keeps_the_transactional_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = run(tmp_path, [error(KafkaError._FATAL, fatal=True), None], monkeypatch)
    assert [(op.type, op.process) for op in ops] == [("invoke", 0), ("info", 0), ("invoke", 1), ("ok", 1)]
    first, second = FakeProducer.instances
    assert first.conf["transactional.id"] == second.conf["transactional.id"] == "faultline-queue-t0"


def test_a_transaction_meant_to_abort_never_commits_and_ends_fail(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = replace(SPEC, transactions=TransactionSpec(sends=2, abort_probability=1.0))
    ops = run(tmp_path, [None], monkeypatch, spec)
    assert [op.type for op in ops] == ["invoke", "fail"]
    assert ops[0].value["abort"] is ops[1].value["abort"] is True
    assert ops[1].error is None
    # its records were flushed to the log before the abort: aborted records for readers to skip
    assert [s["offset"] for s in ops[1].value["sends"]] == [0, 1]


def test_the_example_txn_coordinator_spec_is_valid() -> None:
    """examples/txn-coordinator-kill.yaml names the coordinator of its producer 0's id."""
    spec = build_spec(Path(__file__).resolve().parents[3] / "examples" / "txn-coordinator-kill.yaml", {})
    assert spec.workload.name == "txn"
    assert f"crash coordinator of transaction {spec.transactional_id(0)} as coord" in spec.nemesis.schedule
