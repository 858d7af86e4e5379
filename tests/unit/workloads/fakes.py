"""A fake confluent-kafka Message for the workload's and the drain's unit tests."""

from __future__ import annotations

from confluent_kafka import KafkaError

from faultline.spec import TestSpec

TOPIC = TestSpec().topic.name


class FakeMessage:
    def __init__(self, partition: int, offset: int, value: bytes | None,
                 error: KafkaError | None = None) -> None:
        self._partition, self._offset, self._value, self._error = partition, offset, value, error

    def error(self) -> KafkaError | None:
        return self._error

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value
