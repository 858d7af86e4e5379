"""``group.json`` (docs/history.md) read for the group checker: the run's group's committed
offsets of the test topic after the drain, as its coordinator answered, or why they are
not known, in one line; and the replicas of the ``__consumer_offsets`` partition that holds
them, with the commit records in their logs (:func:`stored_before`, :func:`kept_to_end`), and which nodes hold
that partition (:func:`offsets_nodes`); for a group without ``group.json`` (read-process-write's),
its partition and nodes by the metadata log alone (:func:`group_partition`,
:func:`partition_nodes`). Never raises for bad input."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from faultline.checkers.conform import schema
from faultline.checkers.faults_seen import Timeline
from faultline.checkers.whitebox import Line, partition_timeline
from faultline.rundir import GROUP_FILE, special
from faultline.targeted import OFFSETS_TOPIC, coordinator_partition

#: Per replica of the group's offsets partition, its commit records of the test topic in log
#: order, each (log offset, partition, committed offset; None: a tombstone).
CommitLogs = list[list[tuple[int, int, int | None]]]


@dataclass(frozen=True, slots=True)
class GroupEnd:
    """What ``group.json`` says: ``offsets``, the test topic's partition -> the group's
    committed offset, or why they are not known; ``offsets_partition`` and
    ``offsets_replicas``, the ``__consumer_offsets`` partition holding them and its
    replicas' summaries (``replicas.jsonl`` lines), None where not known; ``commits``, each
    replica's commit records of the test topic (:data:`CommitLogs`), None where a replica's
    are not known (or no replica's)."""

    offsets: dict[int, int] | str
    offsets_partition: int | None = None
    offsets_replicas: list[dict[str, Any]] | None = None
    commits: CommitLogs | None = None


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
    replicas = data["offsets_replicas"]
    commits = None if not replicas or any(r.get("commits") is None for r in replicas) else [
        [(at, part, off) for at, t, part, off, _ in r["commits"] if t == topic] for r in replicas]
    return GroupEnd(offsets, data["offsets_topic_partition"], replicas, commits)


def offsets_timeline(metadata: Iterable[Line] | None) -> Timeline | None:
    """The ``__consumer_offsets`` partitions' states by the KRaft metadata log
    (``metadata.jsonl``'s lines), what :func:`offsets_nodes`, :func:`partition_nodes` and
    :func:`group_partition` read; None without a log."""
    return partition_timeline(metadata, OFFSETS_TOPIC)


def offsets_nodes(end: GroupEnd, timeline: Timeline | None) -> frozenset[str] | None:
    """The nodes holding a replica of the group's ``__consumer_offsets`` partition
    (:func:`partition_nodes` of the one ``group.json`` names, where the nodes whose data
    directories held it at the end, ``offsets_replicas``, are among them)."""
    return partition_nodes(end.offsets_partition, timeline,
                           {str(r["node"]) for r in end.offsets_replicas or ()})


def partition_nodes(partition: int | None, timeline: Timeline | None,
                    held: Iterable[str] = ()) -> frozenset[str] | None:
    """Every node the :func:`offsets_timeline` gives ``__consumer_offsets`` partition
    ``partition`` as a replica, where the nodes ``held`` are among them. None where the
    partition or the log's replicas of it are not known, or the two disagree."""
    if partition is None:
        return None
    states = (timeline or {}).get((OFFSETS_TOPIC, partition), ())
    logged = frozenset(str(n) for s in states for n in s.replicas)
    return logged if logged and set(held) <= logged else None


def group_partition(group: str, timeline: Timeline | None) -> int | None:
    """The ``__consumer_offsets`` partition holding ``group``'s offsets
    (:func:`~faultline.targeted.coordinator_partition`) by the number of that topic's
    partitions the :func:`offsets_timeline` records (partitions 0 to n - 1, each logged);
    None where it records none, or not all of them."""
    logged = {p for _, p in timeline or {}}
    if not logged or logged != set(range(len(logged))):
        return None
    return coordinator_partition(group, len(logged))


def stored_before(logs: CommitLogs | None, partition: int, higher: int, lower: int | None) -> bool | None:
    """Whether the replicas' logs say the group's commit of ``higher`` for the test topic's
    ``partition`` was stored, and kept, until a commit of ``lower`` (None: no committed
    offset) was stored: True where every replica holds a record of ``higher`` followed by
    one of ``lower`` with none below ``higher`` (nor a tombstone) between them (the
    group's position stayed at or above ``higher`` until then); None where some do and
    some do not; False where none does, or the logs are not known."""
    return _every(logs, partition, lambda log: _held(log, higher, lower))


def kept_to_end(logs: CommitLogs | None, partition: int, higher: int, answer: int | None) -> bool | None:
    """As :func:`stored_before` of ``higher`` and the coordinator's ``answer``, where a
    replica whose records after one of ``higher`` stay at or above it to the end says so
    too: that replica kept the commit, whatever the coordinator answered."""
    return _every(logs, partition, lambda log: _held(log, higher, answer) or _held(log, higher, None, True))


def _held(log: list[tuple[int, int | None]], higher: int, lower: int | None, to_end: bool = False) -> bool:
    """Whether ``log`` holds a record of ``higher`` followed, with no record below it (nor
    a tombstone) between, by one of ``lower`` (or, ``to_end``, by its end)."""
    since = False  # within a run of records at or above higher begun by one of it
    for _, off in log:
        if off == higher:
            since = True
        elif off is None or off < higher:
            if off == lower and lower is not None:
                return since  # the first record of lower: a later one may be another commit's
            since = False
    return since and to_end


def _every(logs: CommitLogs | None, partition: int,
           holds: Callable[[list[tuple[int, int | None]]], bool]) -> bool | None:
    """True where ``holds`` of every replica's records of ``partition``, False where of
    none (or the logs are not known), None where of some."""
    if not logs:
        return False
    said = set()
    for log in logs:
        mine = [(at, off) for at, p, off in log if p == partition]
        said.add(bool(mine) and holds(mine))
    return True if said == {True} else False if said == {False} else None
