"""Reading a replica's state from its log directory, without the broker. Pure file
reading: no Kafka client, no cluster.

A partition replica lives in ``<log.dirs>/<topic>-<partition>/`` as segments named by
their base offset (``00000000000000000000.log``, ...), each a sequence of record
batches. Every batch (magic v2, Kafka's ``DefaultRecordBatch``) starts with::

    baseOffset int64 @0 | batchLength int32 @8 (bytes after this field) |
    partitionLeaderEpoch int32 @12 | magic int8 @16 | crc uint32 @17 |
    attributes int16 @21 | lastOffsetDelta int32 @23 | baseTimestamp int64 @27 |
    maxTimestamp int64 @35 | producerId int64 @43 | producerEpoch int16 @51 |
    baseSequence int32 @53 | recordsCount int32 @57 | records @61 ...

A batch without producer id, epoch or base sequence has ``-1`` in each. Its ``attributes``
say whether it is transactional (bit 4) and a control batch (bit 5); a control batch holds
one control record, whose key (``version int16 | type int16``) says which marker it is:
type 0 abort, 1 commit (:func:`batch_kind`). A segment is read
up to the first header that is not a v2 batch's and the first batch cut short by the end
of the file: what Kafka's recovery would truncate; the CRC is not checked
(docs/design.md, "White-box observers", says why that is safe here). A replica's log end
offset is its newest segment's last complete batch's ``baseOffset + lastOffsetDelta + 1``,
or that segment's base offset while it holds none; the files show the page cache, so
unflushed appends count, and a paused or dead broker can be read. Each log dir's
``replication-offset-checkpoint`` (:data:`HW_CHECKPOINT`) and
``recovery-point-offset-checkpoint`` share one format (:func:`parse_checkpoint`).
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

#: Bytes before ``batchLength`` counts: baseOffset and batchLength itself (Kafka's LOG_OVERHEAD).
LOG_OVERHEAD = 12
#: Bytes of a v2 batch header, all of which this module reads (up to ``recordsCount``).
HEADER_SIZE = 61
#: The smallest ``batchLength`` of a v2 batch: its header without LOG_OVERHEAD.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
#: Kafka's NO_SEQUENCE (and NO_PRODUCER_ID, NO_PRODUCER_EPOCH): the batch has none.
NO_SEQUENCE = -1
MAGIC_V2 = 2
#: The file each log dir keeps its replicas' high watermarks in.
HW_CHECKPOINT = "replication-offset-checkpoint"
_CHUNK = 1 << 20
_SEGMENT = re.compile(r"^(\d{20})\.log$")
_HEAD = struct.Struct(">qiiBIhi16xqhi4x")  # baseOffset .. baseSequence; timestamps, count skipped
_CHECKPOINT_ENTRY = re.compile(r"(\S+)\s+([0-9]+)\s+(-?[0-9]+)")
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
#: A control record's type -> the marker it is (Kafka's ControlRecordType); others are ``control``.
MARKERS = {0: "abort", 1: "commit"}
#: Bytes of a control record up to the end of its key: length, attributes, timestamp
#: delta (a varlong), offset delta, key length (varints), and the 4-byte key.
_CONTROL_KEY_BYTES = 5 + 1 + 10 + 5 + 5 + 4


class Batch(NamedTuple):
    """One record batch header: where it starts in its segment, which offsets it holds,
    the leader epoch that wrote it, its CRC-32C (over everything after the CRC), and
    the producer id, producer epoch and base sequence it was sent with (``-1`` each
    when it has none), and its attributes."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    attributes: int = 0

    @property
    def transactional(self) -> bool:
        """It belongs to a transaction (its records, or a control batch's marker)."""
        return bool(self.attributes & _TRANSACTIONAL)

    @property
    def control(self) -> bool:
        """It is a control batch (a transaction marker, or another control record)."""
        return bool(self.attributes & _CONTROL)

    @property
    def end(self) -> int:
        """The position just past the batch."""
        return self.position + self.size

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record (Kafka's ``lastSequence``): the base
        sequence plus ``lastOffsetDelta``, wrapping past 2^31 - 1 to 0 as producers do;
        :data:`NO_SEQUENCE` when the batch has no base sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset - self.base_offset) % (1 << 31)


def iter_batches(buf: bytes, position: int = 0) -> Iterator[Batch]:
    """The batches whose header lies wholly in ``buf`` (segment bytes starting at file
    position ``position``), in order.

    A batch's body may extend past ``buf``: the next one is looked for at its end, so a
    caller reading in chunks resumes at the last batch's ``end``. Stops at the first
    header that is not a v2 batch: a magic other than 2, a ``batchLength`` below the
    61-byte v2 header (zeros, a negative length), a negative ``baseOffset`` or
    ``lastOffsetDelta``.
    """
    at = 0
    while at + HEADER_SIZE <= len(buf):
        base, length, epoch, magic, crc, attrs, delta, pid, pepoch, seq = _HEAD.unpack_from(buf, at)
        if magic != MAGIC_V2 or length < MIN_BATCH_LENGTH or base < 0 or delta < 0:
            return
        yield Batch(position + at, LOG_OVERHEAD + length, base, base + delta, epoch, crc,
                    pid, pepoch, seq, attrs)
        at += LOG_OVERHEAD + length


def complete_batches(fd: int, size: int, start: int = 0) -> Iterator[Batch]:
    """The batches of the segment open as ``fd`` from file position ``start`` (a batch
    boundary), in order, each wholly within the first ``size`` bytes.

    Stops where :func:`iter_batches` stops and at a batch cut short by ``size`` (the
    tail being written, or torn when a broker died).
    """
    pos = start
    while pos + HEADER_SIZE <= size:
        buf = os.pread(fd, min(_CHUNK, size - pos), pos)
        read_to = pos
        for batch in iter_batches(buf, pos):
            if batch.end > size:
                return
            yield batch
            read_to = batch.end
        if read_to == pos:
            return
        pos = read_to


def read_batches(segment: Path) -> Iterator[Batch]:
    """:func:`complete_batches` of the whole file ``segment``, as large as it is when
    the read starts."""
    fd = os.open(segment, os.O_RDONLY)
    try:
        yield from complete_batches(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def read_batch_kinds(segment: Path) -> Iterator[tuple[Batch, str]]:
    """:func:`read_batches` of ``segment``, each with its :func:`batch_kind`."""
    fd = os.open(segment, os.O_RDONLY)
    try:
        for batch in complete_batches(fd, os.fstat(fd).st_size):
            yield batch, batch_kind(fd, batch)
    finally:
        os.close(fd)


def batch_kind(fd: int, batch: Batch) -> str:
    """What ``batch`` of the segment open as ``fd`` holds: ``data`` (records outside any
    transaction), ``txn`` (a transaction's records), ``commit`` or ``abort`` (a transaction
    marker, :data:`MARKERS`), or ``control`` (another control record, or one whose key
    cannot be read)."""
    if not batch.control:
        return "txn" if batch.transactional else "data"
    head = os.pread(fd, min(_CONTROL_KEY_BYTES, batch.size - HEADER_SIZE), batch.position + HEADER_SIZE)
    kind = control_type(head)
    return MARKERS.get(kind, "control") if kind is not None else "control"


def control_type(record: bytes) -> int | None:
    """The type in the key of the control record ``record`` begins with (Kafka's
    DefaultRecord: length, attributes, timestamp delta, offset delta, key length, key
    ``version int16 | type int16``); None where it is cut short or has no such key."""
    try:
        at = varint(record, 0)[1] + 1  # length, attributes
        at = varint(record, varint(record, at)[1])[1]  # timestamp delta, offset delta
        length, at = varint(record, at)
        if length < 4 or at + 4 > len(record):
            return None
        return int(struct.unpack_from(">h", record, at + 2)[0])
    except IndexError:
        return None


def varint(buf: bytes, at: int) -> tuple[int, int]:
    """The zigzag varint (or varlong) at ``at`` of ``buf`` and the position after it;
    IndexError where ``buf`` ends inside it or it runs past 10 bytes."""
    value = shift = 0
    while True:
        if shift > 63:
            raise IndexError("a varint longer than 10 bytes")
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7


def segment_base(path: Path) -> int | None:
    """The base offset in a segment's file name, None if it is not a ``.log`` segment
    (``.log.deleted``, ``.index``, ...)."""
    m = _SEGMENT.match(path.name)
    return int(m.group(1)) if m else None


def segment_files(partition_dir: Path) -> list[tuple[int, Path]]:
    """The ``.log`` segments of a partition directory as ``(base offset, path)``, oldest
    first; empty when the directory is missing or holds no segment."""
    try:
        names = os.listdir(partition_dir)
    except OSError:
        return []
    found = ((segment_base(Path(name)), partition_dir / name) for name in names)
    return sorted((base, path) for base, path in found if base is not None)


class LogEndReader:
    """The log end offset of one replica, read incrementally from its newest segment.

    Contract: :meth:`read` returns the offset after the last complete batch of the
    newest segment (its base offset if it has none), or None when the partition
    directory or its segments are missing. A partial batch at the end is not counted
    until it is complete. It rereads the segment from the start when the newest
    segment changed (a roll, a wipe), its file was replaced or shrank, or the header of
    the last batch it counted (whose CRC covers the rest) changed (truncated and
    rewritten between two reads).
    Not thread-safe: one reader per thread.
    """

    def __init__(self, partition_dir: Path) -> None:
        self.partition_dir = partition_dir
        self._segment: Path | None = None
        self._identity: tuple[int, int] = (0, 0)  # (st_dev, st_ino)
        self._pos = 0
        self._leo = 0
        self._last: Batch | None = None  # the last batch counted

    def read(self) -> int | None:
        """The current LEO (see the class contract)."""
        segments = segment_files(self.partition_dir)
        if not segments:
            self._segment = None
            return None
        base, path = segments[-1]
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # deleted between the listing and now
            self._segment = None
            return None
        try:
            st = os.fstat(fd)
            identity = (st.st_dev, st.st_ino)
            if (path != self._segment or identity != self._identity or st.st_size < self._pos
                    or not self._last_unchanged(fd)):
                self._segment, self._identity = path, identity
                self._pos, self._leo, self._last = 0, base, None
            self._advance(fd, st.st_size)
        finally:
            os.close(fd)
        return self._leo

    def _last_unchanged(self, fd: int) -> bool:
        if self._last is None:
            return True
        at = self._last.position
        return next(iter_batches(os.pread(fd, HEADER_SIZE, at), at), None) == self._last

    def _advance(self, fd: int, size: int) -> None:
        for batch in complete_batches(fd, size, self._pos):
            self._pos, self._leo, self._last = batch.end, batch.last_offset + 1, batch


class LogEnds:
    """Every replica's log end of ``topic``, read from the nodes' data directories, one
    :class:`LogEndReader` per (node, partition) kept between reads. Not thread-safe."""

    def __init__(self, data_dirs: Mapping[int, Path], topic: str) -> None:
        self.data_dirs = dict(data_dirs)
        self._topic = topic
        self._readers: dict[tuple[int, int], LogEndReader] = {}

    def read(self, node: int, partition: int) -> int | None:
        """The replica's LEO, or None when its node has no known data directory or its
        log cannot be read."""
        d = self.data_dirs.get(node)
        if d is None:
            return None
        reader = self._readers.get((node, partition))
        if reader is None:
            reader = self._readers[node, partition] = LogEndReader(d / f"{self._topic}-{partition}")
        try:
            return reader.read()
        except OSError as e:
            log.debug("reading the log of %s-%d on node %d: %s", self._topic, partition, node, e)
            return None


def parse_checkpoint(text: str) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> offset`` from an offset checkpoint file's text, read as
    Kafka's ``CheckpointFile`` reads it: a version line ``0``, a count line, then exactly
    that many ``topic partition offset`` lines; an empty file, or one with only the
    version line, has no entries (the broker creates the file empty).

    ValueError, saying why, on another version, a count that is not a number or does
    not match the entries, or a malformed entry (a blank line is one).
    """
    lines = text.splitlines()
    if not lines:
        return {}
    if lines[0] != "0":
        raise ValueError(f"unknown checkpoint version {lines[0][:40]!r}")
    if len(lines) == 1:
        return {}
    if not lines[1].isascii() or not lines[1].isdigit():
        raise ValueError(f"bad entry count {lines[1][:40]!r}")
    count, entries = int(lines[1]), lines[2:]
    if len(entries) != count:
        raise ValueError(f"header says {count} entries, found {len(entries)}")
    out: dict[tuple[str, int], int] = {}
    for line in entries:
        m = _CHECKPOINT_ENTRY.fullmatch(line)
        if m is None:
            raise ValueError(f"malformed entry {line[:80]!r}")
        out[(m.group(1), int(m.group(2)))] = int(m.group(3))
    return out


def read_checkpoint(path: Path) -> dict[tuple[str, int], int] | None:
    """:func:`parse_checkpoint` of ``path``; None if it is missing, unreadable or not
    well formed.

    Kafka replaces the file by renaming a complete temporary file over it, so a read
    sees the old or the new file, never a mix; the None covers a log dir being wiped.
    """
    try:
        return parse_checkpoint(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
