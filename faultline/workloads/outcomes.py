"""How a send ends: the error -> ``ok`` / ``fail`` / ``info`` table, with the reason for each.

A ``fail`` claims the message was certainly *not* written, and the checker holds the
cluster to it (a ``fail`` whose value is later read is an ``aborted-read``); so a send is
``fail`` only when the message cannot be in the log, ``info`` whenever it may be. No
delivery report proves that no attempt was written, so only a ``produce()`` call that
raised (the message never entered the client's queue) is a ``fail``; every delivery
error is ``info``. How this follows from librdkafka's own persistence status, and where
it is more cautious: docs/design.md, "How a send ends".

A send open when its client was killed (the ``clients`` family) ends ``info`` with
:data:`CRASH_ERROR`, for either client (:func:`crashed_sends`).

Pure: errors are named by librdkafka's ``KafkaError.name()`` strings; no Kafka client is
imported.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from faultline.history import PendingOp, Process

SendOutcome = Literal["ok", "fail", "info"]


class Persisted(enum.IntEnum):
    """librdkafka's ``rd_kafka_msg_status_t``, in its order (a status only goes up)."""

    NOT_PERSISTED = 0
    POSSIBLY_PERSISTED = 1
    PERSISTED = 2


@dataclass(frozen=True, slots=True)
class ErrorRule:
    """What one error says about the attempt that produced it, and why."""

    status: Persisted
    reason: str


@dataclass(frozen=True, slots=True)
class Classification:
    """The outcome of one send: its history ``type``, ``error`` name and the reason."""

    type: SendOutcome
    error: str | None
    reason: str


_NOT = Persisted.NOT_PERSISTED
_MAYBE = Persisted.POSSIBLY_PERSISTED

#: Delivery-report errors, keyed by ``KafkaError.name()``. ``status`` is what the error
#: says about the attempt that returned it; :func:`classify_delivery` then accounts for
#: earlier attempts (point 2 above).
DELIVERY_ERRORS: Mapping[str, ErrorRule] = {
    # -- broker rejections before the append: the log is untouched ----------------------
    "NOT_ENOUGH_REPLICAS": ErrorRule(
        _NOT, "the leader checks ISR size >= min.insync.replicas before appending and "
              "rejected the batch (librdkafka: RETRY | MSG_NOT_PERSISTED)"),
    "UNKNOWN_TOPIC_OR_PART": ErrorRule(
        _NOT, "the broker does not host the partition, nothing was appended "
              "(librdkafka: REFRESH | MSG_NOT_PERSISTED)"),
    "LEADER_NOT_AVAILABLE": ErrorRule(
        _NOT, "no leader to append to (librdkafka: REFRESH | MSG_NOT_PERSISTED)"),
    "BROKER_NOT_AVAILABLE": ErrorRule(
        _NOT, "the broker refused the request (librdkafka: REFRESH | MSG_NOT_PERSISTED)"),
    "REPLICA_NOT_AVAILABLE": ErrorRule(
        _NOT, "the replica is not available to append (librdkafka: REFRESH | "
              "MSG_NOT_PERSISTED)"),
    "TOPIC_AUTHORIZATION_FAILED": ErrorRule(
        _NOT, "authorization is checked before the append (librdkafka: PERMANENT | "
              "MSG_NOT_PERSISTED)"),
    "MSG_SIZE_TOO_LARGE": ErrorRule(
        _NOT, "the batch fails validation before the append (librdkafka default: "
              "PERMANENT | MSG_NOT_PERSISTED)"),
    "RECORD_LIST_TOO_LARGE": ErrorRule(
        _NOT, "the batch fails validation before the append (librdkafka default: "
              "PERMANENT | MSG_NOT_PERSISTED)"),
    "INVALID_MSG": ErrorRule(
        _NOT, "CORRUPT_MESSAGE: the batch fails its CRC check before the append "
              "(librdkafka: RETRY | MSG_NOT_PERSISTED)"),
    "INVALID_RECORD": ErrorRule(
        _NOT, "the batch fails validation before the append (librdkafka default: "
              "PERMANENT | MSG_NOT_PERSISTED)"),
    "INVALID_REQUIRED_ACKS": ErrorRule(
        _NOT, "the request is rejected as a whole (librdkafka default: PERMANENT | "
              "MSG_NOT_PERSISTED)"),
    "UNKNOWN_PRODUCER_ID": ErrorRule(
        _NOT, "the broker has no state for this producer id and rejects the batch "
              "(librdkafka: PERMANENT | MSG_NOT_PERSISTED)"),
    "INVALID_PRODUCER_EPOCH": ErrorRule(
        _NOT, "a fenced epoch is rejected before the append (librdkafka: PERMANENT | "
              "MSG_NOT_PERSISTED)"),
    "_PURGE_QUEUE": ErrorRule(
        _NOT, "purged from the client's queue; this attempt was never sent (an earlier "
              "one may have been)"),
    "_UNKNOWN_PARTITION": ErrorRule(
        _NOT, "the partition vanished from metadata while the message was queued; this "
              "attempt was never sent"),
    "_UNKNOWN_TOPIC": ErrorRule(
        _NOT, "the topic vanished from metadata while the message was queued; this "
              "attempt was never sent"),
    # -- the request may have been appended: indeterminate ----------------------------------
    "_MSG_TIMED_OUT": ErrorRule(
        _MAYBE, "delivery.timeout.ms expired; librdkafka reports POSSIBLY_PERSISTED when "
                "the message was in flight and NOT_PERSISTED when it never left the "
                "queue, and the Python client does not say which"),
    "_TIMED_OUT": ErrorRule(
        _MAYBE, "the request timed out in flight (librdkafka: RETRY | "
                "MSG_POSSIBLY_PERSISTED)"),
    "_TRANSPORT": ErrorRule(
        _MAYBE, "the connection broke with the request possibly sent (librdkafka: "
                "REFRESH | MSG_POSSIBLY_PERSISTED)"),
    "REQUEST_TIMED_OUT": ErrorRule(
        _MAYBE, "the leader appended and gave up waiting for the ISR; followers may "
                "still replicate it (librdkafka: RETRY | MSG_POSSIBLY_PERSISTED)"),
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": ErrorRule(
        _MAYBE, "the leader appended, then the ISR shrank below min.insync.replicas "
                "(librdkafka: RETRY | MSG_POSSIBLY_PERSISTED)"),
    "NOT_LEADER_FOR_PARTITION": ErrorRule(
        _MAYBE, "NOT_LEADER_OR_FOLLOWER can answer a batch that was appended and is later "
                "committed by the new leader (KAFKA-13574; Jepsen treats it as "
                "indeterminate). librdkafka says NOT_PERSISTED; we do not trust that"),
    "KAFKA_STORAGE_ERROR": ErrorRule(
        _MAYBE, "the log directory failed, possibly after the append reached the log "
                "(librdkafka says NOT_PERSISTED; we are more cautious)"),
    "OUT_OF_ORDER_SEQUENCE_NUMBER": ErrorRule(
        _MAYBE, "idempotence lost track of which batches landed (librdkafka: PERMANENT | "
                "MSG_POSSIBLY_PERSISTED)"),
    "DUPLICATE_SEQUENCE_NUMBER": ErrorRule(
        _MAYBE, "the broker already holds a batch with this sequence, but gives no offset "
                "(librdkafka: PERMANENT | MSG_POSSIBLY_PERSISTED)"),
    "_PURGE_INFLIGHT": ErrorRule(
        _MAYBE, "purged while in flight (librdkafka: PERMANENT | MSG_POSSIBLY_PERSISTED)"),
    "_BAD_MSG": ErrorRule(
        _MAYBE, "the response could not be parsed; the request may have been applied "
                "(librdkafka: PERMANENT | MSG_POSSIBLY_PERSISTED)"),
    "_FATAL": ErrorRule(
        _MAYBE, "an idempotent-producer fatal error fails every queued and in-flight "
                "message, some of which may have been written"),
    "_GAPLESS_GUARANTEE": ErrorRule(
        _MAYBE, "raised after a batch in the sequence failed; later batches may have "
                "been sent"),
    "_DESTROY": ErrorRule(
        _MAYBE, "the client was closed with the message outstanding, possibly in flight"),
}

#: Errors raised by ``produce()`` itself: the message never entered the client's queue.
PRODUCE_CALL_ERRORS: Mapping[str, str] = {
    "_QUEUE_FULL": "queue.buffering.max.messages reached; produce() refused the message",
    "MSG_SIZE_TOO_LARGE": "larger than message.max.bytes; produce() refused the message",
    "_UNKNOWN_PARTITION": "the partition is not in the client's metadata; produce() "
                          "refused the message",
    "_UNKNOWN_TOPIC": "the topic is not in the client's metadata; produce() refused it",
    "_INVALID_ARG": "produce() rejected its arguments",
    "_STATE": "the producer is in a state (fatal error, closing) that refuses produce()",
    "_FATAL": "the producer had a fatal error; produce() refused the message",
}

_UNKNOWN_ERROR = ErrorRule(
    _MAYBE, "an error this table does not know: assumed possibly written, since a wrong "
            "fail would invent an aborted-read")

_EARLIER_ATTEMPT = (
    "; but an earlier attempt of this message may have been sent and written (a "
    "counted retry, or with retries=0 a re-send librdkafka does not count after an "
    "error that refreshes metadata), so it is not certainly unwritten")


def delivery_rule(error: str) -> ErrorRule:
    """The table's rule for a delivery-report error name (unknown names: possibly written)."""
    return DELIVERY_ERRORS.get(error, _UNKNOWN_ERROR)


def classify_delivery(error: str | None) -> Classification:
    """Classify a send from its delivery report.

    ``error`` is ``KafkaError.name()`` or None for success. Contract: ``ok`` only for
    ``error is None``, else ``info``: no delivery report proves that no attempt of the
    message was written (the module docstring, point 2), whatever ``retries`` is.
    """
    if error is None:
        return Classification("ok", None, "acknowledged by the broker (PERSISTED)")
    rule = delivery_rule(error)
    if rule.status is Persisted.NOT_PERSISTED:
        return Classification("info", error, rule.reason + _EARLIER_ATTEMPT)
    return Classification("info", error, rule.reason)


def classify_produce_call(error: str) -> Classification:
    """Classify a send whose ``produce()`` call raised: it never entered the queue.

    ``error`` is the KafkaError name (``_QUEUE_FULL`` for ``BufferError``). Every such
    send is ``fail``: librdkafka did not accept the message, so nothing can send it.
    """
    reason = PRODUCE_CALL_ERRORS.get(error, "produce() raised; the message was not accepted")
    return Classification("fail", error, reason)


#: The error of a send that was open when its client was killed.
CRASH_ERROR = "_CLIENT_CRASH"


def crashed_sends(open_sends: Iterable[tuple[Process, Any]]) -> list[PendingOp]:
    """The completions of the sends a killed client left open, ``(process, value)`` each:
    ``info`` with :data:`CRASH_ERROR`, since the client may have handed any of them to a
    broker before it died, or not."""
    return [(process, "info", "send", value, CRASH_ERROR) for process, value in open_sends]


def crashed_transaction(process: Process, value: Any, invoked: int) -> PendingOp:
    """The completion of a transaction (``txn``, invoked at history time ``invoked``) a
    killed client left open: ``info`` with :data:`CRASH_ERROR`. One it did not mean to
    abort carries ``committing`` ``invoked``: it may have asked to commit any time since."""
    return process, "info", "txn", value if value["abort"] else {**value, "committing": invoked}, CRASH_ERROR
