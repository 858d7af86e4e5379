"""Each replica's log of the test topic, summarized per record batch into ``replicas.jsonl``,
so that :mod:`faultline.checkers.whitebox` can check that replicas agree below the HW.

What is compared, and why: a follower appends the batches it fetches from the leader
byte for byte, so two replicas that agree hold the same batches at the same offsets,
each with the same CRC-32C (which covers every record's key, value, headers and
timestamps, and the producer id and sequence). One line per replica is enough::

    {"topic": "fl-queue", "partition": 0, "node": 2, "log_start_offset": 0,
     "log_end_offset": 1000, "hw_checkpoint": 990,
     "batches": [[base_offset, last_offset, partition_leader_epoch, crc,
                  producer_id, producer_epoch, base_sequence, last_sequence], ...]}

The producer id, epoch and sequences say who wrote each batch, which is what tells a
duplicate the broker failed to de-duplicate (one producer id, epoch and sequence
stored twice) from one the client re-sent under a new epoch or producer id
(:mod:`faultline.checkers.provenance`). ``-1`` where the batch has none (a
non-idempotent producer); ``last_sequence`` is
:attr:`faultline.brokerstate.segments.Batch.last_sequence`. Runs written before these
fields were recorded have four-element batches; readers accept both. A control batch
(a transaction marker) would be listed like a batch of records, the offset it holds
read as data; the workloads use no transactions, so the test topic has none.

Parsing only the 61-byte batch headers (:func:`faultline.brokerstate.segments.read_batches`,
which ends a segment at a torn tail or at what is not a v2 batch) costs a few ms per
ten thousand batches, where DumpLogSegments ``--print-data-log`` prints every record
through a JVM: measured on this machine, 2.2 s for 11,000 records of one replica, most
of it the JVM's start, and a line of text per record. A divergence shows as the
offsets of the first batch that differs; the values themselves are in the segments
(``nodes/`` keeps configs and logs only).

``hw_checkpoint`` is the replica's ``replication-offset-checkpoint`` entry: a HW the
broker wrote at most ``replica.high.watermark.checkpoint.interval.ms`` ago; None when
the file has no entry for the partition, is missing or is not well formed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faultline.brokerstate.segments import HW_CHECKPOINT, read_batches, read_checkpoint, segment_files


def replica_summary(data_dir: Path, topic: str, partition: int) -> dict[str, Any] | None:
    """One replicas.jsonl line (without ``node``) for ``data_dir``'s copy of the
    partition, or None when the node holds no copy."""
    pdir = data_dir / f"{topic}-{partition}"
    if not pdir.is_dir():
        return None
    batches = [b for _, seg in segment_files(pdir) for b in read_batches(seg)]
    checkpoint = read_checkpoint(data_dir / HW_CHECKPOINT) or {}
    return {
        "topic": topic, "partition": partition,
        "log_start_offset": batches[0].base_offset if batches else None,
        "log_end_offset": batches[-1].last_offset + 1 if batches else None,
        "hw_checkpoint": checkpoint.get((topic, partition)),
        "batches": [[b.base_offset, b.last_offset, b.leader_epoch, b.crc, b.producer_id,
                     b.producer_epoch, b.base_sequence, b.last_sequence] for b in batches],
    }  # fmt: skip

