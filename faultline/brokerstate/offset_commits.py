"""One group's offset commit records in a replica's ``__consumer_offsets`` log, decoded from
its segments without the broker (``group.json``'s ``commits``, docs/history.md).

Kafka's group coordinator (``GroupCoordinatorRecordSerde``) writes each record's key as a
``type int16`` and then, for an offset commit (types 0 and 1, ``OffsetCommitKey`` v0),
``group string | topic string | partition int32``; its value as ``version int16`` and then
``offset int64`` and, from version 3 on, ``leaderEpoch int32`` (``OffsetCommitValue``,
versions 0 to 4); a null value is a tombstone (the offset deleted). A string is an
``int16`` length and its UTF-8 bytes. A record (Kafka's ``DefaultRecord``) is ``length
varint | attributes int8 | timestampDelta varlong | offsetDelta varint | keyLength varint |
key | valueLength varint | value | headers``, after the batch header
(:mod:`faultline.brokerstate.segments`). Control batches (transaction markers) hold none.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

from faultline.brokerstate.segments import HEADER_SIZE, complete_batches, segment_files, varint

#: Key types of an offset commit record (0: written by Kafka before 2.8's versioned keys too).
_COMMIT_KEYS = frozenset({0, 1})
#: The batch attributes' compression codec bits.
_COMPRESSION = 0x07


class _Undecodable(Exception):
    """A record that is not as the module docstring says."""


def offset_commits(partition_dir: Path, group: str) -> list[list[Any]] | None:
    """``group``'s offset commit records in the replica whose log is in ``partition_dir``,
    in log order, each ``[log offset, topic, partition, committed offset, leader epoch]``
    (the committed offset None for a tombstone, the leader epoch None where the record has
    none). None where they cannot all be told: a compressed batch (the coordinator writes
    uncompressed ones unless ``offsets.topic.compression.codec`` says otherwise), a record
    of the group in a transaction (whether it counts depends on the transaction's end), or
    a record that cannot be decoded."""
    out: list[list[Any]] = []
    for _, segment in segment_files(partition_dir):
        fd = os.open(segment, os.O_RDONLY)
        try:
            for batch in complete_batches(fd, os.fstat(fd).st_size):
                if batch.control:
                    continue
                if batch.attributes & _COMPRESSION:
                    return None
                body = os.pread(fd, batch.size, batch.position)
                try:
                    found = _records(body, batch.base_offset, group)
                except (_Undecodable, IndexError, struct.error, UnicodeDecodeError):
                    return None
                if found and batch.transactional:
                    return None
                out += found
        finally:
            os.close(fd)
    return out


def _records(body: bytes, base: int, group: str) -> list[list[Any]]:
    """The group's offset commits among the records of the batch ``body`` (header included)."""
    (count,) = struct.unpack_from(">i", body, HEADER_SIZE - 4)
    at, out = HEADER_SIZE, []
    for _ in range(count):
        length, at = varint(body, at)
        end = at + length
        if length < 0 or end > len(body):
            raise _Undecodable("a record past its batch")
        _, pos = varint(body, at + 1)  # timestamp delta, after the attributes
        delta, pos = varint(body, pos)
        key, pos = _field(body, pos)
        value, _ = _field(body, pos)
        commit = _commit(key, value) if key is not None else None
        if commit is not None and commit[0] == group:
            out.append([base + delta, *commit[1:]])
        at = end
    return out


def _field(body: bytes, at: int) -> tuple[bytes | None, int]:
    """A record's key or value at ``at`` (None: null) and the position after it."""
    length, at = varint(body, at)
    if length < 0:
        return None, at
    if at + length > len(body):
        raise _Undecodable("a field past its record")
    return body[at:at + length], at + length


def _commit(key: bytes, value: bytes | None) -> tuple[str, str, int, int | None, int | None] | None:
    """(group, topic, partition, committed offset, leader epoch) of an offset commit record;
    None for another record type."""
    (kind,) = struct.unpack_from(">h", key, 0)
    if kind not in _COMMIT_KEYS:
        return None
    group, at = _string(key, 2)
    topic, at = _string(key, at)
    (partition,) = struct.unpack_from(">i", key, at)
    if value is None:
        return group, topic, partition, None, None
    version, offset = struct.unpack_from(">hq", value, 0)
    if not 0 <= version <= 4:
        raise _Undecodable(f"an OffsetCommitValue of version {version}")
    epoch = struct.unpack_from(">i", value, 10)[0] if version >= 3 else -1
    return group, topic, partition, offset, None if epoch < 0 else epoch


def _string(buf: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", buf, at)
    if length < 0 or at + 2 + length > len(buf):
        raise _Undecodable("a string past its key")
    return buf[at + 2:at + 2 + length].decode(), at + 2 + length
