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


def test_every_name_in_the_table_is_a_librdkafka_error() -> None:
    """A misspelt name would silently fall through to the unknown-error rule."""
    for name in [*DELIVERY_ERRORS, *PRODUCE_CALL_ERRORS]:
        assert hasattr(KafkaError, name), name
        assert KafkaError(getattr(KafkaError, name)).name() == name


def test_every_rule_has_a_reason() -> None:
    for name, rule in DELIVERY_ERRORS.items():
        assert len(rule.reason) > 20, name


def test_success_is_ok() -> None:
    c = classify_delivery(None)
    assert (c.type, c.error) == ("ok", None)


@pytest.mark.parametrize("error", [
    "_MSG_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT", "REQUEST_TIMED_OUT",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "DUPLICATE_SEQUENCE_NUMBER", "_PURGE_INFLIGHT", "_FATAL", "_DESTROY",
])
def test_possibly_persisted_errors_are_info(error: str) -> None:
    c = classify_delivery(error)
    assert (c.type, c.error) == ("info", error)


def test_not_leader_is_indeterminate_despite_librdkafka() -> None:
    """KAFKA-13574: NOT_LEADER_OR_FOLLOWER can answer a batch that is later committed."""
    assert delivery_rule("NOT_LEADER_FOR_PARTITION").status is Persisted.POSSIBLY_PERSISTED
    assert "KAFKA-13574" in delivery_rule("NOT_LEADER_FOR_PARTITION").reason
    assert classify_delivery("NOT_LEADER_FOR_PARTITION").type == "info"


@pytest.mark.parametrize("error", [
    "NOT_ENOUGH_REPLICAS", "UNKNOWN_TOPIC_OR_PART", "TOPIC_AUTHORIZATION_FAILED",
    "MSG_SIZE_TOO_LARGE", "INVALID_RECORD", "_PURGE_QUEUE", "INVALID_PRODUCER_EPOCH",
])
def test_a_definite_rejection_speaks_only_for_the_last_attempt(error: str) -> None:
    """Found by review: even with retries=0, librdkafka re-sends without counting a retry
    after an error that refreshes metadata (_DESTROY_BROKER with the request in flight,
    NOT_LEADER_FOR_PARTITION), so an earlier attempt may have been written: a fail
    here would make its later read a false aborted-read."""
    c = classify_delivery(error)
    assert c.type == "info" and c.error == error
    assert "earlier attempt" in c.reason and "retries=0" in c.reason


def test_no_delivery_report_is_fail() -> None:
    """Only a refused produce() call is fail; every delivery error, known or not, is info."""
    for name in [*DELIVERY_ERRORS, "SOMETHING_NEW"]:
        assert (classify_delivery(name).type, classify_delivery(name).error) == ("info", name)


@pytest.mark.parametrize("error", ["_QUEUE_FULL", "MSG_SIZE_TOO_LARGE", "_UNKNOWN_PARTITION",
                                   "SOMETHING_NEW"])
def test_a_refused_produce_call_is_fail(error: str) -> None:
    c = classify_produce_call(error)
    assert (c.type, c.error) == ("fail", error)
