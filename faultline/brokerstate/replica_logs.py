"""Each replica's log of the test topic, summarized per record batch into ``replicas.jsonl``
(docs/history.md states its lines), so that :mod:`faultline.checkers.whitebox` can check
that replicas agree below the HW, and the txn checker which transactions the log left
open (each batch's :func:`~faultline.brokerstate.segments.batch_kind`: records in or out
of a transaction, commit and abort markers); docs/design.md ("White-box observers") says
why batches and their CRCs suffice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faultline.brokerstate.segments import HW_CHECKPOINT, read_batch_kinds, read_checkpoint, segment_files


def replica_summary(data_dir: Path, topic: str, partition: int) -> dict[str, Any] | None:
    """One replicas.jsonl line (without ``node``) for ``data_dir``'s copy of the
    partition, or None when the node holds no copy."""
    pdir = data_dir / f"{topic}-{partition}"
    if not pdir.is_dir():
        return None
    batches = [b for _, seg in segment_files(pdir) for b in read_batch_kinds(seg)]
    checkpoint = read_checkpoint(data_dir / HW_CHECKPOINT) or {}
    return {
        "topic": topic, "partition": partition,
        "log_start_offset": batches[0][0].base_offset if batches else None,
        "log_end_offset": batches[-1][0].last_offset + 1 if batches else None,
        "hw_checkpoint": checkpoint.get((topic, partition)),
        "batches": [[b.base_offset, b.last_offset, b.leader_epoch, b.crc, b.producer_id,
                     b.producer_epoch, b.base_sequence, b.last_sequence, kind] for b, kind in batches],
    }  # fmt: skip

