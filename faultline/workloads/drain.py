"""The drain: after the run, each partition read from log start to its log end.

:func:`drain` reads each partition with a fresh consumer and journals ``drain`` ops
in chunks, the last with ``"last": true``. The runner gives it the log end each
partition had at quiescence (:mod:`faultline.brokerstate.quiescence`); a partition that
never got there, or whose drain does not reach that end in time, never gets ``last``
(docs/history.md: such a partition is not fully known), and the reason is the final op's
``error``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from faultline.history import HistoryWriter
from faultline.spec import TestSpec
from faultline.workloads.clients import (
    ProcessIds,
    close_quietly,
    consumer_config,
    decode_value,
    error_name,
    rdkafka_log,
)

#: Records per ``drain`` op, and per ``consume`` call.
DRAIN_CHUNK = 10_000
#: The drain's fetches: large, since it reads whole logs (measured, 1.5 M records on 3
#: partitions: 1 MB per partition fetch, one partition at a time, 130 k records/s;
#: these, and the partitions in parallel, 600 k/s). At most 64 MB queued per consumer.
DRAIN_FETCH = {"max.partition.fetch.bytes": 16 << 20, "fetch.max.bytes": 64 << 20,
               "queued.max.messages.kbytes": 65536, "queued.min.messages": 1_000_000}


@dataclass(frozen=True, slots=True)
class PartitionDrain:
    """What the drain learnt of one partition; ``complete`` iff ``last: true`` was written."""

    partition: int
    process: int
    log_start_offset: int | None
    high_watermark: int | None
    records: int
    complete: bool
    error: str | None = None


def drain(spec: TestSpec, bootstrap: str, history: HistoryWriter, processes: ProcessIds,
          ends: Mapping[int, int | str], *, timeout_s: float = 60.0) -> list[PartitionDrain]:
    """Read each partition of ``ends`` from log start to its log end and journal it.

    ``ends``: partition -> the log end offset to read to, or why there is none (the
    partition never became quiescent: it is then read to its high watermark of the
    moment, for what that shows, and never marked ``last``).

    The partitions are read in parallel, each by a thread with a fresh consumer and a
    process number (taken in partition order before any starts); one ``drain`` invoke/ok pair
    per chunk of up to :data:`DRAIN_CHUNK` records, each ok carrying the chunk's
    ``records`` as ``[offset, value]``, ``log_start_offset`` (read once, before
    reading) and ``high_watermark``: the end it reads to. The final chunk has
    ``"last": true`` iff the partition had a log end and every offset below it was read
    within ``timeout_s`` and no consumed message was an error (which stops its read);
    otherwise its ``error`` says why not. If the watermarks cannot
    be read the op ends ``fail`` with the error (a read changes nothing).
    """
    topic = spec.topic.name
    jobs = [(processes.take(), p, end) for p, end in sorted(ends.items())]
    with ThreadPoolExecutor(max(1, len(jobs)), thread_name_prefix="faultline-drain") as pool:
        return list(pool.map(lambda job: _drain_partition(spec, bootstrap, history, job[0], topic,
                                                          job[1], job[2], timeout_s), jobs))


def _drain_partition(spec: TestSpec, bootstrap: str, history: HistoryWriter, process: int,
                     topic: str, partition: int, end: int | str,
                     timeout_s: float) -> PartitionDrain:
    deadline = time.monotonic() + timeout_s
    key = {"topic": topic, "partition": partition}
    conf = consumer_config(spec, bootstrap, f"faultline-drain{process}")
    conf["error_cb"] = lambda err: rdkafka_log.warning("drain d%s: %s", process, err)
    conf.update(DRAIN_FETCH)
    consumer = Consumer(conf)
    history.append(process, "invoke", "drain", dict(key))
    try:
        tp = TopicPartition(topic, partition)
        try:
            low, hw = _watermarks(consumer, tp, deadline)
        except KafkaException as e:
            name = error_name(e)
            history.append(process, "fail", "drain", dict(key), name)
            return PartitionDrain(partition, process, None, None, 0, False, name)
        known = isinstance(end, int)
        high = end if isinstance(end, int) else hw
        head = {**key, "log_start_offset": low, "high_watermark": high}
        chunk: list[list[Any]] = []
        total = 0
        done = high <= low
        error: str | None = None
        if not done:
            consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        position = low
        while not done and time.monotonic() < deadline:
            try:
                msgs = consumer.consume(DRAIN_CHUNK, 0.5)
            except KafkaException as e:
                error = error_name(e)
                break
            # offsets rise within a partition: the records below the end, in one pass;
            # decode_value's common case (a canonical decimal of at most 18 digits, so
            # below VALUE_MAX) inline, per record
            records: list[list[Any]] = [
                [m.offset(), int(raw) if raw is not None and raw.isdigit() and len(raw) < 19
                 and (raw[0] != 0x30 or len(raw) == 1) else decode_value(raw)]
                for m in msgs if m.error() is None for raw in (m.value(),)]
            # an error in place of a record (a corrupt one librdkafka skipped, a fetch error)
            # may leave a hole: the records come all the same, but the partition is not
            # fully known
            bad = next(x for m in msgs if (x := m.error()) is not None) if len(records) < len(msgs) else None
            if records and records[-1][0] >= high - 1:
                done = True
                records = [r for r in records if r[0] < high]
            if records:
                position = records[-1][0] + 1
            if bad is not None:
                error = f"{bad.name()}: a consumed message was an error (read to {position})"
            room = DRAIN_CHUNK - len(chunk)
            while len(records) > room:  # full, and more to come: journal it
                chunk += records[:room]
                records = records[room:]
                history.append(process, "ok", "drain", {**head, "records": chunk})
                total += len(chunk)
                chunk = []
                history.append(process, "invoke", "drain", dict(key))
                room = DRAIN_CHUNK
            chunk += records
            if error is not None:
                break
            if not msgs and not done:
                position = max(position, consumer.position([tp])[0].offset)
                done = position >= high
        total += len(chunk)
        complete = done and known and error is None
        final: dict[str, Any] = {**head, "records": chunk}
        if complete:
            final["last"] = True
        elif not known:
            error = f"not quiescent: {end}"
        elif error is None:
            error = f"_TIMED_OUT: read to {position} of log end {high} in {timeout_s:.0f} s"
        history.append(process, "ok", "drain", final, error)
        return PartitionDrain(partition, process, low, high, total, complete, error)
    finally:
        close_quietly(consumer)


def _watermarks(consumer: Consumer, tp: TopicPartition, deadline: float) -> tuple[int, int]:
    """(log start offset, high watermark) from the leader, retried until ``deadline``."""
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=5.0, cached=False)
            return int(low), int(high)
        except KafkaException:
            if time.monotonic() + 1.0 >= deadline:
                raise
            time.sleep(0.5)  # the leader is being elected: try again shortly
