"""What the replicas' logs say of a ``txn`` run's transactions, from ``replicas.jsonl``'s
batch kinds (docs/history.md, "replicas.jsonl"): which marker ended the transaction a
record is in, and which transactions the log left open; and what the brokers answered
for the last stable offset at the run's end (``observations.jsonl``'s ``lso``).

A transaction's records in a partition are its producer id's ``txn`` batches; the
coordinator ends them with a ``commit`` or ``abort`` marker of that producer id, and a
read_committed reader reads no further than the first record of a transaction still
open there (the last stable offset). A partition is judged by the log of the replica whose
checkpointed high watermark is highest, then the longest (the first by node of those):
after quiescence every replica in the ISR holds the leader's, while one that fell out may
keep a diverged tail no high watermark covers.
Lines written before batches carried their kind say nothing. Where every replica holds a
record is the queue checker's reading of all the partition's lines
(:func:`~faultline.checkers.anomalies.replicas_of`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from faultline.checkers.anomalies import Replicas, replicas_of
from faultline.checkers.whitebox import replicas_by_partition

#: A transaction's records no marker of its producer id follows in the log.
OPEN = "open"


@dataclass(frozen=True)
class PartitionLog:
    """One partition's log as the replica it is judged by (``node``) holds it: its log end, the
    base offset and last offset of each batch that holds a transaction's records, and how
    the transaction of each ended (``commit``, ``abort``, or :data:`OPEN`), the first
    offset of each producer id's transaction left open, and what all its replicas' logs
    say together (``replicas``: where every one holds the same batch)."""

    node: int
    end: int
    bases: tuple[int, ...]
    lasts: tuple[int, ...]
    ends: tuple[str, ...]
    open: Mapping[int, int]
    replicas: Replicas

    def marker_at(self, offset: int) -> str | None:
        """How the transaction whose record is at ``offset`` ended in the log: ``commit``,
        ``abort`` or :data:`OPEN`; None where the log holds no transaction's record there."""
        i = bisect_right(self.bases, offset) - 1
        return self.ends[i] if i >= 0 and offset <= self.lasts[i] else None

    @property
    def last_stable_offset(self) -> int:
        """Where a read_committed reader stops: the first record of a transaction left
        open, else the log end."""
        return min(self.open.values(), default=self.end)


def partition_logs(replicas: Iterable[Mapping[str, Any]], topic: str,
                   replication_factor: int) -> dict[int, PartitionLog]:
    """Partition -> its :class:`PartitionLog`, from ``replicas.jsonl``'s lines of ``topic``
    (a topic of ``replication_factor``) whose every batch carries its kind (the ninth
    item); partitions with none are absent."""
    out = {}
    for p, lines in replicas_by_partition(replicas, topic).items():
        kinds = [r for r in lines
                 if r["log_end_offset"] is not None and all(len(b) > 8 for b in r["batches"])]
        if kinds:
            judged = max(kinds, key=lambda r: (r["hw_checkpoint"] if isinstance(r["hw_checkpoint"], int)
                                               else -1, r["log_end_offset"]))
            out[p] = _log(judged, replicas_of(lines, replication_factor))
    return out


def _log(line: Mapping[str, Any], replicas: Replicas) -> PartitionLog:
    batches: list[list[Any]] = []  # [base, last, producer id, how it ended]
    pending: dict[int, list[list[Any]]] = {}  # producer id -> its batches no marker has ended yet
    for base, last, _epoch, _crc, pid, *_rest, kind in line["batches"]:
        if kind == "txn":
            batch = [base, last, pid, OPEN]
            batches.append(batch)
            pending.setdefault(pid, []).append(batch)
        elif kind in ("commit", "abort"):
            for batch in pending.pop(pid, ()):
                batch[3] = kind
    return PartitionLog(int(line["node"]), int(line["log_end_offset"]),
                        tuple(b[0] for b in batches), tuple(b[1] for b in batches),
                        tuple(b[3] for b in batches), {pid: bs[0][0] for pid, bs in pending.items()},
                        replicas)


def final_stable_offsets(observations: Iterable[Mapping[str, Any]], topic: str) -> dict[int, tuple[int, int]]:
    """Partition of ``topic`` -> (last stable offset, high watermark) the observer's last
    line of it holds, the brokers' own answers at the run's end; absent where that line
    lacks either (no witness then: an earlier answer may be stale)."""
    last: dict[int, Mapping[str, Any]] = {}
    for line in observations:
        if line["topic"] == topic:
            last[line["partition"]] = line
    return {p: (line["lso"], line["hw"]) for p, line in last.items()
            if line.get("lso") is not None and line["hw"] is not None}
