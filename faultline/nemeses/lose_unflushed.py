"""lose-unflushed: what a power loss without fsync does to a Kafka replica.

The fault: SIGKILL the node, cut each partition's log back to its recovery point as
recorded in ``recovery-point-offset-checkpoint`` (everything not known to be flushed is
gone: the worst case the disk allows), then, at heal time, start the node. A partition
missing from the checkpoint, or every partition when the file cannot be read, is cut
back to its first segment's base offset, as Kafka's ``LogManager`` treats such a file.
The KRaft metadata log (``__cluster_metadata``) is left alone: Raft fsyncs it before
acknowledging. In a partition's directory the segment holding the recovery point (the
last whose base offset is below it, or the first) is truncated at the first batch not
wholly below it, at a batch torn by the end of the file, or at the first header that
is not a v2 batch's (:func:`faultline.brokerstate.segments.read_batches`); every later
segment and the index files of the cut one are deleted. Why that is a power loss, and
why the broker rebuilds what was deleted: docs/design.md, "Nemeses".
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultline.brokerstate.segments import LogEndReader, parse_checkpoint, read_batches, segment_files
from faultline.errors import NemesisError
from faultline.nemeses.base import NodeFault, killable

CHECKPOINT = "recovery-point-offset-checkpoint"
_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The offsets of a checkpoint file (:func:`faultline.brokerstate.segments.parse_checkpoint`);
    an absent file means no flush was ever recorded (empty).

    Raises NemesisError naming ``path`` when the file cannot be read or is not well formed.
    """
    try:
        return parse_checkpoint(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:  # ValueError includes UnicodeDecodeError
        raise NemesisError(f"{path}: {e}") from e


def cut_point(segment: Path, recovery_point: int) -> tuple[int, int | None]:
    """Where to truncate a segment so that only offsets below ``recovery_point`` remain.

    Returns ``(byte position, next offset)``: the position of the first batch not wholly
    below the recovery point (or where :func:`faultline.brokerstate.segments.read_batches`
    stops: a torn tail, what is not a v2 batch, the end of the file), and the offset
    after the last batch kept (None when no batch is kept).
    """
    next_offset: int | None = None
    pos = 0
    for batch in read_batches(segment):
        if batch.last_offset >= recovery_point:
            return batch.position, next_offset
        next_offset = batch.last_offset + 1
        pos = batch.end
    return pos, next_offset


def end_offset(partition_dir: Path) -> int:
    """The log end offset as the files show it (Kafka's ``readNextOffset`` of the last
    segment, see :class:`faultline.brokerstate.segments.LogEndReader`); 0 without segments."""
    return LogEndReader(partition_dir).read() or 0


@dataclass(frozen=True, slots=True)
class Truncation:
    """What cutting one partition did: log end offsets before and after, bytes removed."""

    recovery_point: int
    old_end: int
    new_end: int
    bytes_removed: int

    def to_json(self) -> dict[str, int]:
        """The history form."""
        return {"recovery_point": self.recovery_point, "old_end": self.old_end,
                "new_end": self.new_end, "bytes_removed": self.bytes_removed}


def truncate_partition(partition_dir: Path, recovery_point: int) -> Truncation:
    """Cut one partition's log back to ``recovery_point`` on disk; see the module docstring.

    Contract: only call while the broker is down. Afterwards the directory holds only
    whole batches with offsets below the recovery point; index files of the cut and
    deleted segments are gone, so Kafka rebuilds them when it loads the log.
    """
    segs = segment_files(partition_dir)
    if not segs:
        return Truncation(recovery_point, 0, 0, 0)
    old_end = end_offset(partition_dir)
    holder = 0
    for i, (base, _) in enumerate(segs):
        if base < recovery_point:
            holder = i
    removed = 0
    base, path = segs[holder]
    pos, _ = cut_point(path, recovery_point)
    size = path.stat().st_size
    if pos < size:
        os.truncate(path, pos)
        removed += size - pos
    _delete_indexes(partition_dir, base)
    for later_base, later in segs[holder + 1:]:
        removed += later.stat().st_size
        later.unlink()
        _delete_indexes(partition_dir, later_base)
    return Truncation(recovery_point, old_end, end_offset(partition_dir), removed)


def _delete_indexes(partition_dir: Path, base: int) -> None:
    for suffix in _INDEX_SUFFIXES:
        (partition_dir / f"{base:020d}{suffix}").unlink(missing_ok=True)


def partition_dirs(data_dir: Path) -> dict[tuple[str, int], Path]:
    """Partition directories (``<topic>-<partition>``) of a log dir, without the KRaft
    metadata log and without directories being deleted or moved (``-delete``, ``-future``)."""
    out: dict[tuple[str, int], Path] = {}
    if not data_dir.is_dir():
        return out
    for p in data_dir.iterdir():
        if not p.is_dir():
            continue
        topic, _, part = p.name.rpartition("-")
        if not topic or not part.isdigit() or topic.startswith("__cluster_metadata"):
            continue
        out[(topic, int(part))] = p
    return out


def recovery_points(data_dir: Path) -> tuple[dict[tuple[str, int], int], str | None]:
    """The recovery points of a log dir, as the broker will read them on restart.

    Kafka's ``LogManager`` treats an unreadable checkpoint as empty ("resetting the
    recovery checkpoint to 0") and recovers every log from its start; so does this.
    Returns the points and, for an unreadable file, why it could not be read.
    """
    try:
        return read_checkpoint(data_dir / CHECKPOINT), None
    except NemesisError as e:
        return {}, str(e)


def lose_unflushed(
    data_dir: Path, topics: Collection[str] | None = None,
) -> tuple[dict[str, Truncation], str | None]:
    """Cut every partition log under ``data_dir`` back to its recorded recovery point.

    ``topics`` limits the cut to those topic names (None: every topic). Returns
    ``"<topic>/<partition>" -> Truncation`` for each partition cut, and why the
    checkpoint could not be read (None if it could; see ``recovery_points``). Only
    call while the broker is down.
    """
    checkpoint, checkpoint_error = recovery_points(data_dir)
    out: dict[str, Truncation] = {}
    for (topic, partition), pdir in sorted(partition_dirs(data_dir).items()):
        if topics is not None and topic not in topics:
            continue
        segs = segment_files(pdir)
        if not segs:
            continue
        rp = checkpoint.get((topic, partition), segs[0][0])
        out[f"{topic}/{partition}"] = truncate_partition(pdir, rp)
    return out, checkpoint_error


class LoseUnflushedNemesis(NodeFault):
    """``lose-unflushed`` kills one node (``value.nodes``) and cuts each of its partition
    logs back to the recovery point; the node stays down until ``start``.

    The completion value's ``truncated`` maps ``"<topic>/<partition>"`` to the log end
    offsets before and after the cut (``old_end``, ``new_end``), the recovery point
    and the bytes removed: every partition of the test topic on the node, and those of
    other topics that lost records. ``checkpoint_unreadable`` says why the checkpoint
    could not be read, when it could not (everything was then cut, as Kafka recovers).
    """

    family = "lose-unflushed"
    needs_running = False

    def _fault(self, node: int) -> dict[str, Any]:
        killable(self.cluster, self.family).kill(node)
        truncated, checkpoint_error = lose_unflushed(self.cluster.node(node).data_dir)
        lost = sum(t.old_end - t.new_end for t in truncated.values())
        # every partition of the test topic; others (internal topics) only if cut
        topic = self.cluster.spec.topic.name
        fields: dict[str, Any] = {
            "result": (f"killed node {node}; cut {len(truncated)} partition logs back to their "
                       f"recovery points, {lost} records gone"),
            "truncated": {k: t.to_json() for k, t in truncated.items()
                          if k.rsplit("/", 1)[0] == topic or t.new_end != t.old_end},
        }
        if checkpoint_error is not None:
            fields["checkpoint_unreadable"] = checkpoint_error
        return fields
