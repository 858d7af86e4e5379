"""Creating a topic again after a request that never got its answer, and only then."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from faultline.cluster import kafka_client
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
