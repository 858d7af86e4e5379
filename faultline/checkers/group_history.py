"""A consumer group's ops read from a history: what the group checker
(:mod:`faultline.checkers.groups`) judges.

The group workload's ops (docs/history.md: ``poll``, ``commit``, ``assign``, ``revoke``,
``lost``), the drain and the nemesis's, read into a :class:`Group`: from rows
(:func:`group`), or beside another reader of the same history (:class:`GroupReader`).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from faultline.checkers.faults_seen import NemesisAction, nemesis_actions
from faultline.history import NEMESIS, HistoryFile, Op

#: A record's value as the history holds it.
Value = int | str | None

#: Commit outcomes that leave open whether the coordinator stored the offsets: ``info``
#: (unknown), and ``fail``, since a client that retries a request (the Java client's
#: ``commitSync`` after a timeout) reports the refusal of a retry whose first attempt may
#: have been stored.
UNSURE = frozenset({"info", "fail"})
#: The error of a member's ``info`` poll whose client reported a fatal error: it was fenced
#: for good (a static member another joined with its ``group.instance.id``).
FATAL = "_FATAL"


@dataclass(frozen=True)
class Commit:
    """One partition's offset in a commit op by ``process``: its invoke (``index``, time
    ``invoked``), when and how it ended (``outcome`` ok, fail or info)."""

    process: int
    index: int
    invoked: int
    ended: int
    outcome: str
    partition: int
    offset: int


class Read(NamedTuple):
    """A record's offset as a member polled it, with the invoke and the end of that poll."""

    offset: int
    invoked: int
    ended: int


@dataclass(frozen=True)
class Ownership:
    """A partition in ``process``'s assignment from ``began`` (its ``assign``) to ``ended``,
    which says ``how``: ``revoke``, ``lost``, or ``end`` (the process's last op; a retired
    process's closing callbacks are not journaled); the first record of it the process
    polled in that time (None: none, or an ``assign`` of a partition it still held, whose
    position carries on), and each read that did not follow the one before it in that time
    (the offset before, the read)."""

    process: int
    partition: int
    began: int
    ended: int
    how: str
    member: str
    first: Read | None = None
    jumps: tuple[tuple[int, Read], ...] = ()
    generation: int | None = None  # its assign's generation (classic) or member epoch (KIP-848)


@dataclass
class _Span:
    """An assignment being read: what :class:`Ownership` keeps, and the last offset read."""

    began: int
    member: str
    last: int | None = None
    first: Read | None = None
    jumps: list[tuple[int, Read]] = field(default_factory=list)
    generation: int | None = None

    def owned(self, process: int, partition: int, ended: int, how: str) -> Ownership:
        return Ownership(process, partition, self.began, ended, how, self.member, self.first,
                         tuple(self.jumps), self.generation)


@dataclass
class Group:
    """One run's group: its commits and ownerships; what members received (per partition,
    the (offset, value) pairs any polled); each member's progress (per (process,
    partition), (poll end time, highest offset polled by then), as the highest grew); when
    each process first invoked a poll that returned a record (per (process, partition,
    offset)); the complete drains (partition -> offset -> value) and their log start
    offsets; each consumer process's first and last op time, and when its last poll ended;
    the retired ones (-> when their first ``info`` op ended), and those of them retired by
    their client's fatal error (:data:`FATAL`: fenced for good); those that left the group
    (-> when the ``stop-client`` that names them ended); those killed (-> when the
    ``crash-client`` that names them as a consumer's processes ended: a kill between two ops
    leaves no ``info`` op); the nemesis actions; and when the last nemesis op ended (0:
    none)."""

    partitions: int
    commits: list[Commit] = field(default_factory=list)
    owned: list[Ownership] = field(default_factory=list)
    received: dict[int, set[tuple[int, Value]]] = field(default_factory=dict)
    progress: dict[tuple[int, int], list[tuple[int, int]]] = field(default_factory=dict)
    got: dict[tuple[int, int, int], int] = field(default_factory=dict)
    drained: dict[int, dict[int, Value]] = field(default_factory=dict)
    log_start: dict[int, int] = field(default_factory=dict)
    first_op: dict[int, int] = field(default_factory=dict)
    last_op: dict[int, int] = field(default_factory=dict)
    last_poll: dict[int, int] = field(default_factory=dict)
    retired: dict[int, int] = field(default_factory=dict)
    fenced: set[int] = field(default_factory=set)
    left: dict[int, int] = field(default_factory=dict)
    killed: dict[int, int] = field(default_factory=dict)
    actions: list[NemesisAction] = field(default_factory=list)
    quiet_since: int = 0

    def polled_up_to(self, process: int, partition: int, time: int) -> int:
        """The highest offset of ``partition`` that ``process`` polled by ``time``; -1: none."""
        steps = self.progress.get((process, partition), [])
        i = bisect.bisect_right(steps, (time, 2**63))
        return steps[i - 1][1] if i else -1


def group(rows: Iterable[Mapping[str, Any]], topic: str, partitions: int) -> Group:
    """The :class:`Group` of a history's rows (pairing already checked by the reader)."""
    reader = GroupReader(topic, partitions)
    for d in rows:
        reader.add(d)
    return reader.done()


#: How a producer's ``send`` line names its ``f``, as the run's journal writes it.
_SEND = b'"f":"send"'


class GroupReader:
    """A :class:`Group` read from a history's rows one at a time (:meth:`add`), while
    another reader reads them (:meth:`tap`), pairing checked by that reader; ``send`` ops,
    the producers', are none of the group's."""

    def __init__(self, topic: str, partitions: int) -> None:
        self._topic, self._g = topic, Group(partitions)
        self._open_commits: dict[int, tuple[int, int]] = {}
        self._open_polls: dict[int, int] = {}
        self._nemesis: list[Op] = []
        self._holding: dict[tuple[int, int], _Span] = {}
        self._drained: dict[int, dict[int, Value]] = {}

    def tap(self, rows: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
        """``rows``, which give this reader each row as they are read: a history file's
        blocks of lines (:meth:`block`), other rows one by one."""
        if isinstance(rows, HistoryFile):
            return dataclasses.replace(rows, tap=self.block)
        return self._rows(rows)

    def _rows(self, rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for d in rows:
            self.add(d)
            yield d

    def block(self, block: bytes) -> None:
        """Read a block of whole history lines (:func:`~faultline.history.history_blocks`);
        a last line that is no JSON is a cut write, where the reader stops too."""
        for raw in block.split(b"\n"):
            if raw and _SEND not in raw:
                try:
                    self.add(orjson.loads(raw))
                except orjson.JSONDecodeError:
                    return

    def add(self, d: Mapping[str, Any]) -> None:
        """Read the history's next row."""
        g, topic, holding, open_polls = self._g, self._topic, self._holding, self._open_polls
        p, f, typ, t = d["process"], d["f"], d["type"], d["time"]
        v: Any = d.get("value")
        if p == NEMESIS:
            g.quiet_since = t
            if f == "stop-client" and "result" in v:
                for process in v.get("processes", ()):
                    g.left.setdefault(process, t)
            if f == "crash-client" and "result" in v and "consumers" in v:
                for process in v.get("processes", ()):
                    g.killed.setdefault(process, t)
            self._nemesis.append(Op.from_dict(dict(d)))
            return
        if f == "send":
            return
        g.first_op.setdefault(p, t)
        g.last_op[p] = t
        if typ == "info":
            g.retired.setdefault(p, t)
            if d.get("error") == FATAL:
                g.fenced.add(p)
        if f == "poll" and typ == "invoke":
            open_polls[p] = t
        elif f == "poll":
            g.last_poll[p] = t
        if f == "poll" and typ == "ok":
            for tp, part, off, value in v["records"]:
                if tp == topic:
                    g.received.setdefault(part, set()).add((off, value))
                    g.got.setdefault((p, part, off), open_polls.get(p, t))
                    steps = g.progress.setdefault((p, part), [])
                    if not steps or off > steps[-1][1]:
                        steps.append((t, off))
                    span = holding.get((p, part))
                    if span is not None:
                        read = Read(off, open_polls.get(p, t), t)
                        if span.last is None:
                            span.first = read
                        elif off != span.last + 1:
                            span.jumps.append((span.last, read))
                        span.last = off
        elif f == "commit" and typ == "invoke":
            self._open_commits[p] = (d["index"], t)
        elif f == "commit":
            index, invoked = self._open_commits.pop(p)
            g.commits += [Commit(p, index, invoked, t, typ, part, off)
                          for tp, part, off, _ in v["offsets"] if tp == topic]
        elif f in ("assign", "revoke", "lost") and typ == "ok":
            for tp, part in v["partitions"]:
                if tp != topic:
                    continue
                if f == "assign":
                    held = holding.get((p, part))
                    holding[(p, part)] = _Span(t, v["member"], None if held is None else held.last,
                                               generation=v.get("generation"))
                elif (p, part) in holding:
                    g.owned.append(holding.pop((p, part)).owned(p, part, t, f))
        elif f == "drain" and typ == "ok":
            records = self._drained.setdefault(v["partition"], {})
            records.update((off, value) for off, value in v["records"])
            if v.get("last"):
                g.drained[v["partition"]] = records
                g.log_start[v["partition"]] = v["log_start_offset"]

    def done(self) -> Group:
        """The :class:`Group` of the rows read; called once, after the last."""
        g = self._g
        g.owned += [span.owned(p, part, g.last_op[p], "end") for (p, part), span in self._holding.items()]
        g.actions = nemesis_actions(self._nemesis)
        return g
