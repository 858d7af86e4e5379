"""The queue workload: producers send unique integers, consumers read every partition.

Each client thread drives one Kafka client instance at a time and journals its ops under
a *process* number (docs/history.md): producers ``0..N-1``, consumers ``N..N+M-1``, every
later number (a retired client's successor, the drain's readers) from one
:class:`ProcessIds` counter, never used twice. A send's ``invoke`` is journaled before
``produce()`` is called, its completion from the delivery callback; up to
:data:`MAX_OUTSTANDING` sends per producer are queued or in flight, split evenly between
the partitions; each carries a value unique within the run (:class:`Values`), as decimal
ASCII, to an explicit partition, and :mod:`.outcomes` decides how it ended. A client
whose op ended ``info`` is retired: a fresh instance under a new process number takes
over, and the old one's outstanding sends complete under its number. Consumers
``assign`` every partition from ``OFFSET_BEGINNING`` (no group, no commits) and journal
each ``consume()`` as one ``poll`` with ``records`` as ``[topic, partition, offset,
value]``; a value that is not a canonical decimal integer stays a string, for the
checker to flag. Why the budget is split and a retired client is a fresh instance:
docs/design.md, "The queue workload". The drain is :mod:`.drain`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from faultline.history import HistoryWriter, PendingOp
from faultline.spec import TestSpec
from faultline.workloads.clients import (
    MAX_OUTSTANDING,
    POLL_MAX_RECORDS,
    POLL_TIMEOUT_S,
    ClientLog,
    Journal,
    ProcessIds,
    SendCounts,
    Values,
    WorkloadStats,
    close_quietly,
    consumer_config,
    decode_value,
    error_name,
    journal_poll,
    producer_config,
    rdkafka_log,
)
from faultline.workloads.outcomes import classify_delivery, classify_produce_call

#: Sends one producer journals (one write) and then produces, at most.
SEND_BATCH = 256
#: As fast as it goes, a producer waits until it has room for this many sends.
MIN_BATCH = 64

_log = logging.getLogger(__name__)


# -- producers -----------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _ProducerSession:
    """One producer instance and the process number its sends are journaled under."""

    process: int
    producer: Producer
    outstanding: list[int]
    retired: bool = False
    on_delivery: Callable[[KafkaError | None, Message], None] | None = None


@dataclass(slots=True, eq=False)
class QueueProducer:
    """One producer client (one thread). See the module docstring for its contract.

    ``rate`` is this producer's target sends per second, 0 for as fast as it goes.
    Call :meth:`run` on the client's thread; it returns after ``stop`` is set and every
    outstanding send has completed (or been purged after the delivery timeout).

    Journaling is batched without weakening the contract: a batch of invokes is
    handed to the OS in one write *before* any of its messages is produced, and the
    completions served by one ``poll()`` are written before any further invoke: in
    the same write as the next batch of invokes, or right after a waiting poll. A
    crash in between can only leave a send open (indeterminate), never a completion
    without its invoke.
    """

    spec: TestSpec
    bootstrap: str
    journal: Journal
    first_process: int
    processes: ProcessIds
    values: Values
    rate: float = 0.0
    index: int = 0
    client_log: ClientLog | None = None
    counts: SendCounts = field(default_factory=SendCounts)
    invoked: int = 0
    retired: int = 0
    _session: _ProducerSession | None = field(default=None, init=False)
    _old: list[_ProducerSession] = field(default_factory=list, init=False)
    _done: list[PendingOp] = field(default_factory=list, init=False)

    def run(self, stop: threading.Event) -> None:
        """Send until ``stop`` is set, then complete every outstanding send."""
        topic = self.spec.topic.name
        partitions = self.spec.topic.partitions
        journal = self.journal
        session = self._open(self.first_process)
        next_partition = self.index % partitions
        budget = max(1, MAX_OUTSTANDING // partitions)  # outstanding sends per partition
        interval = 1.0 / self.rate if self.rate > 0 else 0.0
        due = time.monotonic()
        try:
            while not stop.is_set():
                if session.retired:
                    session = self._replace(session)
                producer = session.producer
                if self._old:
                    self._reap()
                outstanding = session.outstanding
                room = sum(max(0, budget - o) for o in outstanding)
                if interval:
                    now = time.monotonic()
                    if due > now:
                        self._poll(session, min(due - now, 0.05))
                        continue
                    n = min(room, SEND_BATCH, int((now - due) / interval) + 1)
                    due = max(due + max(n, 0) * interval, now - 1.0)
                else:
                    # Wait for room for a real batch: fewer, larger writes and loops.
                    n = min(room, SEND_BATCH) if room >= MIN_BATCH else 0
                if n <= 0:
                    self._poll(session, 0.005)
                    continue
                process = session.process
                batch: list[tuple[int, int]] = []
                # Completions served by the last poll(0) go first, in the same write.
                ops, self._done = self._done, []
                for value in self.values.take_many(n):
                    while outstanding[next_partition] >= budget:  # n <= room: ends
                        next_partition = (next_partition + 1) % partitions
                    partition = next_partition
                    next_partition = (next_partition + 1) % partitions
                    outstanding[partition] += 1
                    batch.append((partition, value))
                    ops.append((process, "invoke", "send",
                                {"topic": topic, "partition": partition, "value": value}, None))
                journal.append_many(ops)  # on disk before any of them is produced
                self.invoked += n
                on_delivery = session.on_delivery
                for partition, value in batch:
                    try:
                        producer.produce(topic, str(value).encode("ascii"), partition=partition,
                                         on_delivery=on_delivery)
                    except BufferError:
                        self._refused(session, partition, value, "_QUEUE_FULL")
                    except KafkaException as e:
                        self._refused(session, partition, value, error_name(e))
                # Serve callbacks; their completions are journaled with the next batch of
                # invokes (or by the next wait), microseconds from now.
                _serve(session, 0)
        finally:
            self._finish(self._flush_timeout_s())

    def _poll(self, session: _ProducerSession, timeout: float) -> None:
        """Serve delivery callbacks, then journal the completions they produced."""
        _serve(session, timeout)
        self._journal_done()

    def _journal_done(self) -> None:
        if self._done:
            done, self._done = self._done, []
            self.journal.append_many(done)

    def _flush_timeout_s(self) -> float:
        p = self.spec.producer
        return (p.delivery_timeout_ms + p.request_timeout_ms) / 1000 + 5.0

    def _open(self, process: int) -> _ProducerSession:
        session: _ProducerSession | None = None

        client_id = f"faultline-p{process}"
        client_log = self.client_log

        def on_error(err: KafkaError) -> None:
            # A fatal (idempotence) error leaves the instance unusable: replace it. Its
            # outstanding sends complete as librdkafka purges them (_PURGE_QUEUE, _FATAL):
            # info, as every delivery error.
            if err.fatal() and session is not None:
                session.retired = True
            if client_log is None:
                rdkafka_log.warning("producer p%s: %s", process, err)
            else:
                client_log.write(process, client_id, logging.ERROR if err.fatal() else logging.WARNING,
                                 "ERROR", str(err))

        conf = producer_config(self.spec, self.bootstrap, client_id)
        conf["error_cb"] = on_error
        if client_log is not None:
            conf["logger"] = client_log.for_process(process)
            if self.spec.producer.enable_idempotence:
                # The idempotence state machine's own lines (producer id, epoch bumps,
                # drains): a few per event, none per message.
                conf["debug"] = "eos"
        session = _ProducerSession(process, Producer(conf), [0] * self.spec.topic.partitions)
        s = session  # one callback per instance, not one closure per send
        session.on_delivery = lambda err, msg: self._delivered(s, err, msg)
        self._session = session
        return session

    def _replace(self, session: _ProducerSession) -> _ProducerSession:
        self._old.append(session)
        self.retired += 1
        return self._open(self.processes.take())

    def _reap(self) -> None:
        """Serve retired instances' callbacks; drop those with nothing outstanding."""
        keep: list[_ProducerSession] = []
        for s in self._old:
            self._poll(s, 0)
            if len(s.producer) > 0:
                keep.append(s)
        self._old = keep

    def _delivered(self, session: _ProducerSession, err: KafkaError | None, msg: Message) -> None:
        partition = msg.partition()
        if partition is not None:  # always set: every send names its partition
            session.outstanding[partition] -= 1
        value = decode_value(msg.value())
        c = classify_delivery(None if err is None else str(err.name()))

        v: dict[str, Any] = {"topic": self.spec.topic.name, "partition": partition,
                             "value": value}
        if c.type == "ok":
            # With acks=0 nothing answers and librdkafka numbers a batch's messages up from
            # an invalid base offset (-1001, -1000, ...; rd_kafka_msgq_set_metadata), which
            # passes 0 from a batch's 1002nd message on: no acks=0 offset is the record's.
            offset = msg.offset() if self.spec.producer.acks != "0" else None
            v["offset"] = offset if offset is not None and offset >= 0 else -1
            self.counts.ok += 1
        else:  # classify_delivery: ok or info, never fail
            self.counts.info += 1
            session.retired = True
        self._done.append((session.process, c.type, "send", v, c.error))

    def _refused(self, session: _ProducerSession, partition: int, value: int, error: str) -> None:
        session.outstanding[partition] -= 1
        c = classify_produce_call(error)
        self.counts.fail += 1
        self._done.append((session.process, c.type, "send",
                           {"topic": self.spec.topic.name, "partition": partition,
                            "value": value}, c.error))
        if error in ("_FATAL", "_STATE"):
            session.retired = True

    def _finish(self, timeout_s: float) -> None:
        """Complete every outstanding send of every instance, purging what is left."""
        sessions = ([self._session] if self._session else []) + self._old
        deadline = time.monotonic() + timeout_s
        self._journal_done()
        for s in sessions:
            while len(s.producer) > 0 and time.monotonic() < deadline:
                self._poll(s, min(0.1, max(0.0, deadline - time.monotonic())))
        for s in sessions:
            if len(s.producer) > 0:
                # Purged sends report _PURGE_QUEUE / _PURGE_INFLIGHT, classified as usual.
                s.producer.purge()
                s.producer.flush(5.0)
                self._journal_done()
            if len(s.producer) > 0:
                _log.warning("producer p%s closed with %d sends unresolved",
                             s.process, len(s.producer))
        self._old = []
        self._session = None


def _serve(session: _ProducerSession, timeout: float) -> None:
    """``poll()`` the session's instance. librdkafka raises a fatal (idempotence) error from
    ``poll()`` as well as through ``error_cb``: the instance is then unusable and is retired
    like any other; its outstanding sends complete as librdkafka purges them (info) or are
    purged at the end. Any other exception is a bug and propagates."""
    try:
        session.producer.poll(timeout)
    except KafkaException as e:
        if not e.args[0].fatal():
            raise
        session.retired = True


# -- consumers -----------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class QueueConsumer:
    """One consumer client (one thread): assigns every partition from the start and
    journals each ``consume()`` as a ``poll`` op.

    Poll outcomes: ``ok`` with the records returned (if the batch also held error
    events, ``error`` names the first); ``fail`` when the batch held only errors (a
    read that returned nothing changed nothing); ``info`` when ``consume()`` raised,
    after which the consumer is replaced by a fresh one under a new process number.
    """

    spec: TestSpec
    bootstrap: str
    journal: Journal
    first_process: int
    processes: ProcessIds
    polls: int = 0
    records: int = 0
    retired: int = 0

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set; closes its consumer before returning."""
        process = self.first_process
        consumer = self._open(process)
        journal = self.journal
        try:
            while not stop.is_set():
                journal.append(process, "invoke", "poll", None)
                try:
                    msgs = consumer.consume(POLL_MAX_RECORDS, POLL_TIMEOUT_S)
                except (KafkaException, RuntimeError) as e:
                    journal.append(process, "info", "poll", None, error_name(e))
                    self.polls += 1
                    self.retired += 1
                    close_quietly(consumer)
                    process = self.processes.take()
                    consumer = self._open(process)
                    continue
                self.polls += 1
                self.records += journal_poll(journal, process, msgs)
        finally:
            close_quietly(consumer)

    def _open(self, process: int) -> Consumer:
        conf = consumer_config(self.spec, self.bootstrap, f"faultline-c{process}")
        conf["error_cb"] = lambda err: rdkafka_log.warning("consumer c%s: %s", process, err)
        consumer = Consumer(conf)
        topic = self.spec.topic.name
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                         for p in range(self.spec.topic.partitions)])
        return consumer


# -- the workload as a whole -----------------------------------------------------------------


class ProducerClient(Protocol):
    """What the workload drives of a producer client: :meth:`run` on its thread until
    ``stop`` is set, and its counts of ops invoked, completed by outcome, and instances retired."""

    invoked: int
    retired: int
    counts: SendCounts

    def run(self, stop: threading.Event) -> None: ...


class ConsumerClient(Protocol):
    """A consumer client as :class:`QueueWorkload` drives it: ``run`` on its thread until
    the stop event (then it closes), counting its polls, records and retired instances."""

    polls: int
    records: int
    retired: int

    def run(self, stop: threading.Event) -> None: ...


class QueueWorkload:
    """N producers and M consumers on their own threads, sharing one history (and the
    producers one :class:`ClientLog`, when given: the caller opens and closes it).

    Contract: :meth:`start` launches every client; :meth:`stop` asks them to stop,
    waits until each producer's outstanding sends have completed (bounded by the
    delivery timeout plus a margin) and every consumer is closed, then returns. No
    client thread is left running after ``stop`` returns, except one stuck in the
    client library past the bound, which is a daemon and logged. A subclass makes other
    clients by overriding :meth:`_producer` or :meth:`_consumer`.
    """

    def __init__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter | None,
                 processes: ProcessIds | None = None, values: Values | None = None, *,
                 client_log: ClientLog | None = None) -> None:
        w = spec.workload
        self.spec = spec
        self.journal = Journal(history)
        self.processes = processes or ProcessIds(w.producers + w.consumers)
        self.values = values or Values()
        per_producer_rate = w.rate / w.producers if w.rate > 0 else 0.0
        self.producers: list[ProducerClient] = [
            self._producer(spec, bootstrap, i, per_producer_rate, client_log)
            for i in range(w.producers)
        ]
        self.consumers = [
            self._consumer(spec, bootstrap, w.producers + j)
            for j in range(w.consumers)
        ]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []

    def _producer(self, spec: TestSpec, bootstrap: str, index: int, rate: float,
                  client_log: ClientLog | None) -> ProducerClient:
        """Producer ``index`` (process ``index``), sending ``rate`` per second (0: as fast as it goes)."""
        return QueueProducer(spec, bootstrap, self.journal, index, self.processes, self.values,
                             rate=rate, index=index, client_log=client_log)

    def _consumer(self, spec: TestSpec, bootstrap: str, process: int) -> ConsumerClient:
        """The consumer of first process ``process``."""
        return QueueConsumer(spec, bootstrap, self.journal, process, self.processes)

    def start(self) -> None:
        """Start every client thread."""
        for i, p in enumerate(self.producers):
            self._spawn(f"faultline-producer-{i}", p.run)
        for j, c in enumerate(self.consumers):
            self._spawn(f"faultline-consumer-{j}", c.run)

    def _spawn(self, name: str, target: Callable[[threading.Event], None]) -> None:
        def body() -> None:
            try:
                target(self._stop)
            except BaseException as e:  # a client bug must not vanish with its thread
                _log.exception("%s crashed", name)
                self._errors.append(e)

        t = threading.Thread(target=body, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def request_stop(self) -> None:
        """Ask every client to stop issuing ops; returns at once (see :meth:`stop`)."""
        self._stop.set()

    def stop(self, timeout: float | None = None) -> None:
        """Stop issuing ops, complete outstanding sends, close every client; see class doc.

        ``timeout`` shortens the wait (on an error path); by default it is the delivery
        timeout plus a margin. Re-raises the first exception a client thread died of.
        """
        self._stop.set()
        p = self.spec.producer
        bound = (p.delivery_timeout_ms + p.request_timeout_ms) / 1000 + 15.0
        if timeout is not None:
            bound = min(bound, timeout)
        deadline = time.monotonic() + bound
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                _log.warning("%s did not stop within %.0f s", t.name, bound)
        if self._errors:
            raise self._errors[0]

    @property
    def running(self) -> bool:
        """True while any client thread is alive."""
        return any(t.is_alive() for t in self._threads)

    def stats(self) -> WorkloadStats:
        """Totals so far (read without locks: exact once :meth:`stop` has returned)."""
        s = WorkloadStats()
        for p in self.producers:
            s.invoked += p.invoked
            s.ok += p.counts.ok
            s.fail += p.counts.fail
            s.info += p.counts.info
            s.retired += p.retired
        for c in self.consumers:
            s.polls += c.polls
            s.polled_records += c.records
            s.retired += c.retired
        return s

