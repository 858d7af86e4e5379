"""``group.json`` (docs/history.md) read for the group checker: the run's group's committed
offsets of the test topic after the drain, as its coordinator answered, or why they are
not known, in one line; and the replicas of the ``__consumer_offsets`` partition that holds
them, and which nodes hold that partition (:func:`offsets_nodes`). Never raises for bad
input."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from faultline.checkers.conform import schema
from faultline.checkers.whitebox import Line, partition_timeline
from faultline.rundir import GROUP_FILE, special
from faultline.targeted import OFFSETS_TOPIC


@dataclass(frozen=True, slots=True)
class GroupEnd:
    """What ``group.json`` says: ``offsets``, the test topic's partition -> the group's
    committed offset, or why they are not known; ``offsets_partition`` and
    ``offsets_replicas``, the ``__consumer_offsets`` partition holding them and its
    replicas' summaries (``replicas.jsonl`` lines), None where not known."""

    offsets: dict[int, int] | str
    offsets_partition: int | None = None
    offsets_replicas: list[dict[str, Any]] | None = None


def group_end(run_dir: Path, group: str, topic: str) -> GroupEnd:
    """``run_dir/group.json`` read for ``group`` and ``topic``. Its offsets are not known
    where the file is missing (the run did not collect it), unreadable, not as its schema
    says or of another group (then neither is the rest), or where it says the coordinator
    gave no answer."""
    path = Path(run_dir) / GROUP_FILE
    if not path.exists():
        return GroupEnd(f"no {GROUP_FILE}: the run did not collect the group's committed offsets")
    if special(path):
        return GroupEnd(f"{path} could not be read: not a regular file")
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        return GroupEnd(f"{path} could not be read: {e}")
    why = schema("group.schema.json").problem(data)
    if why is not None:
        return GroupEnd(f"{path}: {why}")
    if data["group"] != group:
        return GroupEnd(f"{path} is of group {data['group']!r}, not the run's {group!r}")
    offsets: dict[int, int] | str = (
        f"{path}: no committed offsets ({'; '.join(data['errors']) or 'no reason given'})"
        if data["offsets"] is None else
        {o["partition"]: o["offset"] for o in data["offsets"] if o["topic"] == topic})
    return GroupEnd(offsets, data["offsets_topic_partition"], data["offsets_replicas"])


def offsets_nodes(end: GroupEnd, metadata: Iterable[Line] | None) -> frozenset[str] | None:
    """The nodes holding a replica of the group's ``__consumer_offsets`` partition: every
    one the KRaft metadata log (``metadata.jsonl``'s lines) gives that partition, where
    ``group.json`` names it and the nodes whose data directories held it at the end
    (``offsets_replicas``) are among them. None where the partition or the log's replicas
    of it are not known, or the two disagree."""
    if end.offsets_partition is None:
        return None
    timeline = partition_timeline(metadata, OFFSETS_TOPIC) or {}
    states = timeline.get((OFFSETS_TOPIC, end.offsets_partition), ())
    logged = frozenset(str(n) for s in states for n in s.replicas)
    found = {str(r["node"]) for r in end.offsets_replicas or ()}
    return logged if logged and found <= logged else None
