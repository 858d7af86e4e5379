"""The send outcome table: fail only when the message certainly was not written."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from faultline.workloads.outcomes import (
    DELIVERY_ERRORS,
    PRODUCE_CALL_ERRORS,
    Persisted,
    classify_delivery,
    classify_produce_call,
    delivery_rule,
)

RETRIES_ON = 2147483647


def test_every_name_in_the_table_is_a_librdkafka_error() -> None:
    """A misspelt name would silently fall through to the unknown-error rule."""
    for name in [*DELIVERY_ERRORS, *PRODUCE_CALL_ERRORS]:
        assert hasattr(KafkaError, name), name
        assert KafkaError(getattr(KafkaError, name)).name() == name


def test_every_rule_has_a_reason() -> None:
    for name, rule in DELIVERY_ERRORS.items():
        assert len(rule.reason) > 20, name


def test_success_is_ok() -> None:
    c = classify_delivery(None, retries=RETRIES_ON)
    assert (c.type, c.error) == ("ok", None)


@pytest.mark.parametrize("error", [
    "_MSG_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT", "REQUEST_TIMED_OUT",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "DUPLICATE_SEQUENCE_NUMBER", "_PURGE_INFLIGHT", "_FATAL", "_DESTROY",
])
def test_possibly_persisted_errors_are_info_whatever_the_retries(error: str) -> None:
    for retries in (0, 3, RETRIES_ON):
        c = classify_delivery(error, retries=retries)
        assert (c.type, c.error) == ("info", error)


def test_not_leader_is_indeterminate_despite_librdkafka() -> None:
    """KAFKA-13574: NOT_LEADER_OR_FOLLOWER can answer a batch that is later committed."""
    assert delivery_rule("NOT_LEADER_FOR_PARTITION").status is Persisted.POSSIBLY_PERSISTED
    assert "KAFKA-13574" in delivery_rule("NOT_LEADER_FOR_PARTITION").reason
    assert classify_delivery("NOT_LEADER_FOR_PARTITION", retries=0).type == "info"


@pytest.mark.parametrize("error", [
    "NOT_ENOUGH_REPLICAS", "UNKNOWN_TOPIC_OR_PART", "TOPIC_AUTHORIZATION_FAILED",
    "MSG_SIZE_TOO_LARGE", "INVALID_RECORD", "_PURGE_QUEUE", "INVALID_PRODUCER_EPOCH",
])
def test_definite_rejection_is_fail_only_without_retries(error: str) -> None:
    assert classify_delivery(error, retries=0).type == "fail"
    for retries in (1, RETRIES_ON):
        c = classify_delivery(error, retries=retries)
        assert c.type == "info"
        assert "earlier attempt" in c.reason


def test_an_unknown_error_is_never_fail() -> None:
    for retries in (0, RETRIES_ON):
        c = classify_delivery("SOMETHING_NEW", retries=retries)
        assert (c.type, c.error) == ("info", "SOMETHING_NEW")


def test_fail_needs_a_not_persisted_rule() -> None:
    """The one way to fail from a delivery report: NOT_PERSISTED and no retries."""
    names = [*DELIVERY_ERRORS, "SOMETHING_NEW"]
    for name in names:
        if classify_delivery(name, retries=0).type == "fail":
            assert DELIVERY_ERRORS[name].status is Persisted.NOT_PERSISTED
        assert classify_delivery(name, retries=RETRIES_ON).type == "info"


@pytest.mark.parametrize("error", ["_QUEUE_FULL", "MSG_SIZE_TOO_LARGE", "_UNKNOWN_PARTITION",
                                   "SOMETHING_NEW"])
def test_a_refused_produce_call_is_fail(error: str) -> None:
    c = classify_produce_call(error)
    assert (c.type, c.error) == ("fail", error)
