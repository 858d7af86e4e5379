"""Each replica's log of the test topic, summarized per record batch into ``replicas.jsonl``,
so that :mod:`faultline.checkers.whitebox` can check that replicas agree below the HW.

What is compared, and why: a follower appends the batches it fetches from the leader
byte for byte, so two replicas that agree hold the same batches at the same offsets,
each with the same CRC-32C (which covers every record's key, value, headers and
timestamps, and the producer id and sequence). One line per replica is enough::

    {"topic": "fl-queue", "partition": 0, "node": 2, "log_start_offset": 0,
     "log_end_offset": 1000, "hw_checkpoint": 990,
     "batches": [[base_offset, last_offset, partition_leader_epoch, crc], ...]}

Reading only the 61-byte batch headers (and seeking over the records) costs a few ms
per ten thousand batches, where DumpLogSegments ``--print-data-log`` prints every record
through a JVM: measured on this machine, 2.2 s for 11,000 records of one replica, most
of it the JVM's start, and a line of text per record. A divergence shows as the
offsets of the first batch that differs; the values themselves are in the segments
(``nodes/`` keeps configs and logs only).

``hw_checkpoint`` is the replica's ``replication-offset-checkpoint`` entry: a HW the
broker wrote at most ``replica.high.watermark.checkpoint.interval.ms`` ago.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32
_HEAD = struct.Struct(">qiibI")
#: batchLength counts the bytes after baseOffset and batchLength themselves.
_LOG_OVERHEAD = 12
#: attributes int16, lastOffsetDelta int32 follow the CRC.
_TAIL = struct.Struct(">hi")
_HEADER_SIZE = _HEAD.size + _TAIL.size


@dataclass(frozen=True, slots=True)
class Batch:
    """One record batch's identity: its offsets, the leader epoch that wrote it, its CRC."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int


def read_batches(segment: Path) -> Iterator[Batch]:
    """The batches of one ``.log`` segment, in file order.

    Stops at the end of the file, at a batch cut short (the tail being written when a
    broker died) and at zero padding; magic values below 2 (pre-0.11 message sets)
    cannot occur in a log this harness's brokers wrote and end the read too.
    """
    size = segment.stat().st_size
    with segment.open("rb") as fh:
        while True:
            head = fh.read(_HEADER_SIZE)
            if len(head) < _HEADER_SIZE:
                return
            base, length, epoch, magic, crc = _HEAD.unpack_from(head)
            _, last_delta = _TAIL.unpack_from(head, _HEAD.size)
            if length <= 0 or magic < 2:
                return
            rest = length + _LOG_OVERHEAD - _HEADER_SIZE
            if fh.seek(rest, 1) > size:
                return
            yield Batch(base, base + last_delta, epoch, crc)


def replica_summary(data_dir: Path, topic: str, partition: int) -> dict[str, Any] | None:
    """One replicas.jsonl line (without ``node``) for ``data_dir``'s copy of the
    partition, or None when the node holds no copy."""
    pdir = data_dir / f"{topic}-{partition}"
    if not pdir.is_dir():
        return None
    batches = [b for seg in sorted(pdir.glob("*.log")) for b in read_batches(seg)]
    return {
        "topic": topic, "partition": partition,
        "log_start_offset": batches[0].base_offset if batches else None,
        "log_end_offset": batches[-1].last_offset + 1 if batches else None,
        "hw_checkpoint": hw_checkpoint(data_dir).get((topic, partition)),
        "batches": [[b.base_offset, b.last_offset, b.leader_epoch, b.crc] for b in batches],
    }  # fmt: skip


def hw_checkpoint(data_dir: Path) -> dict[tuple[str, int], int]:
    """``replication-offset-checkpoint``: (topic, partition) -> HW; empty if unreadable.

    Format: a version line, a count line, then ``topic partition offset`` lines.
    """
    try:
        lines = (data_dir / "replication-offset-checkpoint").read_text().splitlines()
    except OSError:
        return {}
    out: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].lstrip("-").isdigit():
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out
