"""Each replica's log of the test topic, summarized per record batch into ``replicas.jsonl``,
so that :mod:`faultline.checkers.whitebox` can check that replicas agree below the HW.
One line per replica::

    {"topic": "fl-queue", "partition": 0, "node": 2, "log_start_offset": 0,
     "log_end_offset": 1000, "hw_checkpoint": 990,
     "batches": [[base_offset, last_offset, partition_leader_epoch, crc,
                  producer_id, producer_epoch, base_sequence, last_sequence], ...]}

Producer id, epoch and sequences are ``-1`` where the batch has none (a non-idempotent
producer); ``last_sequence`` is :attr:`faultline.brokerstate.segments.Batch.last_sequence`.
Runs written before these fields have four-element batches; readers accept both.
``hw_checkpoint`` is the replica's ``replication-offset-checkpoint`` entry; None when
the file has no entry for the partition, is missing or is not well formed. Why batches
and their CRCs suffice: docs/design.md, "White-box observers".
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

