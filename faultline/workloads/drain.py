"""The drain: after the run, each partition read from log start to its log end.

:func:`drain` reads each partition with a fresh consumer and journals ``drain`` ops
in chunks, the last with ``"last": true``. The runner gives it the log end each
partition had at quiescence (:mod:`faultline.brokerstate.quiescence`); a partition that
never got there, or whose drain does not reach that end in time, never gets ``last``
(docs/history.md: such a partition is not fully known), and the reason is the final op's
``error``.

Each partition is read in a child process of its own (:func:`_reader`), and journaled
here: reading is CPU-bound in the client (a ``Message`` per record, under the
interpreter's lock), so partitions read in threads of one process share one core,
and in processes use them all. The child hands each chunk's ``records`` over already
encoded as JSON, which the journal embeds as it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

import orjson
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
#: Readers at once (a process each, ~30 MB): the partitions beyond wait their turn.
READERS = 2 * (os.cpu_count() or 1)
#: How much a reader's priority is lowered (:func:`_reader`).
READER_NICENESS = 10
#: Seconds a reader may take past its deadline (closing its consumer) before it is killed.
GRACE_S = 15.0


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
    """Read each partition of ``ends`` from log start to its log end, journal it as
    docs/history.md's ``drain`` ops, and return one :class:`PartitionDrain` per partition.

    ``ends``: partition -> the log end offset to read to, or why there is none (then it
    is read to its high watermark of the moment and never marked ``last``). Up to
    :data:`READERS` partitions are read at once, each by a child process with a fresh
    consumer, a process number taken in partition order, and ``timeout_s`` from its start.
    A partition's final chunk has ``"last": true`` iff every offset below its log end was
    read in time, no consumed message was an error and its log start had not moved;
    otherwise its ``error`` says why (a reader that died included). Unreadable watermarks
    end the op ``fail``.
    """
    topic = spec.topic.name
    jobs = [(processes.take(), p, end) for p, end in sorted(ends.items())]
    with ThreadPoolExecutor(max(1, min(len(jobs), READERS)), thread_name_prefix="faultline-drain") as pool:
        return list(pool.map(lambda job: _drain_partition(spec, bootstrap, history, job[0], topic,
                                                          job[1], job[2], timeout_s), jobs))


def _drain_partition(spec: TestSpec, bootstrap: str, history: HistoryWriter, process: int,
                     topic: str, partition: int, end: int | str,
                     timeout_s: float) -> PartitionDrain:
    """Journal what the reader of one partition (:func:`_reader`, a child process) hands
    over: its watermarks, each full chunk, and the last."""
    key = {"topic": topic, "partition": partition}
    conf = {k: v for k, v in consumer_config(spec, bootstrap, f"faultline-drain{process}").items()
            if k != "logger"}
    conf.update(DRAIN_FETCH)
    history.append(process, "invoke", "drain", dict(key))
    reader = _start_reader({"conf": conf, "topic": topic, "partition": partition, "end": end,
                            "timeout_s": timeout_s, "process": process})
    assert reader.stdout is not None
    try:
        head: dict[str, Any] = dict(key)
        low: int | None = None
        high: int | None = None
        total = 0
        while (said := _receive(reader.stdout)) is not None:
            msg, records = said
            if "log" in msg:
                rdkafka_log.log(msg["log"], "%s", msg["text"])
            elif "fail" in msg:
                history.append(process, "fail", "drain", dict(key), msg["fail"])
                return PartitionDrain(partition, process, None, None, 0, False, msg["fail"])
            elif "low" in msg:
                low, high = msg["low"], msg["high"]
                head = {**key, "log_start_offset": low, "high_watermark": high}
            elif "done" not in msg:  # a full chunk, and more to come
                history.append(process, "ok", "drain", {**head, "records": orjson.Fragment(records)})
                total += msg["n"]
                history.append(process, "invoke", "drain", dict(key))
            else:
                total += msg["n"]
                final: dict[str, Any] = {**head, "records": orjson.Fragment(records)}
                if msg["done"]:
                    final["last"] = True
                history.append(process, "ok", "drain", final, msg["error"])
                return PartitionDrain(partition, process, low, high, total, msg["done"], msg["error"])
        why = _died(reader)
        history.append(process, "ok", "drain", {**head, "records": []}, why)
        return PartitionDrain(partition, process, low, high, total, False, why)
    finally:
        _end(reader, timeout_s + GRACE_S)


def _receive(pipe: IO[bytes]) -> tuple[dict[str, Any], bytes] | None:
    """One message of a reader: a JSON line, then ``bytes`` bytes of records JSON; None
    at the pipe's end (or a message cut by it)."""
    line = pipe.readline()
    if not line.endswith(b"\n"):
        return None
    msg = orjson.loads(line)
    if not msg["bytes"]:
        return msg, b"[]"
    records = pipe.read(msg["bytes"])
    return (msg, records) if len(records) == msg["bytes"] else None


def _died(reader: subprocess.Popen[bytes]) -> str:
    """Why a reader ended without its last message: its last line of stderr, or its status."""
    assert reader.stderr is not None
    why = reader.stderr.read().decode(errors="replace").strip().splitlines()
    status = reader.wait()
    return f"_READER_DIED: {why[-1] if why else f'exit status {status}'}"


def _end(reader: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Wait for a reader to exit (killed after ``timeout_s``) and close its pipes."""
    try:
        reader.wait(timeout_s)
    except subprocess.TimeoutExpired:
        reader.kill()
        reader.wait()
    for pipe in (reader.stdout, reader.stderr):
        if pipe is not None:
            pipe.close()


def _start_reader(job: dict[str, Any]) -> subprocess.Popen[bytes]:
    """A reader (:func:`_reader`) of one partition, given its ``job``: it ends at its
    deadline, or once its pipe has no reader (the run that wanted it is gone)."""
    reader = subprocess.Popen(
        [sys.executable, "-c", "from faultline.workloads.drain import _reader; _reader()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reader.stdin is not None
    with reader.stdin:
        reader.stdin.write(orjson.dumps(job))
    return reader


def _reader() -> None:
    """A reader's main: :func:`_serve` the job on stdin to stdout, at nice
    :data:`READER_NICENESS` (docs/design.md, "The run", says why that one)."""
    os.nice(READER_NICENESS)
    with contextlib.suppress(BrokenPipeError):
        _serve(orjson.loads(sys.stdin.buffer.read()), sys.stdout.buffer)


def _serve(job: dict[str, Any], out: IO[bytes]) -> None:
    """Read the partition of ``job`` (:func:`_read`) and write its messages to ``out``
    (:func:`_receive` reads them): the watermarks (or ``fail``), each full chunk, then the
    last (``done``: whether it read every offset below the partition's end; ``error``:
    why not), and the client's log lines at warning or above (``log``) as they come."""

    def send(msg: dict[str, Any], records: bytes = b"") -> None:
        out.write(orjson.dumps({**msg, "bytes": len(records)}) + b"\n" + records)
        out.flush()

    class Forward(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            send({"log": record.levelno, "text": record.getMessage()})

    log = logging.getLogger(f"faultline.drain-reader.{job['process']}")  # served in this thread
    log.propagate = False
    log.addHandler(Forward(logging.WARNING))
    conf = {**job["conf"], "logger": log,
            "error_cb": lambda err: log.warning("drain d%s: %s", job["process"], err)}
    _read(Consumer(conf), job["topic"], job["partition"], job["end"], job["timeout_s"], send)


def _read(consumer: Consumer, topic: str, partition: int, end: int | str, timeout_s: float,
          send: Callable[..., None]) -> None:
    """Read one partition to ``end`` (see :func:`drain`) and ``send`` what :func:`_serve` says."""
    deadline = time.monotonic() + timeout_s
    try:
        tp = TopicPartition(topic, partition)
        try:
            low, hw = _watermarks(consumer, tp, deadline)
        except KafkaException as e:
            send({"fail": error_name(e)})
            return
        known = isinstance(end, int)
        high = end if isinstance(end, int) else hw
        send({"low": low, "high": high})
        chunk: list[list[Any]] = []
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
            while len(records) > room:  # full, and more to come: hand it over
                chunk += records[:room]
                records = records[room:]
                send({"n": len(chunk)}, orjson.dumps(chunk))
                chunk = []
                room = DRAIN_CHUNK
            chunk += records
            if error is not None:
                break
            if not msgs and not done:
                position = max(position, consumer.position([tp])[0].offset)
                done = position >= high
        if done and known and error is None and high > low:
            error = _log_start_kept(consumer, tp, low, deadline)
        complete = done and known and error is None
        if not known:
            error = f"not quiescent: {end}"
        elif not complete and error is None:
            error = f"_TIMED_OUT: read to {position} of log end {high} in {timeout_s:.0f} s"
        send({"n": len(chunk), "done": complete, "error": error}, orjson.dumps(chunk))
    finally:
        close_quietly(consumer)


def _log_start_kept(consumer: Consumer, tp: TopicPartition, low: int,
                    deadline: float) -> str | None:
    """None when the log start is still ``low`` after the read, else why the drain may
    have skipped offsets: a log start that moved up (retention) before the consumer
    fetched from the beginning, or under it (it then resets to the earliest offset),
    takes offsets from ``low`` on out of the read without a sign."""
    try:
        now = _watermarks(consumer, tp, deadline)[0]
    except KafkaException as e:
        return f"{error_name(e)}: the log start could not be read again after the drain"
    if now != low:
        return f"log start moved from {low} to {now} during the drain: offsets below may not have been read"
    return None


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
