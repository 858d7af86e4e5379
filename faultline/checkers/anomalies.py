"""What each anomaly is, in plain Python over one partition's sends, reads and drain.

The definitions the queue checker (:mod:`faultline.checkers.queue`) is held to by property
tests (``tests/unit/checkers/test_anomalies.py``): written to be read, not to be fast.
Each function says what is an instance of one anomaly; whether the run's config and
faults permit it is :mod:`faultline.checkers.guarantees`'s question. :func:`find` adds
the drain's edges: an instance about what the complete drain could not see is set aside
(:func:`undecided`), not counted. :func:`partitions` makes the input from a history.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, NamedTuple

from faultline.checkers.whitebox import agreed_end, replicas_by_partition
from faultline.spec import TestSpec

#: A record's value: a send's integer, or what another producer wrote (text, or null).
Value = int | str | None

#: What :func:`undecided` calls an instance the drain cannot decide (results.json's
#: ``unknown`` kinds).
AFTER_DRAIN = "after-drain"
SHORT_DRAIN = "short-drain"
BELOW_LOG_START = "below-log-start"
DRAIN_MISSED = "drain-missed"
DRAIN_MISSED_HELD = "drain-missed-held"


@dataclass(frozen=True)
class Send:
    """A send to the partition: its invoke (``index`` in the history, ``invoked`` its
    time), how it ended (``outcome`` "ok", "fail" or "info"; None while open) and when,
    and the offset its ack gave (None when it gave none)."""

    value: int
    process: int
    index: int
    invoked: int
    outcome: str | None = None
    ended: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class Read:
    """A record read from the partition, by a consumer's poll (``reader``: its process)
    or by the drain (``reader`` None); ``index`` and ``time`` are its op's."""

    index: int
    time: int
    reader: int | None
    offset: int
    value: Value


@dataclass(frozen=True)
class Drain:
    """The partition's complete drain: when it began (its first invoke: the high
    watermark it reads to is older) and ended (its op with ``last: true``), and the log
    start and high watermark that op gave."""

    began: int
    ended: int
    log_start: int
    high_watermark: int | None


@dataclass(frozen=True)
class Replicas:
    """What the replicas' logs say (``replicas.jsonl``): every replica holds the same
    batches below ``agreed`` (None: not known, a replica's line is missing), no replica
    holds a record at or past ``log_end`` (None: not known), and every replica's log
    starts at or below ``log_start``."""

    agreed: int | None
    log_end: int | None
    log_start: int

    def held(self, offset: int, high_watermark: int) -> bool:
        """Whether every replica holds the same batch at ``offset``, below ``high_watermark``."""
        return self.agreed is not None and self.log_start <= offset < min(self.agreed, high_watermark)


@dataclass(frozen=True)
class Partition:
    """One partition's history: its sends in invoke order, the records consumers polled
    and the drain read in history order, its complete drain (None: no drain op said
    ``last``) and its replicas' logs (None: the run has no ``replicas.jsonl``)."""

    sends: Sequence[Send] = ()
    polled: Sequence[Read] = ()
    drained: Sequence[Read] = ()
    drain: Drain | None = None
    replicas: Replicas | None = None

    def reads_of(self, send: Send) -> list[Read]:
        """The reads of ``send``: of its value, after its invoke (an earlier read is of
        another record, an unexpected value), polls and drain in history order."""
        return sorted((r for r in (*self.polled, *self.drained)
                       if r.value == send.value and r.index > send.index), key=lambda r: r.index)

    def stored(self, send: Send) -> list[int]:
        """The offsets the drain read ``send`` at, in the order it read them."""
        return [r.offset for r in self.drained if r.value == send.value and r.index > send.index]

    def values_at(self, offset: int) -> tuple[set[Value], set[Value], set[Value]]:
        """The values acknowledged, polled and drained at ``offset``."""
        return ({s.value for s in self.sends if s.outcome == "ok" and s.offset == offset},
                {r.value for r in self.polled if r.offset == offset},
                {r.value for r in self.drained if r.offset == offset})

    def first_drained(self, offset: int) -> Read | None:
        """The drain's first read at ``offset`` (None: it read nothing there)."""
        return next((r for r in self.drained if r.offset == offset), None)

    def skipped(self, offset: int) -> bool:
        """Whether the complete drain read nothing at ``offset`` below its high watermark
        and from its log start, where offsets are dense (no compaction, no transactions):
        it skipped a record there."""
        d = self.drain
        return (d is not None and d.high_watermark is not None
                and d.log_start <= offset < d.high_watermark and self._unread(offset))

    def held(self, offset: int) -> bool:
        """Whether the complete drain read nothing at ``offset`` where every replica holds
        the same batch below the drain's high watermark: there was a record to read."""
        d, r = self.drain, self.replicas
        return (d is not None and d.high_watermark is not None and r is not None
                and r.held(offset, d.high_watermark) and self._unread(offset))

    def short(self) -> bool:
        """Whether the complete drain stopped below the offset every replica agrees to."""
        d, r = self.drain, self.replicas
        return (d is not None and d.high_watermark is not None and r is not None
                and r.agreed is not None and r.agreed > d.high_watermark)

    def gaps(self) -> bool:
        """Whether the complete drain read fewer offsets than lie between its log start
        and its high watermark: it skipped some."""
        d = self.drain
        return (d is not None and d.high_watermark is not None
                and len({r.offset for r in self.drained}) < d.high_watermark - d.log_start)

    def late(self, t: int | None) -> bool:
        """Whether an op that ended at ``t`` (None: not known) may have ended once the
        drain had begun, past the high watermark it reads to."""
        return self.drain is not None and (t is None or t >= self.drain.began)

    def _unread(self, offset: int) -> bool:
        return all(r.offset != offset for r in self.drained)


# -- the anomalies --------------------------------------------------------------------


def lost_writes(p: Partition) -> list[Send]:
    """lost-write: an ``ok`` send the complete drain did not read. A send that ended
    ``info`` (or never ended) is never lost: whether it was written is unknown."""
    if p.drain is None:
        return []
    return [s for s in p.sends if s.outcome == "ok" and not p.stored(s)]


def phantom_reads(p: Partition) -> list[Read]:
    """phantom-read: a record a consumer polled, at or past the complete drain's log
    start, that the drain did not read at that offset (the drain holds every value it
    read at an offset, also one it read where it had read another). Once per offset and
    value: its first read."""
    if p.drain is None:
        return []
    drained = {(r.offset, r.value) for r in p.drained}
    first: dict[tuple[int, Value], Read] = {}
    for r in p.polled:
        if r.offset >= p.drain.log_start and (r.offset, r.value) not in drained:
            first.setdefault((r.offset, r.value), r)
    return list(first.values())


class Inconsistent(NamedTuple):
    """An offset associated with more than one value (``send`` None), or with the value
    of ``send`` by its ack where the drain read nothing while reading it elsewhere.
    ``involves_ack``: an ack's association is the wrong one; ``reads_disagree``: the
    reads (polls, drain) hold more than one value there (each is judged by its row)."""

    offset: int
    values: frozenset[Value]
    involves_ack: bool
    reads_disagree: bool
    send: Send | None = None


def inconsistent_offsets(p: Partition) -> list[Inconsistent]:
    """inconsistent-offsets: an offset that acks, polls and the drain (complete or not)
    associate with two values. An ack is involved when two acks disagree, or the drain
    first read another value there, or (the drain silent there) a read did."""
    found = []
    for off in sorted({s.offset for s in p.sends if s.outcome == "ok" and s.offset is not None}
                      | {r.offset for r in (*p.polled, *p.drained)}):
        acked, polled, drained = p.values_at(off)
        values = acked | polled | drained
        if len(values) < 2:
            continue
        first = p.first_drained(off)
        involves_ack = bool(acked) and (len(acked) > 1 or (
            acked != {first.value} if first else bool(values - acked)))
        found.append(Inconsistent(off, frozenset(values), involves_ack, len(polled | drained) > 1))
    return found


def acks_elsewhere(p: Partition) -> list[Inconsistent]:
    """inconsistent-offsets too: an ``ok`` send the drain read, but not at its ack's
    offset, where it read nothing (once an offset, with the offsets
    :func:`inconsistent_offsets` finds; :func:`find` counts them once)."""
    return [Inconsistent(s.offset, frozenset({s.value}), True, False, s) for s in p.sends
            if s.outcome == "ok" and s.offset is not None and p.stored(s) and p._unread(s.offset)]


class Duplicate(NamedTuple):
    send: Send
    offsets: list[int]


def duplicates(p: Partition) -> list[Duplicate]:
    """duplicate: a send the drain holds at more than one offset: where it first read
    it, and where it read it first. A value read where the drain had read another (the
    log changed under it) is no second copy."""
    found = []
    for s in p.sends:
        at = p.stored(s)
        copies = sorted({*at[:1], *(o for o in at if p.first_drained(o).value == s.value)})  # type: ignore[union-attr]
        if len(copies) > 1:
            found.append(Duplicate(s, copies))
    return found


class AbortedRead(NamedTuple):
    send: Send
    read: Read  # its first


def aborted_reads(p: Partition) -> list[AbortedRead]:
    """aborted-read: a send that ended ``fail`` (certainly not written) was read, by a
    poll or the drain, before or after it failed."""
    return [AbortedRead(s, p.reads_of(s)[0]) for s in p.sends
            if s.outcome == "fail" and p.reads_of(s)]


class UnexpectedValue(NamedTuple):
    read: Read  # the first
    reads: int


def unexpected_values(p: Partition) -> list[UnexpectedValue]:
    """unexpected-value: a value read (poll or drain) that no send to this partition
    carried before the read: never sent, sent elsewhere, read before its invoke, or a
    record no send can carry. Once per value."""
    invoked = {s.value: s.index for s in p.sends}
    found: dict[Value, list[Read]] = {}
    for r in sorted((*p.polled, *p.drained), key=lambda r: r.index):
        if not (r.value in invoked and invoked[r.value] < r.index):
            found.setdefault(r.value, []).append(r)
    return [UnexpectedValue(reads[0], len(reads)) for reads in found.values()]


class Reordered(NamedTuple):
    earlier: Send  # stored at ``earlier_at``, the highest so far
    earlier_at: int
    later: Send
    later_at: int


def nonmonotonic_sends(p: Partition) -> list[Reordered]:
    """nonmonotonic-send: an ``ok`` send stored (where the drain first read it) below an
    ``ok`` send its process invoked before it. A value the drain did not read is a
    lost write, not a reordering."""
    found = []
    highest: dict[int, tuple[int, Send]] = {}  # process -> (highest offset so far, its send)
    for s in p.sends:
        at = p.stored(s)
        if s.outcome != "ok" or not at:
            continue
        top = highest.get(s.process)
        if top is not None and at[0] < top[0]:
            found.append(Reordered(top[1], top[0], s, at[0]))
        elif top is None or at[0] > top[0]:
            highest[s.process] = (at[0], s)
    return found


def _consumers(p: Partition) -> dict[int, list[Read]]:
    """Each consumer's records of the partition, in the order it got them."""
    by: dict[int, list[Read]] = {}
    for r in p.polled:
        by.setdefault(r.reader, []).append(r)  # type: ignore[arg-type]
    return by


class BackwardPoll(NamedTuple):
    read: Read
    previous: int


def nonmonotonic_polls(p: Partition) -> list[BackwardPoll]:
    """nonmonotonic-poll: a consumer got an offset at or below the one it got before
    (a consumer is never reassigned: ``mode: assign``, and one whose poll ended
    ``info`` is replaced by a new process). Not judged for a group's members
    (``mode: subscribe``), whose positions follow the group's: :mod:`.groups`."""
    return [BackwardPoll(r, prev.offset) for reads in _consumers(p).values()
            for prev, r in pairwise(reads) if r.offset <= prev.offset]


class Skip(NamedTuple):
    read: Read
    previous: int | None  # None: its first record
    skipped: list[int]


def poll_skips(p: Partition) -> list[Skip]:
    """poll-skip: a consumer's record came after offsets the drain read records at that
    it did not get: past its previous record, or for its first, from the complete
    drain's log start (consumers read every partition from the beginning). Not judged
    for a group's members (``mode: subscribe``): :mod:`.groups`."""
    if p.drain is None:
        return []
    drained = {r.offset for r in p.drained}
    found = []
    for reads in _consumers(p).values():
        prev: int | None = None
        for r in reads:
            after = p.drain.log_start - 1 if prev is None else prev
            skipped = sorted(o for o in drained if after < o < r.offset)
            if skipped:
                found.append(Skip(r, prev, skipped))
            prev = r.offset
    return found


# -- what the drain cannot decide ----------------------------------------------------------


def undecided(p: Partition, ended: int | None, offset: int | None, read: bool = False) -> str | None:
    """Why the complete drain cannot decide an instance about an op that ended at
    ``ended`` (an ack; a consumer's read when ``read``) and a record at ``offset`` (None:
    an ack that gave none), or None. The op may have ended once the drain had begun
    (``after-drain``); or the offset lies below the log start (``below-log-start``:
    retention may have deleted the record), past a short drain's end (``short-drain``),
    or where the drain read nothing below its high watermark, where offsets are dense:
    where every replica holds the same batch (``drain-missed-held``), or anywhere
    (``drain-missed``)."""
    d = p.drain
    assert d is not None
    if p.late(ended):
        return AFTER_DRAIN
    if offset is None:  # the value may have been anywhere
        return (BELOW_LOG_START if d.log_start > 0 else SHORT_DRAIN if p.short()
                else DRAIN_MISSED if p.gaps() else None)
    if offset < d.log_start:
        return BELOW_LOG_START
    end = p.replicas.log_end if p.replicas else None
    if p.short() and offset >= d.high_watermark and not (  # type: ignore[operator]
            read and end is not None and offset >= end):  # a read no replica holds is gone
        return SHORT_DRAIN
    if p.held(offset):
        return DRAIN_MISSED_HELD
    if p.skipped(offset):
        return DRAIN_MISSED
    return None


def gone_below_log_start(p: Partition) -> list[Read]:
    """below-log-start too: a record a consumer read below the complete drain's log
    start that is gone: the drain did not read it there, and its value is no ``ok``
    send's nor one the drain read (a value no send carried is gone: another producer's
    records need not differ). Once per offset and value: its first read."""
    if p.drain is None:
        return []
    drained = {(r.offset, r.value) for r in p.drained}
    kept = {s.value for s in p.sends if s.outcome == "ok" or p.stored(s)}
    first: dict[tuple[int, Value], Read] = {}
    for r in p.polled:
        if r.offset < p.drain.log_start and (r.offset, r.value) not in drained and r.value not in kept:
            first.setdefault((r.offset, r.value), r)
    return list(first.values())


@dataclass
class Found:
    """What :func:`find` found on a partition: the instances counted, per anomaly; and
    those set aside, per :func:`undecided`'s kind, as (anomaly, instance)."""

    counted: dict[str, list[Any]] = field(default_factory=dict)
    undecided: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)


def find(p: Partition) -> Found:
    """Every anomaly on partition ``p``: counted, or set aside where it rests on what
    the complete drain cannot decide (:func:`undecided`)."""
    out = Found()

    def judge(anomaly: str, instances: Iterable[Any], why: Callable[[Any], str | None]) -> list[Any]:
        kept = []
        for x in instances:
            kind = why(x)
            if kind is None:
                kept.append(x)
            else:
                out.undecided.setdefault(kind, []).append((anomaly, x))
        return kept

    iso = inconsistent_offsets(p)
    counted = {x.offset for x in iso}  # an offset is inconsistent once
    for x in judge("inconsistent-offsets", acks_elsewhere(p) if p.drain else (),
                   lambda x: undecided(p, x.send.ended, x.offset)):
        if x.offset not in counted:
            counted.add(x.offset)
            iso.append(x)
    out.counted = {
        "lost-write": judge("lost-write", lost_writes(p), lambda s: undecided(p, s.ended, s.offset)),
        "phantom-read": judge("phantom-read", phantom_reads(p),
                              lambda r: undecided(p, r.time, r.offset, read=True)),
        "inconsistent-offsets": iso,
        "duplicate": duplicates(p),
        "aborted-read": aborted_reads(p),
        "unexpected-value": unexpected_values(p),
        "nonmonotonic-send": nonmonotonic_sends(p),
        "nonmonotonic-poll": nonmonotonic_polls(p),
        "poll-skip": judge("poll-skip", poll_skips(p),
                           lambda x: AFTER_DRAIN if p.late(x.read.time) else None),
    }
    for r in gone_below_log_start(p):
        out.undecided.setdefault(BELOW_LOG_START, []).append(("phantom-read", r))
    return out


def indeterminate(p: Partition) -> tuple[list[Send], list[Send]]:
    """The sends that ended ``info`` or never ended: those read (they happened), and
    the others (whether they were written is unknown)."""
    unsettled = [s for s in p.sends if s.outcome not in ("ok", "fail")]
    return [s for s in unsettled if p.reads_of(s)], [s for s in unsettled if not p.reads_of(s)]


# -- from a history ------------------------------------------------------------------------


def partitions(spec: TestSpec, rows: Iterable[Mapping[str, Any]],
               replicas: Sequence[Mapping[str, Any]] | None = None) -> list[Partition]:
    """The test topic's partitions, by number, from a history's rows (docs/history.md;
    one that breaks its rules gives no meaningful answer) and ``replicas.jsonl``'s lines."""
    n = spec.topic.partitions
    sends: dict[int, tuple[int, Send]] = {}  # value -> its partition, and the send
    polled: list[list[Read]] = [[] for _ in range(n)]
    drained: list[list[Read]] = [[] for _ in range(n)]
    began: dict[int, int] = {}
    drains: list[Drain | None] = [None] * n
    for d in rows:
        f, typ, v, i, t = d["f"], d["type"], d.get("value") or {}, d["index"], d["time"]
        if f == "send" and typ == "invoke":
            sends[v["value"]] = v["partition"], Send(v["value"], d["process"], i, t)
        elif f == "send":
            tp, s = sends[v["value"]]
            off = v.get("offset", -1) if typ == "ok" else -1
            sends[v["value"]] = tp, dataclasses.replace(
                s, outcome=typ, ended=t, offset=off if off >= 0 else None)
        elif f == "poll" and typ == "ok":
            for _, tp, off, value in v["records"]:
                polled[tp].append(Read(i, t, d["process"], off, value))
        elif f == "drain" and typ == "invoke":
            began.setdefault(v["partition"], t)
        elif f == "drain" and typ == "ok":
            tp = v["partition"]
            drained[tp] += [Read(i, t, None, off, value) for off, value in v["records"]]
            if v.get("last") is True:
                hw, lso = v.get("high_watermark"), v.get("log_start_offset")
                drains[tp] = Drain(began[tp], t, lso if isinstance(lso, int) else 0,
                                   hw if isinstance(hw, int) else None)
    reps = replicas_by_partition(replicas or (), spec.topic.name)
    return [Partition(tuple(s for at, s in sends.values() if at == tp), tuple(polled[tp]),
                      tuple(drained[tp]), drains[tp],
                      replicas_of(reps[tp], spec.topic.replication_factor) if tp in reps else None)
            for tp in range(n)]


def replicas_of(lines: Sequence[Mapping[str, Any]], replication_factor: int) -> Replicas:
    """What one partition's ``replicas.jsonl`` lines (by node) say; nothing agreed where
    fewer lines than ``replication_factor`` are given."""
    ends = [r.get("log_end_offset") for r in lines]
    return Replicas(agreed_end(lines) if len(lines) >= replication_factor else None,
                    max(ends) if all(isinstance(e, int) for e in ends) else None,  # type: ignore[type-var]
                    max(r["log_start_offset"] or 0 for r in lines))
