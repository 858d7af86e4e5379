"""The transactional workload: producers write unique integers in transactions.

Each producer thread holds one transactional producer (confluent-kafka) at a time, its
``transactional.id`` the thread's own (``faultline-<test>-t<i>``), and journals each
transaction as one ``txn`` op (docs/history.md): the invoke lists its sends (``transactions.sends``
values unique within the run, spread over the partitions) and whether the workload will
abort it (``transactions.abort_probability``; its records are flushed to the log before the
abort, so that a read_committed reader has aborted records to skip); the completion adds
each send's offset where its delivery report gave one, and is ``ok`` when the commit was
acknowledged, ``fail`` when the abort was, ``info`` when neither is known. A producer whose
transaction ended ``info`` (or that hit a fatal error) is retired: a fresh instance with the
same ``transactional.id`` and a new process number takes over, and its
``init_transactions`` fences the old one and ends the transaction it left open. In a test
that crashes clients each producer runs in a child process (:class:`CrashableTxnWorkload`):
a crash ends its open transaction ``info`` and its replacement, under the same
``transactional.id``, fences and ends it likewise. With ``transactions.reads`` each producer
also reads, in its transactions, what others wrote (:mod:`.rpw`): the completion adds
``reads`` and ``group_offsets``. Consumers
and the drain are the queue's (:class:`~faultline.workloads.queue.QueueConsumer`,
:mod:`.drain`), reading with the spec's ``consumer.isolation_level``.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from faultline.history import OpType
from faultline.spec import TestSpec
from faultline.workloads.clients import (
    ClientLog,
    Journal,
    ProcessIds,
    SendCounts,
    Values,
    error_name,
    kafka_error,
    producer_config,
    rdkafka_log,
)
from faultline.workloads.crashable import CrashableProducer, CrashableQueueWorkload
from faultline.workloads.queue import ProducerClient, QueueWorkload
from faultline.workloads.rpw import Processor, Read

#: How long one call that ends a transaction (or starts the producer) may take, in
#: seconds, before the workload gives up on it: retriable errors are retried until then.
END_TIMEOUT_S = 30.0
#: Seconds between attempts of a call the cluster refuses for now (a retriable error).
RETRY_BACKOFF_S = 0.5


@dataclass(slots=True, eq=False)
class _Transaction:
    """One transaction's sends, ``[partition, value]``, and what their delivery reports said."""

    abort: bool
    sends: list[tuple[int, int]]
    offsets: dict[int, int] = field(default_factory=dict)  # value -> offset
    refused: str | None = None  # why produce() refused a send: the transaction must abort
    committing: int | None = None  # when the workload asked to commit it (the history's clock)
    reads: list[Read] | None = None  # what its processor read (None: no processor, or not yet)
    group_offsets: list[tuple[int, int]] = field(default_factory=list)  # sent to the transaction

    def value(self, topic: str) -> dict[str, Any]:
        """The op's ``value``: its sends, each with the offset its delivery report gave, when
        the workload asked to commit it, once it has, and what it read, once it has."""
        sends = []
        for partition, value in self.sends:
            send: dict[str, Any] = {"partition": partition, "value": value}
            if value in self.offsets:
                send["offset"] = self.offsets[value]
            sends.append(send)
        out = {"topic": topic, "abort": self.abort, "sends": sends}
        if self.committing is not None:
            out["committing"] = self.committing
        if self.reads is not None:
            out["reads"] = [list(r) for r in self.reads]
            out["group_offsets"] = [list(o) for o in self.group_offsets]
        return out

    def delivered(self, err: KafkaError | None, msg: Message) -> None:
        offset = msg.offset()
        if err is None and offset is not None and offset >= 0:
            raw = msg.value()
            if raw is not None:
                self.offsets[int(raw)] = offset


@dataclass(slots=True, eq=False)
class TxnProducer:
    """One transactional producer client (one thread); see the module docstring.

    ``rate`` is this producer's target sends per second (0: as fast as it goes); ``rng``
    draws which transactions abort.
    """

    spec: TestSpec
    bootstrap: str
    journal: Journal
    first_process: int
    processes: ProcessIds
    values: Values
    rng: random.Random
    rate: float = 0.0
    index: int = 0
    client_log: ClientLog | None = None
    counts: SendCounts = field(default_factory=SendCounts)
    invoked: int = 0
    retired: int = 0

    def run(self, stop: threading.Event) -> None:
        """Run transactions one after another until ``stop`` is set."""
        x, topic, partitions = self.spec.transactions, self.spec.topic.name, self.spec.topic.partitions
        interval = x.sends / self.rate if self.rate > 0 else 0.0
        process = self.first_process
        producer = self._open(process, stop)
        processor = Processor(self.spec, self.bootstrap)
        processor.open(process)
        first = self.index % partitions
        due = time.monotonic()
        while producer is not None and not stop.is_set():
            if interval and stop.wait(max(0.0, due - time.monotonic())):
                break
            due += interval
            values = self.values.take_many(x.sends)
            txn = _Transaction(self.rng.random() < x.abort_probability,
                               [((first + i) % partitions, v) for i, v in enumerate(values)])
            first = (first + x.sends) % partitions
            self.journal.append(process, "invoke", "txn", txn.value(topic))
            self.invoked += 1
            outcome, error = self._transact(producer, txn, processor)
            self.journal.append(process, outcome, "txn", txn.value(topic), error)
            if outcome == "ok":
                self.counts.ok += 1
            elif outcome == "fail":
                self.counts.fail += 1
            else:
                self.counts.info += 1
                self.retired += 1
                producer.purge()
                process = self.processes.take()
                producer = self._open(process, stop)
                processor.open(process)
        processor.close()

    def _transact(self, producer: Producer, txn: _Transaction,
                  processor: Processor) -> tuple[OpType, str | None]:
        """Begin, read (``processor``), send, send the offsets read, and commit (or abort)
        ``txn``: ``ok`` with the commit acknowledged, ``fail`` with the abort acknowledged
        (what it read is read again), else ``info`` and the error."""
        topic = self.spec.topic.name
        try:
            producer.begin_transaction()
            txn.reads = processor.read()
            for i, (partition, value) in enumerate(txn.sends):
                if i and self.spec.transactions.gap_ms:
                    time.sleep(self.spec.transactions.gap_ms / 1000)
                try:
                    producer.produce(topic, str(value).encode("ascii"), partition=partition,
                                     on_delivery=txn.delivered)
                except (BufferError, KafkaException) as e:
                    txn.refused = txn.refused or error_name(e)
            if txn.refused is None:
                # the records reach the log, a transaction meant to abort's too (abort_transaction
                # purges what is still queued, so its records would never be written to be
                # skipped), and the delivery reports give their offsets
                producer.flush(END_TIMEOUT_S)
                reads = txn.reads or []
                txn.group_offsets = _retrying(lambda: processor.send_offsets(producer, reads, END_TIMEOUT_S))
            if not txn.abort and txn.refused is None:
                txn.committing = self.journal.now()
                _retrying(lambda: producer.commit_transaction(END_TIMEOUT_S))
                return "ok", None
        except KafkaException as e:
            err = kafka_error(e)
            if err is None or not err.txn_requires_abort():
                return "info", error_name(e)
            txn.refused = txn.refused or error_name(e)
        try:
            _retrying(lambda: producer.abort_transaction(END_TIMEOUT_S))
        except KafkaException as e:
            return "info", error_name(e)
        processor.rewind(txn.reads or [])
        return "fail", txn.refused

    def _open(self, process: int, stop: threading.Event) -> Producer | None:
        """A transactional producer for ``process``, its transactions initialized (which
        fences every earlier instance of its ``transactional.id``); None if ``stop`` was set first."""
        client_id = f"faultline-p{process}"
        conf = producer_config(self.spec, self.bootstrap, client_id)
        conf.update({
            "transactional.id": self.spec.transactional_id(self.index),
            "transaction.timeout.ms": transaction_timeout_ms(self.spec),
            "error_cb": lambda err: rdkafka_log.warning("producer p%s: %s", process, err),
        })
        if self.client_log is not None:
            conf["logger"] = self.client_log.for_process(process)
            conf["debug"] = "eos"
        producer = Producer(conf)
        while not stop.is_set():
            try:
                producer.init_transactions(END_TIMEOUT_S)
                return producer
            except KafkaException as e:
                rdkafka_log.warning("producer p%s: init_transactions: %s", process, e)
                err = kafka_error(e)
                if err is not None and err.fatal():
                    producer = Producer(conf)
                stop.wait(RETRY_BACKOFF_S)
        return None


def transaction_timeout_ms(spec: TestSpec) -> int:
    """The producers' ``transaction.timeout.ms``: at least their delivery timeout (librdkafka
    refuses a longer one), and 10 s."""
    return max(spec.producer.delivery_timeout_ms, 10_000)


_T = TypeVar("_T")


def _retrying(call: Callable[[], _T]) -> _T:
    """``call`` again while it raises a retriable error, for at most :data:`END_TIMEOUT_S`;
    its result, or the last error raised."""
    deadline = time.monotonic() + END_TIMEOUT_S
    while True:
        try:
            return call()
        except KafkaException as e:
            err = kafka_error(e)
            if err is None or not err.retriable() or time.monotonic() >= deadline:
                raise
        time.sleep(RETRY_BACKOFF_S)


def txn_producer(spec: TestSpec, bootstrap: str, journal: Journal, first_process: int,
                 processes: ProcessIds, values: Values, *, rate: float, index: int,
                 client_log: ClientLog | None) -> TxnProducer:
    """Producer ``index``'s :class:`TxnProducer`, its aborts drawn from the spec's seed."""
    rng = random.Random(f"{spec.seed}/txn/{index}")
    return TxnProducer(spec, bootstrap, journal, first_process, processes, values, rng,
                       rate=rate, index=index, client_log=client_log)


class TxnWorkload(QueueWorkload):
    """The queue workload with :class:`TxnProducer` producers; the same contract."""

    def _producer(self, spec: TestSpec, bootstrap: str, index: int, rate: float,
                  client_log: ClientLog | None) -> ProducerClient:
        return txn_producer(spec, bootstrap, self.journal, index, self.processes, self.values,
                            rate=rate, index=index, client_log=client_log)


class CrashableTxnWorkload(CrashableQueueWorkload):
    """The txn workload with each :class:`TxnProducer` in a child process (:mod:`.crashable`),
    which ``crash_client`` kills and ``restart_client`` replaces; the same contract."""

    def _producer(self, spec: TestSpec, bootstrap: str, index: int, rate: float,
                  client_log: ClientLog | None) -> ProducerClient:
        return CrashableProducer(spec, bootstrap, self.history, index, self.processes, self.values,
                                 rate=rate, index=index, client_log=client_log, make=txn_producer)
