"""Reading a replica's state from its log directory, without the broker.

A partition replica lives in ``<log.dirs>/<topic>-<partition>/`` as segments named by
their base offset (``00000000000000000000.log``, ...), each a sequence of record
batches. Every batch (magic v2, Kafka's ``DefaultRecordBatch``) starts with::

    baseOffset int64 @0 | batchLength int32 @8 (bytes after this field) |
    partitionLeaderEpoch int32 @12 | magic int8 @16 | crc uint32 @17 |
    attributes int16 @21 | lastOffsetDelta int32 @23 | ...

so a replica's log end offset (LEO) is the newest segment's last complete batch's
``baseOffset + lastOffsetDelta + 1``, or the segment's base offset while it holds no
batch. :class:`LogEndReader` keeps that up to date by reading only the headers
appended since its last call. Reading the files sees the page cache: unflushed
appends count, and it works while the broker is paused or dead.

Each log dir's ``replication-offset-checkpoint`` holds every replica's high watermark
as of the broker's last checkpoint (every
``replica.high.watermark.checkpoint.interval.ms``, 5 s by default):
:func:`read_checkpoint`.

Pure file reading: no Kafka client, no cluster.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

#: Bytes before ``batchLength`` counts: baseOffset and batchLength itself (Kafka's LOG_OVERHEAD).
LOG_OVERHEAD = 12
#: Bytes of a batch header this module reads: up to and including ``lastOffsetDelta``.
HEADER_SIZE = 27
#: The smallest ``batchLength`` of a v2 batch: its 61-byte header without LOG_OVERHEAD.
MIN_BATCH_LENGTH = 61 - LOG_OVERHEAD
MAGIC_V2 = 2
#: Bytes compared to tell that the last batch read is still there: up to and with the CRC.
_IDENTITY_SIZE = 21
_CHUNK = 1 << 20
_SEGMENT = re.compile(r"^(\d{20})\.log$")
_HEAD = struct.Struct(">qiiBIhi")  # baseOffset .. lastOffsetDelta


class Batch(NamedTuple):
    """One record batch header: where it starts in its segment and which offsets it holds."""

    position: int
    size: int
    base_offset: int
    last_offset: int

    @property
    def end(self) -> int:
        """The position just past the batch."""
        return self.position + self.size


def iter_batches(buf: bytes, position: int = 0) -> Iterator[Batch]:
    """The batches whose header lies wholly in ``buf`` (segment bytes starting at file
    position ``position``), in order.

    A batch's body may extend past ``buf``: the next one is looked for at its end, so a
    caller reading in chunks resumes at the last batch's ``end``. Stops at the first
    header that is not a v2 batch (zeros of a preallocated file, or a torn write).
    """
    at = 0
    while at + HEADER_SIZE <= len(buf):
        base, length, _epoch, magic, _crc, _attrs, delta = _HEAD.unpack_from(buf, at)
        if magic != MAGIC_V2 or length < MIN_BATCH_LENGTH or base < 0 or delta < 0:
            return
        yield Batch(position + at, LOG_OVERHEAD + length, base, base + delta)
        at += LOG_OVERHEAD + length


def segment_base(path: Path) -> int | None:
    """The base offset in a segment's file name, None if it is not a ``.log`` segment
    (``.log.deleted``, ``.index``, ...)."""
    m = _SEGMENT.match(path.name)
    return int(m.group(1)) if m else None


def newest_segment(partition_dir: Path) -> tuple[Path, int] | None:
    """The segment with the highest base offset and that offset; None when the
    directory is missing or holds no segment."""
    best: tuple[Path, int] | None = None
    try:
        names = os.listdir(partition_dir)
    except OSError:
        return None
    for name in names:
        base = segment_base(Path(name))
        if base is not None and (best is None or base > best[1]):
            best = (partition_dir / name, base)
    return best


class LogEndReader:
    """The log end offset of one replica, read incrementally from its newest segment.

    Contract: :meth:`read` returns the offset after the last complete batch of the
    newest segment (its base offset if it has none), or None when the partition
    directory or its segments are missing. A partial batch at the end is not counted
    until it is complete. It rereads the segment from the start when the newest
    segment changed (a roll, a wipe), its file was replaced or shrank, or the bytes of
    the last batch it counted changed (truncated and rewritten between two reads).
    Not thread-safe: one reader per thread.
    """

    def __init__(self, partition_dir: Path) -> None:
        self.partition_dir = partition_dir
        self._segment: Path | None = None
        self._identity: tuple[int, int] = (0, 0)  # (st_dev, st_ino)
        self._pos = 0
        self._leo = 0
        self._last: tuple[int, bytes] | None = None  # (position, first bytes) of the last batch

    def read(self) -> int | None:
        """The current LEO (see the class contract)."""
        found = newest_segment(self.partition_dir)
        if found is None:
            self._segment = None
            return None
        path, base = found
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
        position, head = self._last
        return os.pread(fd, len(head), position) == head

    def _advance(self, fd: int, size: int) -> None:
        while self._pos + HEADER_SIZE <= size:
            start = self._pos
            buf = os.pread(fd, min(_CHUNK, size - start), start)
            last: Batch | None = None
            for batch in iter_batches(buf, start):
                if batch.end > size:  # still being written
                    break
                last = batch
            if last is None:
                return
            self._pos, self._leo = last.end, last.last_offset + 1
            head = last.position - start
            self._last = (last.position, buf[head:head + _IDENTITY_SIZE])


def parse_checkpoint(text: str) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> offset`` from an offset checkpoint file's text: a version
    line (0), a count line, then ``topic partition offset`` lines. ValueError if the text
    is not such a file (a different version, a count that does not match)."""
    lines = text.split("\n")
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError(f"not an offset checkpoint of version 0: {lines[0][:40]!r}")
    count = int(lines[1])
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count or any(len(e) != 3 for e in entries):
        raise ValueError(f"expected {count} 'topic partition offset' lines, got {len(entries)}")
    return {(topic, int(partition)): int(offset) for topic, partition, offset in entries}


def read_checkpoint(path: Path) -> dict[tuple[str, int], int] | None:
    """:func:`parse_checkpoint` of ``path``; None if it is missing or not well formed.

    Kafka replaces the file by renaming a complete temporary file over it, so a read
    sees the old or the new file, never a mix; the None covers a log dir being wiped.
    """
    try:
        return parse_checkpoint(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
