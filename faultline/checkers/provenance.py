"""Who wrote a record, from the batches that hold it, and what two copies of one value say
about who broke a promise.

Every v2 batch carries the producer id, producer epoch and base sequence it was sent
with (``replicas.jsonl``, :mod:`faultline.brokerstate.replica_logs`); a record's own
sequence is the base sequence plus its offset's distance from the batch's base
offset. An idempotent producer numbers each partition's records 0, 1, 2, ... under one
producer id and epoch, and the broker, which remembers the last batches of each
producer id, drops a retried batch it already holds. Two copies of one value
therefore tell who failed (:func:`pair_cause`):

- one producer id, epoch and sequence stored twice: the broker's de-duplication
  failed (``broker-dedup-failure``, a Kafka bug);
- the same producer id, the copy written last under a later epoch: the client bumped
  its epoch (librdkafka does after an ``OUT_OF_ORDER_SEQUENCE_NUMBER`` or a request it
  cannot know the outcome of) and re-sent a batch the broker had written; a new epoch
  starts a new sequence, so the broker cannot see a retry (``client-epoch-bump``);
- the same producer id, the copy written last under an earlier epoch: the broker
  appended an epoch it had fenced, which it rejects (``INVALID_PRODUCER_EPOCH``) from a
  client (``broker-fencing-failure``, a Kafka bug);
- another producer id: the client re-sent it as a new producer (a restart, a reset
  producer id: ``client-new-producer-id``);
- one producer id and epoch, two sequences: the client numbered one record twice
  (``client-resequenced``).

Two sends of one process stored in the opposite order (:func:`reorder_cause`) read the
same way, the one sent first being the one written last: under a later epoch the client
sent it after the broker wrote the other, under an earlier one the broker failed to fence
it; ``broker-order-failure`` when one producer id and epoch numbered them in send order
and the broker stored them the other way round. Where the batches do not
say (no ``replicas.jsonl``, batches from before the producer fields were recorded, a
batch without a producer id, a copy in no replica's log, replicas that disagree on who
wrote a copy) the cause is ``unknown``.
Who each cause blames is the guarantee table's: :data:`faultline.checkers.guarantees.CULPRITS`.

Pure: replicas.jsonl lines in, plain values out.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_SEQUENCES = 1 << 31  # sequences wrap past 2^31 - 1 to 0


@dataclass(frozen=True, slots=True)
class Copy:
    """One stored record as its batch says: where, on which replica, and by whom."""

    offset: int
    node: int
    batch_base: int
    batch_last: int
    producer_id: int
    producer_epoch: int
    sequence: int

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "node": self.node, "batch": [self.batch_base, self.batch_last],
                "producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "sequence": self.sequence}

    def text(self) -> str:
        """For a story: ``offset 812 (batch 810..814 on n2): producer id 1000, epoch 1, sequence 57``."""
        return (f"offset {self.offset} (batch {self.batch_base}..{self.batch_last} on n{self.node}): "
                f"producer id {self.producer_id}, epoch {self.producer_epoch}, sequence {self.sequence}")


class Batches:
    """The batches of one partition's replicas (``replicas.jsonl`` lines), to find the
    one that holds an offset. Built once per partition; each lookup is a bisection."""

    def __init__(self, replicas: Sequence[Mapping[str, Any]]) -> None:
        self._reps = [(int(r["node"]), [int(b[0]) for b in r["batches"]], r["batches"])
                      for r in replicas]

    def copy_at(self, offset: int) -> Copy | None:
        """The record at ``offset`` as the replicas whose batch holds it with a producer id
        say (the first by node, named); None when none does, or when two of them disagree
        on who wrote it (producer id, epoch or sequence: then it is not known)."""
        found: list[Copy] = []
        for node, bases, batches in self._reps:
            i = bisect_right(bases, offset) - 1
            if i < 0:
                continue
            b = batches[i]
            if int(b[1]) < offset or len(b) < 8 or int(b[4]) < 0 or int(b[6]) < 0:
                continue
            seq = (int(b[6]) + offset - int(b[0])) % _SEQUENCES
            found.append(Copy(offset, node, int(b[0]), int(b[1]), int(b[4]), int(b[5]), seq))
        if not found or len({(c.producer_id, c.producer_epoch, c.sequence) for c in found}) > 1:
            return None
        return found[0]


def pair_cause(a: Copy, b: Copy) -> str:
    """The cause of one value stored as ``a`` and again, at a higher offset, as ``b``
    (see the module docstring)."""
    if a.producer_id != b.producer_id:
        return "client-new-producer-id"
    if a.producer_epoch != b.producer_epoch:
        return _epochs(a, b)
    if a.sequence == b.sequence:
        return "broker-dedup-failure"
    return "client-resequenced"


def duplicate_cause(copies: Sequence[Copy | None]) -> str:
    """The cause of one value stored at several offsets, from its copies in offset order:
    every two of them; a broker failure between any two wins (it is the graver finding),
    else the cause of the first two. ``unknown`` if a copy is."""
    if len(copies) < 2 or any(c is None for c in copies):
        return "unknown"
    causes = [pair_cause(a, b) for a, b in itertools.combinations(copies, 2)]  # type: ignore[arg-type]
    return next((c for c in ("broker-dedup-failure", "broker-fencing-failure") if c in causes),
                causes[0])


def reorder_cause(first: Copy | None, second: Copy | None) -> str:
    """The cause of ``first`` (sent first) stored after ``second`` (sent later) by one
    process (see the module docstring)."""
    if first is None or second is None:
        return "unknown"
    if first.producer_id != second.producer_id:
        return "client-new-producer-id"
    if first.producer_epoch != second.producer_epoch:
        return _epochs(second, first)
    # One producer id and epoch: sequences follow send order unless the client
    # numbered them otherwise (the distance is taken modulo the wrap).
    ahead = (second.sequence - first.sequence) % _SEQUENCES
    return "broker-order-failure" if 0 < ahead < _SEQUENCES // 2 else "client-resequenced"


def _epochs(before: Copy, after: Copy) -> str:
    """The cause of one producer id's ``after`` written after ``before`` under another epoch:
    a later epoch is the client's bump, an earlier one an epoch the broker had to fence."""
    return ("client-epoch-bump" if after.producer_epoch > before.producer_epoch
            else "broker-fencing-failure")
