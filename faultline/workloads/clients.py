"""What every client of a workload shares: process numbers, unique values, the journal,
Kafka client configs, and how a record's value and a client's error are read.

Owns no client loop: :mod:`faultline.workloads.queue` drives producers and consumers,
:mod:`faultline.workloads.drain` reads partitions back after the run.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from faultline.history import VALUE_MAX, HistoryWriter, OpType, PendingOp, Process
from faultline.spec import TestSpec

#: Messages one producer may have queued or in flight before it waits.
MAX_OUTSTANDING = 5000
#: Records one ``consume()`` call may return.
POLL_MAX_RECORDS = 1000
#: Seconds one ``consume()`` call may wait for records.
POLL_TIMEOUT_S = 0.1
#: How long a workload's start waits for a client in a process of its own (a child, a
#: JVM) to journal its first op.
FIRST_OP_TIMEOUT_S = 120.0

_log = logging.getLogger(__name__)
rdkafka_log = logging.getLogger("faultline.rdkafka")
#: How a client runs in a child process: spawned, never forked (the parent runs threads).
_SPAWN = multiprocessing.get_context("spawn")


class ProcessIds:
    """Hands out process numbers, each once; safe across threads, and across the child
    processes it is handed to (:mod:`.crashable`): one counter in shared memory."""

    def __init__(self, first: int) -> None:
        self._next = _SPAWN.Value("q", first)

    @property
    def lock(self) -> Any:
        """The counter's lock (held by a taker): a child killed while another holds it
        cannot have died holding it, and would leave it held for good."""
        return self._next.get_lock()

    def take(self) -> int:
        """A process number never handed out before."""
        with self.lock:
            n: int = self._next.value
            self._next.value = n + 1
            return n


class Values:
    """The run's unique send values 0, 1, 2, ...; safe across threads and the child
    processes it is handed to, as :class:`ProcessIds`."""

    def __init__(self) -> None:
        self._next = _SPAWN.Value("q", 0)

    @property
    def lock(self) -> Any:
        """The counter's lock, as :attr:`ProcessIds.lock`."""
        return self._next.get_lock()

    def take_many(self, n: int) -> list[int]:
        """``n`` values no send has carried before."""
        with self.lock:
            first: int = self._next.value
            self._next.value = first + n
        return list(range(first, first + n))


class Journal:
    """Where a client writes its ops: a HistoryWriter, or nowhere (for benchmarks).

    Without a history every ``append`` is a no-op, so the same client code can be
    measured with and without journaling.
    """

    __slots__ = ("_history",)

    def __init__(self, history: HistoryWriter | None) -> None:
        self._history = history

    def append(self, process: Process, type: OpType, f: str, value: Any = None,
               error: str | None = None) -> None:
        if self._history is not None:
            self._history.append(process, type, f, value, error)

    def now(self) -> int:
        """The history's clock now (ns); 0 without a history."""
        return self._history.now() if self._history is not None else 0

    def append_many(self, ops: list[PendingOp]) -> None:
        """Journal ``ops`` in order with one write (see ``HistoryWriter.append_many``)."""
        if self._history is not None and ops:
            self._history.append_many(ops)


class ClientLog:
    """The producers' client-library log, as JSON lines on the history's clock
    (``client-log.jsonl``, docs/history.md): what lets a duplicate be lined up with the
    client's epoch bumps, sequence errors and request timeouts.

    Each line: ``time`` (ns, ``clock``: the history's), ``process``, ``client`` (the
    library's instance name), ``level`` (``debug`` ... ``critical``), ``facility``
    (librdkafka's, e.g. ``DRAIN``, ``REQTMOUT``; ``ERROR`` for the error callback) and
    ``message``. librdkafka's lines reach Python on the thread that polls the client,
    so a line's time is when it was served, at most one poll interval late. Every line
    at info or above also goes to the ``faultline.rdkafka`` logger, as before. Writes
    are handed to the OS line by line under a lock; thread-safe.
    """

    def __init__(self, path: Path, clock: Callable[[], int]) -> None:
        self.path = path
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - closed by close()
        self._clock = clock
        self._lock = threading.Lock()

    def for_process(self, process: int) -> ProcessLog:
        """The logger to give one client instance of ``process`` (its ``logger`` setting)."""
        return ProcessLog(self, process)

    def write(self, process: int, client: str, level: int, facility: str, message: str) -> None:
        """One line; ``level`` as :mod:`logging` numbers it."""
        name = logging.getLevelName(level).lower()
        line = orjson.dumps({"time": self._clock(), "process": process, "client": client,
                             "level": name, "facility": facility, "message": message}) + b"\n"
        with self._lock:
            if not self._file.closed:
                self._file.write(line)
        if level >= logging.INFO:
            rdkafka_log.log(level, "%s [%s] %s", facility, client, message)

    def close(self) -> None:
        """Close the file; later lines are dropped."""
        with self._lock:
            self._file.close()


@dataclass(frozen=True, slots=True)
class ProcessLog:
    """A :class:`ClientLog` as one process's client library sees a logger: confluent-kafka
    calls ``log(level, "%s [%s] %s", facility, instance name, message)``."""

    client_log: ClientLog
    process: int

    def log(self, level: int, fmt: str, *args: Any) -> None:
        if len(args) == 3:
            facility, client, message = (str(a) for a in args)
        else:  # not the shape confluent-kafka uses: keep the text whole
            facility, client, message = "", "", fmt % args if args else fmt
        self.client_log.write(self.process, client, level, facility, message)


@dataclass(slots=True)
class SendCounts:
    """Completed sends by outcome; written only by the owning client's thread."""

    ok: int = 0
    fail: int = 0
    info: int = 0


@dataclass(slots=True)
class WorkloadStats:
    """A snapshot of the workload's progress, for the terminal and the benchmark."""

    invoked: int = 0
    ok: int = 0
    fail: int = 0
    info: int = 0
    polls: int = 0
    polled_records: int = 0
    retired: int = 0

    def ended(self, outcome: str) -> None:
        """Count one completion: ``ok``, ``fail``, else ``info``."""
        if outcome == "ok":
            self.ok += 1
        elif outcome == "fail":
            self.fail += 1
        else:
            self.info += 1


def producer_config(spec: TestSpec, bootstrap: str, client_id: str) -> dict[str, Any]:
    """librdkafka settings for a workload producer, from the spec's producer section."""
    p = spec.producer
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "acks": p.acks,
        "enable.idempotence": p.enable_idempotence,
        "retries": p.retries,
        "max.in.flight.requests.per.connection": p.max_in_flight,
        "delivery.timeout.ms": p.delivery_timeout_ms,
        "request.timeout.ms": p.request_timeout_ms,
        "linger.ms": p.linger_ms,
        # Room above MAX_OUTSTANDING, so produce() never refuses with _QUEUE_FULL.
        "queue.buffering.max.messages": max(100_000, 4 * MAX_OUTSTANDING),
        # Faults come and go within seconds; the 10 s default backoff would hide recovery.
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 5000,
        "logger": rdkafka_log,
    }


def consumer_config(spec: TestSpec, bootstrap: str, client_id: str) -> dict[str, Any]:
    """librdkafka settings for a workload or drain consumer (assign mode, no commits)."""
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        # Required by the client, unused: assign() joins no group and nothing commits.
        "group.id": spec.group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "isolation.level": spec.consumer.isolation_level,
        "fetch.wait.max.ms": 100,
        # Bound the prefetch buffer (default 64 MB per consumer): memory stays flat.
        "queued.max.messages.kbytes": 16384,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 5000,
        "logger": rdkafka_log,
    }


def decode_value(raw: bytes | None) -> int | str | None:
    """A record value as the history holds it: an int for canonical decimal ASCII that a
    send can carry (up to VALUE_MAX), else the text as it is (bytes that are not UTF-8
    escaped), None for a null value (docs/history.md)."""
    if raw is None:
        return None
    if raw.isdigit() and (raw[0] != 0x30 or len(raw) == 1):  # bytes.isdigit: ASCII only
        value = int(raw)
        if value <= VALUE_MAX:
            return value
    return raw.decode("utf-8", "backslashreplace")


def journal_poll(journal: Journal, process: int, msgs: list[Message]) -> int:
    """Journal the end of a ``consume()`` that returned ``msgs``: ``ok`` with their records
    as ``[topic, partition, offset, value]`` (``error`` naming the first error event among
    them, if any), or ``fail`` when they were only error events; returns the records' count."""
    records: list[list[Any]] = []
    error: str | None = None
    for m in msgs:
        err = m.error()
        if err is not None:
            error = error or str(err.name())
            continue
        records.append([m.topic(), m.partition(), m.offset(), decode_value(m.value())])
    if error is not None and not records:
        journal.append(process, "fail", "poll", {"records": []}, error)
    else:
        journal.append(process, "ok", "poll", {"records": records}, error)
    return len(records)


def kafka_error(e: BaseException) -> KafkaError | None:
    """The KafkaError a KafkaException carries, or None."""
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return e.args[0]
    return None


def error_name(e: BaseException) -> str:
    err = kafka_error(e)
    return str(err.name()) if err is not None else type(e).__name__


def close_quietly(consumer: Consumer) -> None:
    try:
        consumer.close()
    except (KafkaException, RuntimeError) as e:
        _log.warning("closing a consumer failed: %s", e)
