"""Creating a topic again after a request that never got its answer, and only then;
describing a topic again while the broker asked does not know it yet, and only then."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka.admin import ListOffsetsResultInfo

from faultline.cluster import kafka_client
from faultline.cluster.protocol import PartitionState
from faultline.errors import ClusterError
from faultline.spec import TopicSpec


class Admin:
    """create_topics answers with the next of ``errors`` (None: created)."""

    def __init__(self, *errors: int | None) -> None:
        self.errors = list(errors)
        self.calls = 0

    def create_topics(self, topics: list[Any], request_timeout: float) -> dict[str, Future[None]]:
        self.calls += 1
        done: Future[None] = Future()
        code = self.errors.pop(0)
        if code is None:
            done.set_result(None)
        else:
            done.set_exception(KafkaException(KafkaError(code)))
        return {topics[0].topic: done}


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_client.time, "sleep", lambda s: None)


def test_a_request_lost_with_its_broker_handle_is_sent_again() -> None:
    admin = Admin(KafkaError._DESTROY_BROKER, None)
    kafka_client.create_topic(admin, TopicSpec(), 5)  # type: ignore[arg-type]
    assert admin.calls == 2


def test_an_answered_error_is_not_retried() -> None:
    admin = Admin(KafkaError.INVALID_REPLICATION_FACTOR, None)
    with pytest.raises(ClusterError, match="cannot create topic fl-queue"):
        kafka_client.create_topic(admin, TopicSpec(), 5)  # type: ignore[arg-type]
    assert admin.calls == 1


def test_it_gives_up_after_three_unanswered_requests() -> None:
    admin = Admin(*[KafkaError._TRANSPORT] * 3)
    with pytest.raises(ClusterError, match="_TRANSPORT"):
        kafka_client.create_topic(admin, TopicSpec(), 5)  # type: ignore[arg-type]
    assert admin.calls == 3


class Describer:
    """describe_topics fails with the next of ``errors`` (None: describes one partition,
    led by node 1 with nodes 1 and 2 in sync); list_topics lists no topic."""

    def __init__(self, *errors: int | None) -> None:
        self.errors = list(errors)
        self.calls = 0

    def describe_topics(self, topics: Any, request_timeout: float) -> dict[str, Future[Any]]:
        self.calls += 1
        done: Future[Any] = Future()
        code = self.errors.pop(0)
        node1, node2 = SimpleNamespace(id=1), SimpleNamespace(id=2)
        if code is None:
            done.set_result(SimpleNamespace(partitions=[SimpleNamespace(
                id=0, leader=node1, isr=[node2, node1], replicas=[node1, node2])]))
        else:
            done.set_exception(KafkaException(KafkaError(code)))
        return {"fl-queue": done}

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(topics={}, brokers={})


def test_a_topic_unknown_to_the_broker_asked_is_asked_again() -> None:
    admin = Describer(KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_OR_PART, None)
    states = kafka_client.partition_states(admin, "fl-queue")  # type: ignore[arg-type]
    assert states == {0: PartitionState(1, (1, 2), (1, 2))} and admin.calls == 3


def test_a_topic_unknown_for_longer_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_client, "UNKNOWN_FOR_S", 0.0)
    admin = Describer(KafkaError.UNKNOWN_TOPIC_OR_PART, None)
    with pytest.raises(ClusterError, match="cannot describe fl-queue"):
        kafka_client.partition_states(admin, "fl-queue")  # type: ignore[arg-type]
    assert admin.calls == 1


def test_another_describe_error_is_not_retried() -> None:
    admin = Describer(KafkaError._TIMED_OUT, None)
    with pytest.raises(ClusterError, match="_TIMED_OUT"):
        kafka_client.partition_states(admin, "fl-queue")  # type: ignore[arg-type]
    assert admin.calls == 1


class Lister:
    """list_offsets answers each partition with ``answers[p]``: an offset and leader epoch,
    or an error code."""

    def __init__(self, answers: dict[int, tuple[int, int] | int]) -> None:
        self.answers = answers
        self.isolation_level: Any = None

    def list_offsets(self, requests: dict[Any, Any], isolation_level: Any,
                     request_timeout: float) -> dict[Any, Future[Any]]:
        self.isolation_level = isolation_level
        out: dict[Any, Future[Any]] = {}
        for tp in requests:
            done: Future[Any] = Future()
            answer = self.answers[tp.partition]
            if isinstance(answer, tuple):
                done.set_result(ListOffsetsResultInfo(answer[0], -1, answer[1]))
            else:
                done.set_exception(KafkaException(KafkaError(answer)))
            out[tp] = done
        return out


def test_a_high_watermark_comes_with_the_leader_epoch_of_its_answer() -> None:
    """The epoch tells a deposed leader's stale answer from a HW that moved back; an
    empty partition's HW is 0, an offset like any other."""
    admin = Lister({0: (120, 5), 1: (7, -1), 2: KafkaError.LEADER_NOT_AVAILABLE, 3: (-1001, 5), 4: (0, 1)})
    assert kafka_client.high_watermarks(admin, "fl-queue", [0, 1, 2, 3, 4], 1.0) == {  # type: ignore[arg-type]
        0: kafka_client.HighWatermark(120, 5), 1: kafka_client.HighWatermark(7, None),
        2: "LEADER_NOT_AVAILABLE", 3: "no offset (-1001)", 4: kafka_client.HighWatermark(0, 1)}
    assert admin.isolation_level == IsolationLevel.READ_UNCOMMITTED
    kafka_client.high_watermarks(admin, "fl-queue", [0], 1.0, committed=True)  # type: ignore[arg-type]
    assert admin.isolation_level == IsolationLevel.READ_COMMITTED, "the last stable offset"
