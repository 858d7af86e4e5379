"""The group workload: the queue's producers, and consumers that subscribe in one group.

Producers are the queue workload's (:class:`~.queue.QueueProducer`). Each consumer
subscribes to the test topic in the run's group (``group.id`` ``faultline-<test name>``)
with ``consumer.group_protocol`` (``classic``, or KIP-848's ``consumer``) and commits as
``consumer.commit`` says: ``sync`` commits, every :data:`COMMIT_INTERVAL_S`, one past the
last record it polled of each partition since its last commit (with that record's leader
epoch) and waits for the answer; ``async`` does the same without waiting; ``auto`` lets
the client commit what it returned (``enable.auto.commit``). The ops it journals
(``poll``, ``commit``, ``assign``, ``revoke``, ``lost``) are in docs/history.md. The
client runs its callbacks (rebalances, the results of async and auto commits) inside
``consume()``: a rebalance ends the open poll ``ok`` with no records, is journaled, and a
new poll is invoked; a commit's result is journaled once the poll ends, its invoke then
too. So a process has one op open at a time. A commit that
ends ``info`` (its outcome unknown) or a poll that raises or returns a fatal error (the
client is done: a static member fenced by another with its ``group.instance.id``, say)
ends ``info`` and retires the consumer: a fresh member under a new process number takes
over, and what the retired instance's client reports after that (its closing callbacks)
is not journaled. Once asked to stop, consumers go on polling for :data:`SETTLE_S`, so
the group settles after the heal and a member left without an assignment shows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from faultline.history import PendingOp
from faultline.spec import GROUP_HEARTBEAT_INTERVAL_MS, GROUP_SESSION_TIMEOUT_MS, TestSpec
from faultline.workloads.clients import (
    POLL_MAX_RECORDS,
    POLL_TIMEOUT_S,
    Journal,
    ProcessIds,
    close_quietly,
    consumer_config,
    error_name,
    journal_poll,
    rdkafka_log,
)
from faultline.workloads.queue import ConsumerClient, QueueWorkload

#: Seconds between a ``sync`` or ``async`` consumer's commits.
COMMIT_INTERVAL_S = 1.0
#: Seconds consumers go on polling once asked to stop.
SETTLE_S = 15.0
#: Commit errors by which the coordinator refused a commit of a member it fenced or is
#: rebalancing: nothing was written (``fail``); any other error leaves it unknown (``info``).
REFUSED = frozenset({"ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS",
                     "FENCED_MEMBER_EPOCH", "STALE_MEMBER_EPOCH", "FENCED_INSTANCE_ID"})
#: librdkafka's word that an auto or async commit had nothing to commit: no op.
_NO_OFFSET = "_NO_OFFSET"


#: The ops by which a member's partitions change hands (:func:`held_after`).
REBALANCES = frozenset({"assign", "revoke", "lost"})


def held_after(held: frozenset[tuple[str, int]], type: str, f: str,
               value: Any) -> frozenset[tuple[str, int]]:
    """The partitions a member holds after one of its ops, given ``held`` before it: an
    ``ok`` ``assign`` adds its partitions, an ``ok`` ``revoke`` or ``lost`` takes them away,
    and an ``info`` retires the member, which then holds none (docs/history.md)."""
    if type == "info":
        return frozenset()
    if type != "ok" or f not in REBALANCES:
        return held
    partitions = frozenset((topic, partition) for topic, partition in value["partitions"])
    return held | partitions if f == "assign" else held - partitions


def generation(metadata: bytes) -> int:
    """The generation (classic) or member epoch (KIP-848) in librdkafka's serialized
    consumer group metadata (``CGMDv2:`` then a native int32; rd_kafka_consumer_group_metadata_write)."""
    return int.from_bytes(metadata[7:11], "little", signed=True)


def group_config(spec: TestSpec, bootstrap: str, client_id: str, slot: int) -> dict[str, Any]:
    """librdkafka settings for the member in consumer slot ``slot``: the consumer's,
    subscribed with the spec's protocol and commit mode (a classic member's session of
    :data:`~faultline.spec.GROUP_SESSION_TIMEOUT_MS`); with
    ``consumer.static``, the slot's ``group.instance.id``."""
    c = spec.consumer
    conf = consumer_config(spec, bootstrap, client_id)
    conf["group.protocol"] = c.group_protocol
    if c.static:
        conf["group.instance.id"] = spec.instance_id(slot)
    if c.group_protocol == "classic":  # KIP-848's timeouts are the broker's
        conf["session.timeout.ms"] = GROUP_SESSION_TIMEOUT_MS
        conf["heartbeat.interval.ms"] = GROUP_HEARTBEAT_INTERVAL_MS
    if c.commit == "auto":
        conf["enable.auto.commit"] = True
        conf["enable.auto.offset.store"] = True
        conf["auto.commit.interval.ms"] = int(COMMIT_INTERVAL_S * 1000)
    return conf


@dataclass(slots=True, eq=False)
class GroupConsumer:
    """One group member at a time (one thread), in consumer slot ``slot`` (its index among
    the consumers); see the module docstring for its contract. Call :meth:`run` on the
    client's thread; it returns once its consumer is closed."""

    spec: TestSpec
    bootstrap: str
    journal: Journal
    first_process: int
    processes: ProcessIds
    slot: int = 0
    polls: int = 0
    records: int = 0
    retired: int = 0
    process: int = field(default=-1, init=False)
    _consumer: Consumer | None = field(default=None, init=False)
    _polling: bool = field(default=False, init=False)
    _retire: bool = field(default=False, init=False)
    #: partition -> (offset to commit, its record's leader epoch), polled since the last commit
    _pending: dict[int, tuple[int, int | None]] = field(default_factory=dict, init=False)
    #: async and auto commits' reports (offsets, error) that came in during the open poll
    _reports: list[tuple[list[TopicPartition], str | None]] = field(default_factory=list, init=False)

    def run(self, stop: threading.Event, leave: threading.Event | None = None) -> None:
        """Poll (and commit) until ``stop`` has been set for :data:`SETTLE_S` (no time at
        all when ``leave`` was set before it); closes its consumer before returning."""
        self._open(self.first_process)
        settled: float | None = None
        due = time.monotonic() + COMMIT_INTERVAL_S
        try:
            while settled is None or time.monotonic() < settled:
                if settled is None and stop.is_set():
                    settled = time.monotonic() + (0.0 if leave is not None and leave.is_set() else SETTLE_S)
                if self._retire:
                    self._replace()
                self._poll()
                if not self._retire and self.spec.consumer.commit != "auto" and time.monotonic() >= due:
                    self._commit()
                    due = time.monotonic() + COMMIT_INTERVAL_S
        finally:
            self._close()

    def _open(self, process: int) -> None:
        # reports a raising poll left unjournaled go with the instance it retired
        self.process, self._retire, self._pending, self._reports = process, False, {}, []
        conf = group_config(self.spec, self.bootstrap, f"faultline-c{process}", self.slot)
        conf["error_cb"] = lambda err: rdkafka_log.warning("consumer c%s: %s", process, err)
        if self.spec.consumer.commit != "sync":
            conf["on_commit"] = self._committed
        consumer = Consumer(conf)
        self._consumer = consumer
        consumer.subscribe([self.spec.topic.name], on_assign=self._rebalanced("assign"),
                           on_revoke=self._rebalanced("revoke"), on_lost=self._rebalanced("lost"))

    def _close(self) -> None:
        if self._consumer is not None:
            close_quietly(self._consumer)  # its last callbacks are journaled: no poll is open
            self._consumer = None

    def _replace(self) -> None:
        self._close()
        self.retired += 1
        self._open(self.processes.take())

    def _poll(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        journal, process = self.journal, self.process
        journal.append(process, "invoke", "poll", None)
        self._polling = True
        try:
            msgs = consumer.consume(POLL_MAX_RECORDS, POLL_TIMEOUT_S)
            fatal = next((err for m in msgs if (err := m.error()) is not None and err.fatal()), None)
            if fatal is not None:  # the client is done for good: its records go unjournaled
                raise KafkaException(fatal)
        except (KafkaException, RuntimeError) as e:
            self._polling = False
            journal.append(process, "info", "poll", None, error_name(e))
            self.polls += 1
            self._retire = True
            return
        self._polling = False
        for m in msgs:
            partition, offset = m.partition(), m.offset()
            if m.error() is None and partition is not None and offset is not None:
                self._pending[partition] = (offset + 1, m.leader_epoch())
        self.polls += 1
        self.records += journal_poll(journal, process, msgs)
        self._journal_reports()

    def _commit(self) -> None:
        """Commit what was polled since the last commit (``sync`` or ``async``)."""
        consumer = self._consumer
        if not self._pending or consumer is None:
            return
        topic = self.spec.topic.name
        offsets = [TopicPartition(topic, p, off, leader_epoch=epoch) if epoch is not None
                   else TopicPartition(topic, p, off) for p, (off, epoch) in sorted(self._pending.items())]
        self._pending = {}
        if self.spec.consumer.commit == "async":
            try:
                consumer.commit(offsets=offsets, asynchronous=True)  # journaled by _committed
            except KafkaException as e:
                self._journal_commit(offsets, error_name(e))
            return
        value = {"offsets": _offsets(offsets)}
        self.journal.append(self.process, "invoke", "commit", value)
        try:
            answered = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            self._end_commit(value, error_name(e))
            return
        errors = [str(tp.error.name()) for tp in answered or () if tp.error is not None]
        self._end_commit(value, errors[0] if errors else None)

    def _end_commit(self, value: dict[str, Any], error: str | None) -> None:
        if error is None:
            self.journal.append(self.process, "ok", "commit", value)
        elif error in REFUSED:
            self.journal.append(self.process, "fail", "commit", value, error)
        else:
            self.journal.append(self.process, "info", "commit", value, error)
            self._retire = True

    def _committed(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The client's report of an async or auto commit: journaled as a commit op, after
        the poll it came in ends (it must not retire the process mid-poll)."""
        error = None if err is None else str(err.name())
        if error == _NO_OFFSET:
            return
        errors = [str(tp.error.name()) for tp in partitions if tp.error is not None]
        self._reports.append((partitions, error or (errors[0] if errors else None)))
        if not self._polling:
            self._journal_reports()

    def _journal_reports(self) -> None:
        """Journal the reports that came in; none once one retired the process (those
        after it, the retired instance's, go unjournaled, as its closing callbacks)."""
        reports, self._reports = self._reports, []
        for partitions, error in reports:
            if self._retire:
                return
            self._journal_commit(partitions, error)

    def _journal_commit(self, partitions: list[TopicPartition], error: str | None) -> None:
        value = {"offsets": _offsets(partitions)}
        self.journal.append(self.process, "invoke", "commit", value)
        self._end_commit(value, error)

    def _rebalanced(self, kind: str) -> Callable[[Consumer, list[TopicPartition]], None]:
        """The callback journaling a rebalance (``assign``, ``revoke``, ``lost``): the open
        poll, if any, ends before it and a new one is invoked after."""
        def journal(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            if self._retire:  # a retired instance closing: its process ended with its info
                return
            if kind != "assign":
                gone = {tp.partition for tp in partitions}
                self._pending = {p: v for p, v in self._pending.items() if p not in gone}
            value = {"partitions": [[tp.topic, tp.partition] for tp in partitions],
                     "member": consumer.memberid() or "",
                     "generation": generation(consumer.consumer_group_metadata())}
            # one batch, journaled before the callback returns (a child's batch with an
            # invoke waits for the run): its ok can take no later time than the member's
            # next owner's assign
            ops: list[PendingOp] = [(self.process, "invoke", kind, value, None),
                                    (self.process, "ok", kind, value, None)]
            if self._polling:
                ops = [(self.process, "ok", "poll", {"records": []}, None), *ops,
                       (self.process, "invoke", "poll", None, None)]
                self.polls += 1
            self.journal.append_many(ops)
        return journal


def _offsets(partitions: list[TopicPartition]) -> list[list[Any]]:
    """A commit's offsets as the history holds them: ``[topic, partition, offset, leader_epoch]``."""
    return [[tp.topic, tp.partition, tp.offset, tp.leader_epoch] for tp in partitions]


class GroupWorkload(QueueWorkload):
    """The queue workload's producers, with :class:`GroupConsumer` members in place of its
    consumers; its contract is :class:`QueueWorkload`'s, ``stop`` waiting also for the
    members' settling (:data:`SETTLE_S`)."""

    def _consumer(self, spec: TestSpec, bootstrap: str, process: int) -> ConsumerClient:
        return GroupConsumer(spec, bootstrap, self.journal, process, self.processes,
                             slot=process - spec.workload.producers)
