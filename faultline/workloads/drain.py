"""The drain: after the run, each partition read from log start to its high watermark.

:func:`drain` reads each partition with a fresh consumer and journals ``drain`` ops
in chunks, the last with ``"last": true``; a drain that cannot finish in time, or a
partition whose ISR was not confirmed full, never writes ``last`` (HISTORY.md: such a
partition is not fully known).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from faultline.history import HistoryWriter
from faultline.spec import TestSpec
from faultline.workloads.queue import (
    POLL_MAX_RECORDS,
    ProcessIds,
    close_quietly,
    consumer_config,
    decode_value,
    error_name,
    rdkafka_log,
)

#: Records per ``drain`` op.
DRAIN_CHUNK = 10_000


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
          *, timeout_s: float = 60.0, partitions: Iterable[int] | None = None,
          trusted: Iterable[int] | None = None) -> list[PartitionDrain]:
    """Read each partition from log start to its high watermark and journal it.

    Per partition: a fresh consumer and process number; one ``drain`` invoke/ok pair
    per chunk of up to :data:`DRAIN_CHUNK` records, each ok carrying the chunk's
    ``records`` as ``[offset, value]``, ``log_start_offset`` and ``high_watermark``
    (both read once, before reading). The final chunk has ``"last": true`` only if
    every offset below the high watermark was read within ``timeout_s`` *and* the
    partition is in ``trusted`` (default: all), the partitions whose ISR was
    confirmed full; otherwise the partition stays "not fully known". If the
    watermarks cannot be read the op ends ``fail`` with the error (a read changes
    nothing).
    """
    topic = spec.topic.name
    parts = list(range(spec.topic.partitions)) if partitions is None else list(partitions)
    trusted_set = set(parts if trusted is None else trusted)
    return [_drain_partition(spec, bootstrap, history, processes.take(), topic, p,
                             timeout_s, p in trusted_set)
            for p in parts]


def _drain_partition(spec: TestSpec, bootstrap: str, history: HistoryWriter, process: int,
                     topic: str, partition: int, timeout_s: float,
                     trusted: bool) -> PartitionDrain:
    deadline = time.monotonic() + timeout_s
    key = {"topic": topic, "partition": partition}
    conf = consumer_config(spec, bootstrap, f"faultline-drain{process}")
    conf["error_cb"] = lambda err: rdkafka_log.warning("drain d%s: %s", process, err)
    consumer = Consumer(conf)
    history.append(process, "invoke", "drain", dict(key))
    try:
        tp = TopicPartition(topic, partition)
        try:
            low, high = _watermarks(consumer, tp, deadline)
        except KafkaException as e:
            name = error_name(e)
            history.append(process, "fail", "drain", dict(key), name)
            return PartitionDrain(partition, process, None, None, 0, False, name)
        head = {**key, "log_start_offset": low, "high_watermark": high}
        if high <= low:
            history.append(process, "ok", "drain",
                           {**head, "records": [], **({"last": True} if trusted else {})})
            return PartitionDrain(partition, process, low, high, 0, trusted)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        chunk: list[list[Any]] = []
        total = 0
        done = False
        error: str | None = None
        while not done and time.monotonic() < deadline:
            try:
                msgs = consumer.consume(POLL_MAX_RECORDS, 0.5)
            except KafkaException as e:
                error = error_name(e)
                break
            for m in msgs:
                if m.error() is not None:
                    continue
                offset = m.offset()
                if offset is None or offset >= high:
                    done = True
                    continue
                chunk.append([offset, decode_value(m.value())])
                if offset == high - 1:
                    done = True
            if not msgs and not done:
                pos = consumer.position([TopicPartition(topic, partition)])[0].offset
                done = pos >= high
            if len(chunk) >= DRAIN_CHUNK and not done:
                history.append(process, "ok", "drain", {**head, "records": chunk})
                total += len(chunk)
                chunk = []
                history.append(process, "invoke", "drain", dict(key))
        total += len(chunk)
        complete = done and trusted
        final: dict[str, Any] = {**head, "records": chunk}
        if complete:
            final["last"] = True
        elif error is None:
            error = "_TIMED_OUT" if not done else None
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
