"""The group workload's member against a fake of confluent-kafka's Consumer: the callbacks
the client runs inside ``consume()`` (rebalances, async and auto commits' reports) and a
commit of unknown outcome are journaled so that the history keeps its pairing and
retirement rules (read back through the reader) and its schema."""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from faultline.errors import SpecError
from faultline.history import HistoryWriter, Op, read_history
from faultline.spec import ConsumerSpec, TestSpec, WorkloadSpec, build_spec
from faultline.workloads import group, workload_for
from faultline.workloads.clients import Journal, ProcessIds
from faultline.workloads.group import GroupConsumer, generation, group_config
from faultline.workloads.java_group import JavaGroupWorkload
from tests.schemas import validator
from tests.unit.workloads.fakes import TOPIC, FakeMessage

#: One consume() call: what the client does inside it, then the records it returns.
Scene = Callable[["FakeConsumer"], list[FakeMessage]]


class LeaderEpochMessage(FakeMessage):
    def leader_epoch(self) -> int:
        return 4


class FakeConsumer:
    """confluent_kafka.Consumer as a group member uses it; each consume() plays a scene."""

    instances: ClassVar[list[FakeConsumer]] = []

    def __init__(self, conf: dict[str, Any], scenes: list[Scene], stop: threading.Event,
                 commit_error: str | None) -> None:
        self.conf, self.scenes, self.stop, self.commit_error = conf, scenes, stop, commit_error
        self.callbacks: dict[str, Callable[..., None]] = {}
        self.committed: list[list[TopicPartition]] = []
        FakeConsumer.instances.append(self)

    def subscribe(self, topics: list[str], **callbacks: Callable[..., None]) -> None:
        self.callbacks = callbacks

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        if not self.scenes:
            self.stop.set()
            return []
        return self.scenes.pop(0)(self)

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> list[TopicPartition] | None:
        self.committed.append(offsets)
        if self.commit_error is not None:
            raise KafkaException(KafkaError(getattr(KafkaError, self.commit_error)))
        return None if asynchronous else offsets

    def memberid(self) -> str:
        return "m1"

    def consumer_group_metadata(self) -> bytes:
        return b"CGMDv2:" + (7).to_bytes(4, "little", signed=True) + b"g\x00m1\x00\x01"

    def close(self) -> None:  # a member closing loses what the group took from it
        self.rebalance("lost", [0])

    # what a scene does inside consume()
    def rebalance(self, kind: str, partitions: list[int]) -> None:
        self.callbacks[f"on_{kind}"](self, [TopicPartition(TOPIC, p) for p in partitions])

    def report(self, offsets: list[tuple[int, int]]) -> None:
        self.conf["on_commit"](None, [TopicPartition(TOPIC, p, o, leader_epoch=4) for p, o in offsets])


def records(*offsets: int) -> Scene:
    return lambda c: [LeaderEpochMessage(0, o, str(100 + o).encode()) for o in offsets]


def play(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commit: str, scenes: list[Scene],
         commit_error: str | None = None, interval: float = 0.0, settle: float = 0.0,
         leave: threading.Event | None = None) -> list[Op]:
    """Run one member through ``scenes``, commits due every ``interval`` s on a clock that
    moves 1 s per look (after every poll, by default), settling ``settle`` s once they are
    played (then stopped, and told to ``leave`` if given); its history, read back."""
    spec = replace(TestSpec(), workload=WorkloadSpec(name="group"),
                   consumer=replace(ConsumerSpec(), mode="subscribe", commit=commit))  # type: ignore[arg-type]
    stop = threading.Event()
    FakeConsumer.instances = []
    monkeypatch.setattr(group, "Consumer", lambda conf: FakeConsumer(conf, scenes, stop, commit_error))
    monkeypatch.setattr(group, "COMMIT_INTERVAL_S", interval)
    monkeypatch.setattr(group, "time", SimpleNamespace(monotonic=itertools.count().__next__))
    monkeypatch.setattr(group, "SETTLE_S", settle)
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        GroupConsumer(spec, "x:9092", Journal(history), 1, ProcessIds(2)).run(stop, leave)
    check = validator("history.schema.json")
    ops = list(read_history(path))  # the pairing and retirement rules
    for op in ops:
        check.validate(op.to_dict())
    return ops


def lines(ops: list[Op]) -> list[tuple[int | str, str, str]]:
    return [(o.process, o.type, o.f) for o in ops]


def test_a_rebalance_inside_a_poll_ends_it_and_opens_another(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    def assign_then_read(c: FakeConsumer) -> list[FakeMessage]:
        c.rebalance("assign", [0])
        return records(0, 1)(c)

    ops = play(tmp_path, monkeypatch, "sync", [assign_then_read])
    assert lines(ops)[:8] == [
        (1, "invoke", "poll"), (1, "ok", "poll"), (1, "invoke", "assign"), (1, "ok", "assign"),
        (1, "invoke", "poll"), (1, "ok", "poll"), (1, "invoke", "commit"), (1, "ok", "commit")]
    assert ops[3].value == {"partitions": [[TOPIC, 0]], "member": "m1", "generation": 7}
    # one batch, journaled before the callback returns: in a child process an op sent on
    # its own after the run read another's could take a later time (found by review)
    assert len({o.time for o in ops[1:5]}) == 1
    assert ops[5].value["records"] == [[TOPIC, 0, 0, 100], [TOPIC, 0, 1, 101]]
    assert ops[7].value == {"offsets": [[TOPIC, 0, 2, 4]]}  # one past the last, its epoch


def test_an_async_commits_report_is_journaled_after_its_poll(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    def reported(c: FakeConsumer) -> list[FakeMessage]:
        c.report([(0, 2)])
        return []

    ops = play(tmp_path, monkeypatch, "async", [records(0, 1), reported])
    assert lines(ops)[2:6] == [(1, "invoke", "poll"), (1, "ok", "poll"), (1, "invoke", "commit"),
                               (1, "ok", "commit")]
    assert ops[5].value == {"offsets": [[TOPIC, 0, 2, 4]]}


def test_a_commit_of_unknown_outcome_retires_the_member(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ops = play(tmp_path, monkeypatch, "sync", [records(0), records(1)], commit_error="_TIMED_OUT")
    assert lines(ops)[:4] == [(1, "invoke", "poll"), (1, "ok", "poll"), (1, "invoke", "commit"),
                              (1, "info", "commit")]
    # a fresh member; the retired one's closing callback is not journaled
    assert 1 not in {o.process for o in ops[4:]} and ops[4].process == 2
    assert len(FakeConsumer.instances) >= 2


def test_a_refused_commit_fails_and_the_member_stays(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ops = play(tmp_path, monkeypatch, "sync", [records(0), records(1)], commit_error="ILLEGAL_GENERATION")
    assert (1, "fail", "commit") in lines(ops) and {o.process for o in ops} == {1}


def test_a_member_told_to_leave_closes_without_settling(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    leave = threading.Event()
    leave.set()
    ops = play(tmp_path, monkeypatch, "sync", [records(0)], settle=100.0, leave=leave)
    assert lines(ops)[-4:] == [(1, "invoke", "poll"), (1, "ok", "poll"),
                               (1, "invoke", "lost"), (1, "ok", "lost")]
    assert len([o for o in ops if o.f == "poll" and o.type == "ok"]) == 3  # the records, the stop, one more
    (tmp_path / "settled").mkdir()
    settled = play(tmp_path / "settled", monkeypatch, "sync", [records(0)], settle=100.0)
    assert len([o for o in settled if o.f == "poll" and o.type == "ok"]) > 3


def test_the_generation_is_read_from_the_group_metadata() -> None:
    assert generation(b"CGMDv2:\xff\xff\xff\xffg\x00\x00\x01") == -1


@pytest.mark.parametrize(("data", "error"), [
    ({"workload": {"name": "group"}}, "workload group needs consumer.mode subscribe, not assign"),
    ({"consumer": {"mode": "subscribe"}}, "workload queue needs consumer.mode assign, not subscribe"),
    ({"workload": {"name": "group"}, "consumer": {"mode": "subscribe", "group_protocol": "consumer"},
      "kafka": {"version": "3.9.1"}},
     "group_protocol consumer (KIP-848) needs Kafka 4.0 or later, not 3.9.1"),
    ({"workload": {"name": "group"}, "consumer": {"mode": "subscribe", "commit": "never"}},
     "consumer.commit: 'never' is not one of sync, async, auto"),
])
def test_a_group_spec_that_cannot_run_is_one_line(data: dict[str, Any], error: str) -> None:
    with pytest.raises(SpecError, match=re.escape(error)):
        TestSpec.from_mapping(data)


def test_the_group_workload_runs_the_java_client_and_its_static_members_but_not_its_auto_commits() -> None:
    spec = TestSpec.from_mapping({"workload": {"name": "group", "client": "java"},
                                  "consumer": {"mode": "subscribe", "group_protocol": "consumer"}})
    assert spec.workload.checkers == ("queue", "group", "white-box")
    assert workload_for(spec) is JavaGroupWorkload
    with pytest.raises(SpecError, match="auto cannot be judged with the Java client"):
        TestSpec.from_mapping({"workload": {"name": "group", "client": "java"},
                               "consumer": {"mode": "subscribe", "commit": "auto"}})
    static = TestSpec.from_mapping({"workload": {"name": "group", "client": "java"},
                                    "consumer": {"mode": "subscribe", "static": True}})
    assert static.consumer.static and workload_for(static) is JavaGroupWorkload


def test_the_example_group_spec_is_valid() -> None:
    path = Path(__file__).resolve().parents[3] / "examples" / "group-coordinator-kill.yaml"
    spec = build_spec(path, {})
    assert spec.workload.name == "group" and spec.consumer.group_protocol == "consumer"
    assert any("coordinator of group faultline-group-coordinator-kill" in s for s in spec.nemesis.schedule)


def test_a_report_of_unknown_outcome_retires_the_member_before_its_next_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two async reports in one poll, the first of unknown outcome: the second goes with the
    retired instance, and no commit is invoked under its process after it."""
    def reported(c: FakeConsumer) -> list[FakeMessage]:
        c.conf["on_commit"](KafkaError(KafkaError._TIMED_OUT), [TopicPartition(TOPIC, 0, 1)])
        c.report([(0, 2)])
        return records(2)(c)

    ops = play(tmp_path, monkeypatch, "async", [records(0, 1), reported])
    assert lines(ops)[2:6] == [(1, "invoke", "poll"), (1, "ok", "poll"), (1, "invoke", "commit"),
                               (1, "info", "commit")]
    assert 1 not in {o.process for o in ops[6:]}


def test_a_poll_that_raises_retires_the_member_before_it_commits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def raises(c: FakeConsumer) -> list[FakeMessage]:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    ops = play(tmp_path, monkeypatch, "sync", [records(0), raises], interval=1.5)  # due then
    at = lines(ops).index((1, "info", "poll"))
    assert 1 not in {o.process for o in ops[at + 1:]} and ops[-1].process == 2


def test_static_members_join_with_their_slots_instance_id() -> None:
    spec = replace(TestSpec(name="s"), workload=WorkloadSpec(name="group"),
                   consumer=replace(ConsumerSpec(), mode="subscribe", static=True))
    assert group_config(spec, "x:9092", "faultline-c7", 2)["group.instance.id"] == "faultline-s-2"
    dynamic = replace(spec, consumer=replace(spec.consumer, static=False))
    assert "group.instance.id" not in group_config(dynamic, "x:9092", "faultline-c7", 2)


def test_a_fatal_error_in_a_poll_retires_the_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A static member fenced by another with its group.instance.id: librdkafka's consumer
    is done for good, so the member is replaced rather than left polling errors."""
    def fenced(c: FakeConsumer) -> list[FakeMessage]:
        return [FakeMessage(0, 1, b"101"),
                FakeMessage(0, -1, None, KafkaError(KafkaError._FATAL, "fenced instance", fatal=True))]

    ops = play(tmp_path, monkeypatch, "sync", [records(0), fenced, records(2)])
    (info,) = [o for o in ops if o.type == "info"]
    assert (info.process, info.f, info.error) == (1, "poll", "_FATAL")
    assert 1 not in {o.process for o in ops[ops.index(info) + 1:]} and ops[-1].process == 2
