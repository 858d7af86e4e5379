"""The queue checker: what was acknowledged against what was read, per topic-partition.

A pure function of a test spec and a history (docs/history.md): :func:`check` takes ops,
:func:`check_rows` the parsed rows :func:`faultline.history.iter_rows` yields (the fast
path for files), and :func:`check_rows_table` gives besides the verdict the history's
sends as columns, from the same pass, for the report (:mod:`faultline.checkers.table`).
It streams the history once; memory grows with the number of distinct values and
offsets (columns of cells of 8 B and less, see :mod:`faultline.checkers.columns`; ~60 B
a value at peak), not with the number of lines; a history of more than 2**31 - 1
sends, or of more than 32,768 topic-partitions, is refused (HistoryError), as slots
live in int32 cells and partition ids in int16 ones. Its size is the hot
loop's (:meth:`Engine.feed`), which inlines the common ops on purpose; it is one
module so that one pass decides everything.
The decisions (:meth:`Engine.finish`) find with numpy, over the columns and the offset
maps, the few sends and offsets that need one, and visit only those, in order.

Anomalies (docs/design.md), with the choices made where the table leaves room:

- lost-write: an ``ok`` send whose value is not in its partition's completed drain.
  Sends that ended ``info`` (or never completed) are never lost: unknown until read.
  A value acknowledged below the drain's log start offset is unknown, not lost.
- phantom-read: a polled record (offset, value) the completed drain does not hold at
  that offset (records at or past the drain's HW were truncated away); the drain holds
  every value it read there, also one it read where it had read another. A read where
  the drain read nothing, below its HW, at an offset every replica holds the same
  batch at, is unknown (the drain skipped it), as a lost write there is.
- inconsistent-offsets: one offset associated with two values across acks, polls and
  the drain (complete or not: every drained record is real), counted once per
  offset; also an ack whose offset the completed drain leaves empty while holding
  the value elsewhere (where it read: not below its log start, nor at or past a short
  drain's end, set aside), once an offset like the rest. Two docs/design.md rows judge
  it, and each that applies must permit it: the ack's (``involves_ack``) when an
  ack's association is the wrong one (two acks disagree, or the drain holds another
  value there, or with the drain silent a read disagrees with the ack); the reads'
  (``reads_disagree``) when the reads (polls, the drain) hold more than one value
  there. An ack the drain agrees with leaves only reads disagreeing; a wrong ack does
  not excuse reads that also disagree among themselves.
- duplicate: one value at more than one offset in the drain.
- aborted-read: a value read (poll or drain) whose send ended ``fail``.
- unexpected-value: a value read from a partition that no send to that partition
  carried before the read (never sent, sent elsewhere, or read before its invoke),
  counted once per partition and value. A value no send can carry (a record's text
  or null, as the workload journals another producer's record) is one too; it takes
  part in the offsets' rules like any other (a poll-skip over it, a phantom read of
  it, an ack at its offset), as a code in the maps (:meth:`Engine.shown`).
- nonmonotonic-send: two ok sends of one process to one partition, the one invoked
  first stored higher, by drain offsets (where the value is stored, whatever the
  ack said; a value missing from the drain is a lost write, not a reordering, and
  an ack offset the drain disagrees with is an inconsistent-offsets).
- nonmonotonic-poll: a consumer process got an offset at or below its previous one
  for that partition (a process is never reassigned: ``mode: assign``, and a
  consumer whose poll ended ``info`` is replaced by a new process).
- poll-skip: a consumer's successive records for a partition jumped over offsets
  that hold records in the completed drain; its first record of a partition, over
  offsets from the drain's log start (consumers assign every partition from the
  beginning: ``OFFSET_BEGINNING``, ``auto.offset.reset=earliest``).

Malformed values (a send without a 64-bit integer ``value``, a poll record that is
not ``[topic, partition, offset, value]``, ...) and ops naming a topic-partition the
test's topic does not have raise HistoryError naming the line (``index + 1``). Any
other exception inside the checker is a bug, which
:func:`faultline.checkers.stored.check_stored` turns into ``valid: "unknown"``,
never a pass.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from faultline.checkers import columns, examples, explain, provenance
from faultline.checkers.client_log import ClientLines
from faultline.checkers.columns import (
    EMPTY,
    NARROW_MAX,
    NONE,
    RUN_BITS,
    RUN_MASK,
    WIDE,
    Narrow,
    OffsetMap,
    Part,
    Rising,
    disagreements,
    nones,
)
from faultline.checkers.faults_seen import Timeline
from faultline.checkers.guarantees import GuaranteeConfig
from faultline.checkers.measures import FAIL, INFO, OK, Measures
from faultline.checkers.result import Result
from faultline.checkers.table import HistoryTable, SendTable
from faultline.checkers.verdict import Collected, build_result
from faultline.checkers.whitebox import agreed_end, replicas_by_partition
from faultline.errors import HistoryError
from faultline.history import NEMESIS, VALUE_MAX, VALUE_MIN, Op, ReadResult
from faultline.spec import TestSpec

OPEN = 0
#: The columns grow by this many slots at least (and by an eighth of what they hold).
GROW = 1 << 16
#: The highest topic-partition id (ids live in int16 cells).
MAX_PARTS = (1 << 15) - 1
_STATUS = {"ok": OK, "fail": FAIL, "info": INFO}
_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError)


class BrokerState(NamedTuple):
    """What the run's broker state and client log give the checker (:func:`check_rows`
    says how it uses each); empty by default, for a history alone."""

    timeline: Timeline | None = None
    replicas: Sequence[dict[str, Any]] | None = None
    client_log: Iterable[dict[str, Any]] = ()


def check(spec: TestSpec, ops: Iterable[Op], *, truncated: bool = False,
          unavailable_after_ns: int | None = None, timeline: Timeline | None = None,
          replicas: Sequence[dict[str, Any]] | None = None,
          client_log: Iterable[dict[str, Any]] = ()) -> Result:
    """Check a history given as ops; see :func:`check_rows`."""
    return check_rows(spec, (op.to_dict() for op in ops), truncated=truncated,
                      unavailable_after_ns=unavailable_after_ns, timeline=timeline,
                      replicas=replicas, client_log=client_log)


def check_rows(spec: TestSpec, rows: Iterable[dict[str, Any]], *,
               truncated: bool | ReadResult = False, source: str = "history",
               unavailable_after_ns: int | None = None, timeline: Timeline | None = None,
               replicas: Sequence[dict[str, Any]] | None = None,
               client_log: Iterable[dict[str, Any]] = ()) -> Result:
    """Check a history given as parsed rows (dicts with docs/history.md's fields).

    ``truncated`` says the history was cut short (its verdict is then at most
    unknown); given the :class:`~faultline.history.ReadResult` the rows' reader fills,
    its ``truncated`` is read once the rows are exhausted, when the reader knows.
    ``source`` names the history in errors. The broker's own state, when the run has it:
    ``timeline``, the partitions' states from the KRaft metadata log, says which faults
    hit which partition's leader, which partitions elected a new one, and when a node
    whose data a fault destroyed held every committed record again
    (:func:`faults_seen.faults_by_partition`); ``replicas``, ``replicas.jsonl``'s lines,
    says how far every replica's log agrees. A complete drain that stopped below that
    end stopped short: what it did not read cannot be lost, so lost writes and phantom
    reads at or past its end are set aside as unknown (``short-drain``), never counted;
    but a read at or past every replica's log end is a phantom read all the same (no
    replica holds a record there).
    The replicas' batches also say who wrote each copy of a duplicate and each of two
    reordered sends (:mod:`faultline.checkers.provenance`), and ``client_log``,
    ``client-log.jsonl``'s lines, what the producer logged meanwhile; neither changes
    what is counted, only who is named (``causes``, ``violations_by``) and the stories.
    Raises HistoryError for a malformed op; any other exception is a checker bug, which
    :func:`faultline.checkers.stored.check_stored` turns into an ``unknown`` verdict.
    """
    state = BrokerState(timeline, replicas, client_log)
    return check_rows_table(spec, rows, truncated=truncated, source=source,
                            unavailable_after_ns=unavailable_after_ns, broker=lambda: state,
                            table=False)[0]


def check_rows_table(spec: TestSpec, rows: Iterable[dict[str, Any]], *,
                     truncated: bool | ReadResult = False, source: str = "history",
                     unavailable_after_ns: int | None = None,
                     broker: Callable[[], BrokerState] = BrokerState,
                     table: bool = True) -> tuple[Result, HistoryTable | None]:
    """:func:`check_rows`, and from the same pass the history's sends as columns
    (:class:`~faultline.checkers.table.HistoryTable`, what a report needs; None unless
    ``table``).

    ``broker`` gives the broker state once the rows are exhausted, not before: a
    history followed while its run goes on (``faultline run``'s check) has its
    broker state only when it is closed. By default there is none.
    """
    engine = Engine(spec, source)
    engine.feed(rows)
    cut = truncated if isinstance(truncated, bool) else truncated.truncated
    return engine.finish(cut, unavailable_after_ns, broker()), engine.table(cut) if table else None


class Engine:
    """One pass over the rows (:meth:`feed`), then :meth:`finish` decides. Internal."""

    def __init__(self, spec: TestSpec, source: str) -> None:
        self.spec = spec
        self.source = source
        # the broker state, given to finish
        self.timeline: Timeline | None = None
        self.replicas: Sequence[dict[str, Any]] | None = None
        self.client_lines = ClientLines(())
        self._batches: dict[int, provenance.Batches] = {}  # tp -> its replicas' batches, when asked
        if spec.topic.partitions > MAX_PARTS + 1:  # ids live in int16 cells
            raise HistoryError(source, None, f"more than {MAX_PARTS + 1} topic-partitions")
        # the test topic's partitions, the only ones its workload sends to and reads
        self.tp_ids: dict[tuple[str, int], int] = {
            (spec.topic.name, p): p for p in range(spec.topic.partitions)}
        self.parts = [Part(spec.topic.name, p) for p in range(spec.topic.partitions)]
        # Per-value columns, indexed by slot (slots in invoke order): completion times in
        # int64 cells, invoke times as int32 differences (:class:`Rising`), offsets and
        # processes in int32 cells (:class:`Narrow`), partition ids in int16 ones. While
        # feeding they hold room past the last slot (empty cells, OPEN), so that an invoke
        # stores four cells instead of appending eight; :meth:`feed` cuts them to
        # ``slots`` at its end.
        self.slots = 0
        # value -> slot: an array indexed by value, as the workload's values are 0, 1, 2, ...
        # (4 B a value, where a dict costs ~100); any other value goes to its dict. Its
        # inverse, slot -> value, is made from it when asked (:attr:`c_val`).
        self.vslot = OffsetMap()
        self._c_val: array[int] | None = None
        self.c_tp: array[int] = array("h")  # a partition id: an index into ``parts``
        self.c_proc = Narrow()
        self.c_inv = Rising()  # invoke times never decrease in slot order
        self.c_done: array[int] = array("q")
        self.c_status: array[int] = array("b")
        self.c_ack = Narrow()
        self.c_drain = Narrow()  # first drain offset
        # The first read (poll or drain) of each send: the number of the op that read it
        # (EMPTY if none), in the op's time and reader (a consumer process, or -1 for the
        # drain), kept once per op that read a send first (a poll reads hundreds). There
        # are never more such ops than sends, so the numbers fit the cells.
        self.c_read = Narrow()
        self.read_t: array[int] = array("q")
        self.read_by = Narrow()
        # slot -> the first read's offset, where the ack (a poll's) or the first drain
        # offset (the drain's) does not say it: few, so no column (:meth:`read_off`)
        self.read_offs: dict[int, int] = {}
        # the errors of fail / info sends: slot and error (an index into error_names)
        self.err_slots: array[int] = array("i")
        self.err_codes: array[int] = array("i")
        self.error_names: dict[str, int] = {}
        self._errors_by_slot: tuple[Any, Any] | None = None
        self.consumers: dict[int, dict[int, int]] = {}  # process -> part -> last offset
        # part, process, prev (None: the process's first record there), off, time
        self.gaps: list[tuple[int, int, int | None, int, int]] = []
        self.backwards: list[tuple[int, int, int, int, int]] = []  # same, nonmonotonic-poll
        # (part, offset) -> {value: [(source, time, process)]}, for same-source conflicts
        self.conflicts: dict[tuple[int, int], dict[int, list[tuple[str, Any, Any]]]] = {}
        self.odd_reads: dict[tuple[int, int], list[int]] = {}  # (part, value) -> off, t, by, n
        # A value read that no send can carry (a foreign record's text or null, a number
        # out of VALUE_MIN..VALUE_MAX) stands in the maps as a code: NONE + 1 + its number
        # here (:meth:`shown`); and where the drain held each, (part, code) -> offsets.
        self.foreign: dict[Any, int] = {}
        self.foreign_values: list[Any] = []
        self.foreign_at: dict[tuple[int, int], list[int]] = {}
        self.dups: dict[int, set[int]] = {}  # slot -> further drain offsets
        self.nemesis: list[Op] = []
        self.measures = Measures()
        self.ops = 0
        self.other = 0  # client ops with an f the checker does not read
        self.polls = [0, 0, 0]  # ok, fail, info completions
        self.drains = [0, 0, 0]
        self.other_errors: list[tuple[int, str, str]] = []  # (time, f, kind), not sends
        self.end_time = 0  # the last op's time

    def part_id(self, topic: Any, partition: Any, d: dict[str, Any]) -> int:
        """The id of a topic-partition of the test's topic, which op ``d`` names.

        The workload sends to and reads (polls, drain) only the test topic's partitions
        (``test.json``'s ``topic``), so any other is a history inconsistent with its test:
        a HistoryError naming the line, not data to judge.
        """
        if not isinstance(topic, str) or partition.__class__ is not int:
            raise TypeError(f"not a topic-partition: {topic!r}, {partition!r}")
        i = self.tp_ids.get((topic, partition))
        if i is None:
            t = self.spec.topic
            raise HistoryError(self.source, _line(d), f"{d.get('f')} names {topic}/{partition}, "
                               f"not a partition of the test's topic {t.name}, which has "
                               f"partitions 0 to {t.partitions - 1} (test.json)")
        return i

    def feed(self, rows: Iterable[dict[str, Any]]) -> None:
        """Consume the rows in order.

        This is the hot loop (millions of rows): sends and polls are handled inline
        with local aliases, because a method call and attribute loads per row cost
        as much as the work itself. Rare ops go through methods.
        """
        d: dict[str, Any] = {}
        vslot, parts, tp_ids = self.vslot, self.parts, self.tp_ids
        slots, vput, vget = vslot.arr, vslot.put, vslot.get  # arr grows in place
        c_tp, c_done, c_status = self.c_tp, self.c_done, self.c_status
        c_inv, invs, inv_bases = self.c_inv, self.c_inv.arr, self.c_inv.bases
        c_proc, procs, c_ack, acked = self.c_proc, self.c_proc.arr, self.c_ack, self.c_ack.arr
        reads, read_t, read_by, readers = self.c_read.arr, self.read_t, self.read_by, self.read_by.arr
        read_offs = self.read_offs
        err_slots, err_codes, error_names = self.err_slots, self.err_codes, self.error_names
        consumers, measures = self.consumers, self.measures
        completed = measures.completed
        gaps, backwards = self.gaps, self.backwards
        part_id, foreign = self.part_id, self._foreign
        vmin, vmax = VALUE_MIN, VALUE_MAX
        ops = 0
        n, room = self.slots, len(c_done)
        self._c_val = None
        try:
            for d in rows:
                ops += 1
                f = d["f"]
                typ = d["type"]
                if f == "send":
                    v = d["value"]
                    val = v["value"]
                    if typ == "invoke":
                        tp = tp_ids.get((v["topic"], v["partition"]))
                        if tp is None:
                            tp = part_id(v["topic"], v["partition"], d)
                        if val.__class__ is not int or not vmin <= val <= vmax:
                            self._bad_value(d, val)
                        if 0 <= val < len(slots) and slots[val] == EMPTY:  # vput, inline
                            slots[val] = n
                        elif vput(val, n) != NONE:
                            self._bad_value(d, val)
                        if n == room:
                            room = self._grow()
                        c_tp[n] = tp
                        p = d["process"]
                        if WIDE < p <= NARROW_MAX:  # c_proc[n] = p, inline
                            procs[n] = p
                        else:
                            c_proc[n] = p
                        t = d["time"]  # c_inv.put(n, t), inline:
                        if n & RUN_MASK:
                            dt = t - inv_bases[n >> RUN_BITS]
                        else:
                            inv_bases.append(t)
                            dt = 0
                        if WIDE < dt <= NARROW_MAX:
                            invs[n] = dt
                        else:
                            c_inv.put(n, t)
                        n += 1
                        if measures.first_send is None:
                            measures.first_send = t
                        continue
                    s = (slots[val] if val.__class__ is int and 0 <= val < len(slots)
                         else vget(val) if val.__class__ is int else NONE)
                    p = d["process"]
                    if s < 0 or c_status[s] != OPEN or (procs[s] != p and c_proc[s] != p):
                        raise HistoryError(self.source, _line(d), f"send {typ} of value {val!r} "
                                           f"by process {p} has no open invoke")
                    status = _STATUS[typ]
                    t = d["time"]
                    tp = c_tp[s]
                    c_status[s] = status
                    c_done[s] = t
                    if status == OK:
                        off = v.get("offset", -1)
                        if off.__class__ is not int:
                            raise TypeError("offset")
                        if off >= 0:
                            if off <= NARROW_MAX:  # c_ack[s] = off, inline
                                acked[s] = off
                            else:
                                c_ack[s] = off
                            if read_offs and read_offs.get(s) == off and readers[reads[s]] != -1:
                                del read_offs[s]  # polled before its ack, where it says
                            part = parts[tp]
                            held = part.acks.arr
                            if (off < len(held) and held[off] == EMPTY
                                    and WIDE < val <= NARROW_MAX):  # OffsetMap.put, inline
                                held[off] = val
                            else:
                                cur = part.acks.put(off, val)
                                if cur != NONE and cur != val:
                                    self._conflict(tp, off, cur, val, ("ack", t, p))
                    elif d.get("error"):
                        e = d["error"]
                        if e.__class__ is not str:
                            raise TypeError("error")
                        err_slots.append(s)
                        code = error_names.get(e)
                        if code is None:
                            code = error_names[e] = len(error_names)
                        err_codes.append(code)
                    dt = invs[s]  # c_inv[s], inline
                    dt = dt if dt != WIDE else c_inv.extra[s]
                    completed(tp, status, inv_bases[s >> RUN_BITS] + dt, t)
                elif f == "poll":
                    if typ == "invoke":
                        continue
                    self.polls[_STATUS[typ] - 1] += 1
                    if typ != "ok":
                        self._client_error(d)
                        continue
                    p = d["process"]
                    t = d["time"]
                    k = -1  # this poll's read op number, once it reads a send first
                    last_of = consumers.get(p)
                    if last_of is None:
                        last_of = consumers[p] = {}
                    key: tuple[Any, Any] = ("", -1)
                    tp = -1
                    arr = slots  # rebound per partition below; any int32 array will do
                    part = None
                    # per run of one partition's records: its last offset and count, kept
                    # in locals and stored when the run ends
                    last: int | None = None
                    run = 0
                    for topic, partition, off, val in d["value"]["records"]:
                        if topic != key[0] or partition != key[1]:  # records come in runs
                            if part is not None:
                                last_of[tp] = last  # type: ignore[assignment]
                                part.polled += run
                            key = (topic, partition)
                            tp = tp_ids.get(key, -1)
                            if tp < 0:
                                tp = part_id(topic, partition, d)
                            part = parts[tp]
                            arr = part.polls.arr
                            last = last_of.get(tp)
                            run = 0
                        if off.__class__ is not int or val.__class__ is not int or not vmin <= val <= vmax:
                            val = foreign(off, val)
                        if last is None:  # its first: from the log start (assign mode)
                            gaps.append((tp, p, None, off, t))
                        elif off != last + 1:
                            (backwards if off <= last else gaps).append((tp, p, last, off, t))
                        last = off
                        run += 1
                        cur = arr[off] if 0 <= off < len(arr) else WIDE
                        if cur == EMPTY and WIDE < val <= NARROW_MAX:  # OffsetMap.put, inline
                            arr[off] = val
                        elif cur <= WIDE:  # the map's dict may hold it
                            cur = part.polls.put(off, val)  # type: ignore[union-attr]
                            arr = part.polls.arr  # type: ignore[union-attr]
                            if cur != NONE and cur != val:
                                self._conflict(tp, off, cur, val, ("poll", t, p))
                        elif cur != val:
                            self._conflict(tp, off, cur, val, ("poll", t, p))
                        s = slots[val] if 0 <= val < len(slots) else vget(val)
                        if s < 0 or c_tp[s] != tp:
                            self._odd_read(tp, val, off, t, p)
                        elif reads[s] == EMPTY:
                            if k < 0:
                                k = len(read_t)
                                read_t.append(t)
                                read_by.append(p)
                            reads[s] = k
                            at = acked[s]  # the ack's offset, if it came and fits
                            if (off != at and (at != WIDE or c_ack[s] != off)) or p == -1:
                                read_offs[s] = off
                    if part is not None:
                        last_of[tp] = last  # type: ignore[assignment]
                        part.polled += run
                elif f == "drain":
                    if typ != "invoke":
                        self.drains[_STATUS[typ] - 1] += 1
                    if typ == "ok":
                        self._drain(d)
                    elif typ != "invoke":
                        self._client_error(d)
                elif d["process"] == NEMESIS:
                    self.nemesis.append(Op(d["index"], d["time"], "nemesis", typ, f,
                                           d.get("value"), d.get("error")))
                else:
                    self.other += 1
                    if typ == "fail" or typ == "info":
                        self._client_error(d)
            if ops:
                self.end_time = d["time"]
        except _MALFORMED as e:
            problem = value_problem(d)
            if problem is None:
                raise  # a checker bug, not the history's fault
            raise HistoryError(self.source, _line(d), problem) from e
        finally:
            self.ops += ops
            self.slots = n
            for col in self._columns():
                del col[n:]
            self._count_sends()

    def _columns(self) -> tuple[array[int], ...]:
        return (self.c_tp, self.c_proc.arr, self.c_inv.arr, self.c_done, self.c_status,
                self.c_ack.arr, self.c_drain.arr, self.c_read.arr)

    @property
    def c_val(self) -> array[int]:
        """slot -> value, once the feed is done: the value index (:attr:`vslot`) inverted,
        made on first use, a block of it at a time. The feed keeps no column of values
        (8 B a send less while it runs)."""
        if self._c_val is None:
            self._c_val = col = nones(self.slots)
            out, index, block = _view(col), _view(self.vslot.arr, np.int32), columns.BLOCK
            for lo in range(0, len(index), block):
                slots = index[lo:lo + block]
                held = np.flatnonzero(slots >= 0)
                out[slots[held]] = lo + held
            for value, s in self.vslot.extra.items():
                col[s] = value
        return self._c_val

    def _count_sends(self) -> None:
        """Set each partition's :attr:`Part.sends` from the columns (counted once here, not
        per row in the hot loop)."""
        width = len(self.parts) * 4
        counts = np.zeros(width, np.int64)
        tps, status, block = _view(self.c_tp, np.int16), _view(self.c_status, np.int8), columns.BLOCK
        for lo in range(0, self.slots, block):  # a block at a time: memory stays a block's
            counts += np.bincount(tps[lo:lo + block].astype(np.int64) * 4 + status[lo:lo + block],
                                  minlength=width)
        for tp, part in enumerate(self.parts):
            part.sends = counts[tp * 4:tp * 4 + 4].tolist()

    def _grow(self) -> int:
        """Room for more slots in every column, empty (:data:`NONE`, OPEN); returns how many
        slots the columns hold now."""
        more = max(GROW, len(self.c_done) // 8)
        if len(self.c_done) + more > NARROW_MAX:  # a slot must fit the value index's int32 cells
            raise HistoryError(self.source, None, f"more than {NARROW_MAX} sends")
        for col in (self.c_tp, self.c_status):
            col.frombytes(bytes(more * col.itemsize))  # OPEN is 0; a part is always set
        self.c_done.extend(nones(more))
        for narrow in (self.c_inv, self.c_proc, self.c_ack, self.c_drain, self.c_read):
            narrow.grow(more)
        return len(self.c_done)

    def _client_error(self, d: dict[str, Any]) -> None:
        """A client op other than a send that did not end ok, for the report's errors."""
        self.other_errors.append((d["time"], d["f"], d.get("error") or f"{d['type']} (no error)"))

    def table(self, truncated: bool) -> HistoryTable:
        """The sends and what else a report needs, as columns (:mod:`.table`): the engine's
        last use, after :meth:`finish`. It first lets go of what only the decisions read
        (the offset maps, the drain and read columns), then of each column the table
        takes a copy of once the copy is made, so that the table, made of int64 columns,
        never holds more than the feed did."""
        for part in self.parts:
            part.acks, part.polls, part.drains = OffsetMap(), OffsetMap(), OffsetMap()
        self.c_read, self.read_t, self.read_by, self.c_drain = Narrow(), array("q"), Narrow(), Narrow()
        values = _view(self.c_val)
        self.vslot = OffsetMap()
        tps = _view(self.c_tp, np.int16).astype(np.int32)
        self.c_tp = array("h")
        procs = self.c_proc.view(0, self.slots)
        self.c_proc = Narrow()
        acks = self.c_ack.view(0, self.slots)
        self.c_ack = Narrow()
        invoked = self.c_inv.view(0, self.slots)
        self.c_inv = Rising()
        codes = np.full(self.slots, -1, dtype=np.int32)
        codes[_view(self.err_slots, np.int32)] = _view(self.err_codes, np.int32)
        sends = SendTable([(p.topic, p.partition) for p in self.parts], values, tps, procs,
                          invoked, _view(self.c_done), _view(self.c_status, np.int8),
                          acks, codes, list(self.error_names))
        m = self.measures  # finish made last_send the last invoke's time, if later
        return HistoryTable(sends, self.other_errors, self.ops, self.end_time, m.first_send,
                            m.last_send, truncated)

    def _bad_value(self, d: dict[str, Any], val: Any) -> None:
        hash(val)  # an unhashable value is malformed: TypeError, which value_problem explains
        what = ("was already sent" if val.__class__ is int and VALUE_MIN <= val <= VALUE_MAX
                and self.vslot.get(val) != NONE else "is not a usable integer")
        raise HistoryError(self.source, _line(d), f"send value {val!r} {what}: values must be "
                           "unique 64-bit integers, from -2**63 + 2**32 (docs/history.md)")

    def _foreign(self, off: Any, val: Any) -> int:
        """The code standing for a value read (at offset ``off``) that no send can carry:
        text or null (a foreign producer's record, as the workload journals it), or an
        integer outside VALUE_MIN..VALUE_MAX; one code a value. Anything else, or an
        offset that is not an integer, is a malformed record (TypeError)."""
        if off.__class__ is not int or (val is not None and val.__class__ is not str
                                        and val.__class__ is not int):
            raise TypeError("record")
        code = self.foreign.get(val)
        if code is None:
            code = self.foreign[val] = NONE + 1 + len(self.foreign_values)
            self.foreign_values.append(val)
        return code

    def shown(self, value: int) -> explain.Value:
        """A value of the maps and columns as the history holds it: the value read that a
        foreign code stands for (:meth:`_foreign`), else the integer itself."""
        if NONE < value < VALUE_MIN:
            return explain.Foreign(self.foreign_values[value - NONE - 1])
        return value

    def _drain(self, d: dict[str, Any]) -> None:
        v = d["value"]
        t = d["time"]
        tp = self.part_id(v["topic"], v["partition"], d)
        part = self.parts[tp]
        vslot, c_tp, c_drain = self.vslot, self.c_tp, self.c_drain
        reads, firsts = self.c_read.arr, c_drain.arr
        k = -1  # this drain's read op number, once it reads a send first
        slots, held = vslot.arr, part.drains.arr
        n_slots, n_held = len(slots), len(held)
        vmin, vmax = VALUE_MIN, VALUE_MAX
        drained = 0
        for off, val in v["records"]:
            if off.__class__ is not int or val.__class__ is not int or not vmin <= val <= vmax:
                val = self._foreign(off, val)
                self.foreign_at.setdefault((tp, val), []).append(off)
            cur = held[off] if 0 <= off < n_held else WIDE
            if cur == EMPTY and WIDE < val <= NARROW_MAX:  # OffsetMap.put, inline
                held[off] = val
                cur = NONE
            elif cur <= WIDE:  # the map's dict may hold it
                cur = part.drains.put(off, val)
                held = part.drains.arr
                n_held = len(held)
            # a value read where the drain had read another (the log changed under it) was
            # read all the same (it is no lost write), but it is no second copy either
            # (no one version of the log held it twice)
            conflicted = cur != NONE and cur != val
            if cur == NONE:
                drained += 1
            elif conflicted:
                self._conflict(tp, off, cur, val, ("drain", t, None))
            s = slots[val] if 0 <= val < n_slots else vslot.get(val)
            if s < 0 or c_tp[s] != tp:
                self._odd_read(tp, val, off, t, -1)
                continue
            if reads[s] == EMPTY:  # then c_drain[s] is empty too: it becomes off
                if k < 0:
                    k = len(self.read_t)
                    self.read_t.append(t)
                    self.read_by.append(-1)
                reads[s] = k
            first = firsts[s]
            if first == EMPTY:
                if WIDE < off <= NARROW_MAX:  # c_drain[s] = off, inline
                    firsts[s] = off
                else:
                    c_drain[s] = off
            elif first != off and not conflicted and (first != WIDE or c_drain[s] != off):
                self.dups.setdefault(s, set()).add(off)
        part.drained += drained
        if v.get("last") is True:
            part.complete = True
            part.drain_time = t
            hw, lso = v.get("high_watermark"), v.get("log_start_offset")
            part.hw = hw if hw.__class__ is int else None
            part.lso = lso if lso.__class__ is int else None

    def _conflict(self, tp: int, off: int, old: int, new: int,
                  seen: tuple[str, Any, Any]) -> None:
        """Two values at one offset from one source (two acks, two polls, two drains)."""
        entry = self.conflicts.setdefault((tp, off), {})
        entry.setdefault(old, [])
        entry.setdefault(new, []).append(seen)

    def _odd_read(self, tp: int, val: int, off: int, t: int, by: int) -> None:
        """A read of a value no send to this partition had carried (so far)."""
        seen = self.odd_reads.get((tp, val))
        if seen is None:
            self.odd_reads[(tp, val)] = [off, t, by, 1]
        else:
            seen[3] += 1

    def finish(self, truncated: bool, unavailable_after_ns: int | None,
               broker: BrokerState) -> Result:
        """Decide, once every row has been fed, with the run's broker state."""
        self.timeline, self.replicas = broker.timeline, broker.replicas
        self.client_lines = ClientLines(broker.client_log)
        if unavailable_after_ns is not None:
            self.measures.unavailable_after_ns = unavailable_after_ns
        if self.slots:  # invoke times never decrease: the last is the latest
            self.measures.last_send = max(self.measures.last_send, self.c_inv[self.slots - 1])
        collected = Collected(self.spec, GuaranteeConfig.from_spec(self.spec), truncated)
        collected.set_faults(self.nemesis, self.measures, self.parts, set(self.c_tp),
                             self.timeline)
        self._cross_check()
        self._values(collected)
        self._offsets(collected)
        self._consumers(collected)
        return build_result(collected, self)

    def _cross_check(self) -> None:
        """Give each partition its replicas' lines (``replicas.jsonl``) and the offset up to
        which they all hold the same batches (:attr:`Part.agreed`), against which a
        complete drain may turn out short (:attr:`Part.short`)."""
        if self.replicas is None:
            return
        for topic in {p.topic for p in self.parts}:
            for partition, reps in replicas_by_partition(self.replicas, topic).items():
                tp = self.tp_ids.get((topic, partition))
                if tp is None:
                    continue
                part = self.parts[tp]
                part.replicas = reps
                if len(reps) < self.spec.topic.replication_factor:
                    continue  # a replica's log is missing: nothing is agreed
                part.agreed = agreed_end(reps)

    def read_off(self, s: int) -> int:
        """The offset of the first read of the send in slot ``s`` (:data:`NONE` if none):
        kept in :attr:`read_offs` unless a poll's is the ack's offset, or the drain's its
        first drain offset."""
        k = self.c_read.arr[s]
        if k == EMPTY:
            return NONE
        off = self.read_offs.get(s)
        if off is not None:
            return off
        return self.c_drain[s] if self.read_by[k] == -1 else self.c_ack[s]

    def first_read(self, s: int) -> tuple[int, int]:
        """(time, reader) of the first read of the send in slot ``s``, which was read: the
        reader is a consumer process, or -1 for the drain."""
        k = self.c_read.arr[s]
        return self.read_t[k], self.read_by[k]

    def error(self, s: int) -> str | None:
        """The error of the fail / info send in slot ``s``, or None."""
        if self._errors_by_slot is None:
            slots = _view(self.err_slots, np.int32)
            order = np.argsort(slots, kind="stable")
            self._errors_by_slot = (slots[order], _view(self.err_codes, np.int32)[order])
        slots, codes = self._errors_by_slot
        i = int(np.searchsorted(slots, s))
        if i < len(slots) and slots[i] == s:
            return list(self.error_names)[int(codes[i])]
        return None

    def send_facts(self, s: int) -> explain.SendFacts:
        """What the history says about the send in slot ``s``."""
        part = self.parts[self.c_tp[s]]
        status = self.c_status[s]
        ack, done = self.c_ack[s], self.c_done[s]
        return explain.SendFacts(
            value=self.c_val[s], topic=part.topic, partition=part.partition,
            process=self.c_proc[s], invoke_time=self.c_inv[s],
            end_time=None if done == NONE else done,
            outcome=("open", "ok", "fail", "info")[status],
            offset=None if ack == NONE else ack, error=self.error(s))

    def _values(self, c: Collected) -> None:
        """Per-value decisions: lost, aborted, indeterminate, ack/drain disagreement,
        nonmonotonic-send, duplicate.

        The columns say at once (numpy) which few slots need a decision; only those are
        visited, in slot order, so anomalies are counted in the order the slots came.
        """
        parts = self.parts
        status, tps = _view(self.c_status, np.int8), _view(self.c_tp, np.int16)
        reads = _view(self.c_read.arr, np.int32)
        complete = np.array([p.complete for p in parts], dtype=bool)
        visit: list[int] = []
        stored_ok = np.zeros(self.slots, dtype=bool)  # ok and in the drain: maybe reordered
        for lo in range(0, self.slots, columns.BLOCK):  # memory: a block's, but for stored_ok
            hi = min(lo + columns.BLOCK, self.slots)
            drained = self.c_drain.view(lo, hi)
            st, held, read = status[lo:hi], drained != NONE, reads[lo:hi] != EMPTY
            ok, unsettled = st == OK, (st != OK) & (st != FAIL)
            c.indeterminate_read += int(np.count_nonzero(unsettled & read))
            c.indeterminate += int(np.count_nonzero(unsettled & ~read))
            acked = self.c_ack.view(lo, hi)
            odd = ok & complete[tps[lo:hi]] & (~held | ((acked != NONE) & (acked != drained)))
            odd |= (st == FAIL) & read
            visit += (lo + np.flatnonzero(odd)).tolist()
            stored_ok[lo:hi] = ok & held
        reorders = self._reorders(stored_ok)
        for s in sorted({*visit, *reorders}):
            tp, stored = self.c_tp[s], self.c_drain[s]
            if status[s] == OK and complete[tp]:
                part, ack_at = parts[tp], self.c_ack[s]
                if stored == NONE:
                    lso = part.lso or 0
                    if (ack_at != NONE and ack_at < lso) or (ack_at == NONE and lso > 0):
                        c.below_log_start += 1
                    elif part.short is not None and (ack_at == NONE or ack_at >= part.hw):  # type: ignore[operator]
                        c.set_aside("lost-write", tp)
                    elif part.missed(ack_at):
                        c.drain_missed += 1  # the drain skipped what every replica holds
                    else:
                        c.add("lost-write", tp, partial(examples.lost, self, c, s))
                        done = self.c_done[s]
                        if c.first_loss_ns is None or done < c.first_loss_ns:
                            c.first_loss_ns = done
                elif (ack_at != NONE and ack_at != stored and ack_at not in self.dups.get(s, ())
                      and part.drains.get(ack_at) == NONE):
                    # the drain says the ack's offset is empty only where it read: not below
                    # its log start (unknown, as a loss there), nor at or past a short
                    # drain's end (set aside)
                    if part.short is not None and ack_at >= part.hw:  # type: ignore[operator]
                        c.set_aside("inconsistent-offsets", tp)
                    elif part.missed(ack_at):
                        c.drain_missed += 1  # the drain skipped what every replica holds
                    elif ack_at >= (part.lso or 0):
                        c.iso_ack_offset.append(s)
            elif status[s] == FAIL and reads[s] != EMPTY:
                c.add("aborted-read", tp, partial(examples.aborted, self, c, s))
            prev = reorders.get(s)
            if prev is not None:  # where it is stored (a lost value is no reordering)
                copies = self.copies(tp, (prev[0], stored))
                cause = provenance.reorder_cause(*copies)
                c.add("nonmonotonic-send", tp,
                      partial(examples.reorder, self, c, prev, s, copies, cause), cause=cause)
        for s, offsets in sorted(self.dups.items()):
            tp = self.c_tp[s]
            at = sorted({self.c_drain[s], *offsets})
            copies = self.copies(tp, at)
            cause = provenance.duplicate_cause(copies)
            c.add("duplicate", tp, partial(examples.duplicate, self, c, s, at, copies, cause),
                  cause=cause)
        for (tp, val), (off, t, by, n) in sorted(self.odd_reads.items()):
            c.add("unexpected-value", tp,
                  partial(examples.unexpected, self, c, tp, val, off, t, by, n))

    def _reorders(self, held: Any) -> dict[int, tuple[int, int]]:
        """The ``held`` sends (a mask of slots) stored below an earlier one of the same
        process to the same partition, by drain offsets: slot -> (the highest offset an
        earlier one of theirs is stored at, the first slot stored there).

        Slots are taken a block at a time and sorted by (process, partition, slot); each
        group's running maximum is then one ``np.maximum.accumulate`` over all groups at
        once, on keys that rank the groups apart. Each group's highest so far is carried
        into the next block as its first row, while its process has held slots after that
        block: memory stays a block's and its processes', not the run's (every ``info``
        retires a process, so a long run has many).
        """
        tps = _view(self.c_tp, np.int16)
        out: dict[int, tuple[int, int]] = {}
        last_procs, last_slots = self._last_held(held)
        # the groups' highest so far: process, partition, offset, slot (slot -1 sorts first)
        carried = [np.zeros(0, np.int64)] * 4
        block = columns.BLOCK
        for lo in range(0, len(held), block):
            at = lo + np.flatnonzero(held[lo:lo + block])
            if not at.size:
                continue
            procs, drained = (col.view(lo, lo + block)[at - lo] for col in (self.c_proc, self.c_drain))
            p, t, d, slot = (np.concatenate((c, x)) for c, x in zip(
                carried, (procs, tps[at], drained, at), strict=True))
            first_row = np.concatenate((np.full(len(carried[0]), -1), at))
            order = np.lexsort((first_row, t, p))
            p, t, d, slot = p[order], t[order], d[order], slot[order]
            starts = np.ones(len(p), dtype=bool)
            starts[1:] = (p[1:] != p[:-1]) | (t[1:] != t[:-1])
            ranked, rank = np.unique(d, return_inverse=True)
            key = (np.cumsum(starts) - 1) * len(ranked) + rank.reshape(-1)
            top = np.maximum.accumulate(key)  # within each group: the groups are ranked apart
            rise = starts.copy()
            rise[1:] |= key[1:] > top[:-1]
            first = np.maximum.accumulate(np.where(rise, np.arange(len(key)), 0))
            below = np.flatnonzero(~starts[1:] & (key[1:] < top[:-1]))
            highest = ranked[top % len(ranked)]
            for k, was, there in zip((slot[below + 1]).tolist(), highest[below].tolist(),
                                     slot[first[below]].tolist(), strict=True):
                out[k] = (was, there)
            ends = np.append(np.flatnonzero(starts[1:]), len(p) - 1)
            ends = ends[last_slots[np.searchsorted(last_procs, p[ends])] >= lo + block]
            carried = [p[ends], t[ends], highest[ends], slot[first[ends]]]
        return out

    def _last_held(self, held: Any) -> tuple[Any, Any]:
        """The processes of the ``held`` slots (a mask), ascending, and each one's last
        held slot; a block at a time."""
        procs, lasts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for lo in range(0, len(held), columns.BLOCK):
            at = lo + np.flatnonzero(held[lo:lo + columns.BLOCK])[::-1]
            p, i = np.unique(self.c_proc.view(lo, lo + columns.BLOCK)[at - lo], return_index=True)
            procs.append(p)
            lasts.append(at[i])
        p, s = np.concatenate(procs), np.concatenate(lasts)
        order = np.lexsort((s, p))
        p, s = p[order], s[order]
        last = np.ones(len(p), dtype=bool)  # each process's last row: its last slot
        last[:-1] = p[1:] != p[:-1]
        return p[last], s[last]

    def _offsets(self, c: Collected) -> None:
        """Per-offset decisions: inconsistent-offsets and phantom-read."""
        conflicted: dict[int, set[int]] = {}
        for tp, off in self.conflicts:
            conflicted.setdefault(tp, set()).add(off)
        counted: set[tuple[int, int]] = set()  # (tp, offset): inconsistent, counted once
        for tp, part in enumerate(self.parts):
            lso = part.lso or 0
            for off, (a, p, dv) in disagreements(part.acks, part.polls, part.drains,
                                                 conflicted.get(tp, set())):
                values = {x for x in (a, p, dv) if x != NONE}
                extra = self.conflicts.get((tp, off), {})
                values.update(extra)
                if part.complete and off >= lso:
                    polled = ({p} if p != NONE else set()) | {
                        x for x, seen in extra.items() if any(k == "poll" for k, _, _ in seen)}
                    # every value the drain read there is in it (the log changed under it)
                    drained = {dv} | {
                        x for x, seen in extra.items() if any(k == "drain" for k, _, _ in seen)}
                    end = part.log_end
                    for x in sorted(polled - drained):
                        # past a short drain's end the record may be there, unread; not
                        # past every replica's log end, where none holds one
                        if (part.short is not None and off >= part.hw  # type: ignore[operator]
                                and (end is None or off < end)):
                            c.set_aside("phantom-read", tp)
                        elif part.missed(off):
                            c.drain_missed += 1  # the drain skipped what every replica holds
                        else:
                            c.add("phantom-read", tp,
                                  partial(examples.phantom, self, c, tp, off, x))
                if len(values) > 1:
                    # An ack is involved when an ack's association is what is wrong: two
                    # acks disagree, or the drain holds another value there (or, with the
                    # drain silent, reads disagree with the ack). An ack the drain agrees
                    # with leaves only reads disagreeing.
                    acked = {a} | {x for x, seen in extra.items()
                                   if any(k == "ack" for k, _, _ in seen)}
                    involves_ack = a != NONE and (len(acked) > 1 or (
                        a != dv if dv != NONE else bool(values - acked)))
                    reads_disagree = len({x for x in (p, dv) if x != NONE} | {
                        x for x, seen in extra.items() if any(k != "ack" for k, _, _ in seen)}) > 1
                    counted.add((tp, off))
                    c.add("inconsistent-offsets", tp,
                          partial(examples.iso, self, c, tp, off, a, p, dv, extra, involves_ack,
                                  reads_disagree),
                          c.iso_reason(involves_ack, reads_disagree, tp) is not None)
        for s in c.iso_ack_offset:  # the ack's offset, empty in the drain: once an offset
            tp = self.c_tp[s]
            if (tp, self.c_ack[s]) in counted:
                continue
            counted.add((tp, self.c_ack[s]))
            c.add("inconsistent-offsets", tp, partial(examples.iso_value, self, c, s),
                  c.iso_reason(True, False, tp) is not None)

    def _consumers(self, c: Collected) -> None:
        for tp, p, prev, off, t in self.backwards:
            c.add("nonmonotonic-poll", tp,
                  partial(examples.backwards, self, c, tp, p, prev, off, t))
        for tp, p, after, off, t in self.gaps:
            part = self.parts[tp]
            if not part.complete:
                continue
            # a first record comes right after the log start: every partition is
            # assigned from the beginning
            skipped = part.drains.any_between((part.lso or 0) - 1 if after is None else after, off)
            if skipped:
                c.add("poll-skip", tp, partial(examples.skip, self, c, tp, p, after, off, t, skipped))

    def copies(self, tp: int, offsets: Iterable[int]) -> list[provenance.Copy | None]:
        """The record at each offset of partition ``tp`` as its replicas' batches say
        (None where they do not)."""
        batches = self._batches.get(tp)
        if batches is None:
            batches = self._batches[tp] = provenance.Batches(self.parts[tp].replicas)
        return [batches.copy_at(off) for off in offsets]

    def drain_facts(self, tp: int, offset: int | None, value: int | None) -> explain.DrainFacts:
        """What the drain of partition ``tp`` says at ``offset`` and about ``value``."""
        part = self.parts[tp]
        held = part.drains.get(offset) if offset is not None else NONE
        where: list[int] = []
        s = self.slot(value) if value is not None else None
        if s is not None and self.c_tp[s] == tp and self.c_drain[s] != NONE:
            where = sorted({self.c_drain[s], *self.dups.get(s, ())})
        elif value is not None:  # a foreign value (a code) or one never sent
            where = sorted(set(self.foreign_at.get((tp, value), ())))
        return explain.DrainFacts(part.complete, part.hw, part.lso,
                                  None if held == NONE else self.shown(held), where)

    def slot(self, value: int) -> int | None:
        """The slot of the send that carried ``value``, or None."""
        s = self.vslot.get(value)
        return None if s == NONE else s

    def where(self, tp: int) -> dict[str, Any]:
        return {"topic": self.parts[tp].topic, "partition": self.parts[tp].partition}


def _view(col: array[int], dtype: type[np.generic] = np.int64) -> Any:
    """A column as a numpy array: the column itself, not a copy, so only once the feed is
    done (while a view exists, the column cannot grow)."""
    return np.frombuffer(col, dtype=dtype) if len(col) else np.zeros(0, dtype)


def _line(d: Any) -> int | None:
    index = d.get("index") if isinstance(d, dict) else None
    return index + 1 if isinstance(index, int) else None


def value_problem(d: Any) -> str | None:
    """What is wrong with a row's ``value`` for its ``f`` and ``type``, or None.

    Mirrors ``faultline/schemas/history.schema.json`` for the client ops the checker
    reads; nemesis values are free-form objects.
    """
    if not isinstance(d, dict):
        return "a line must be a JSON object"
    f, typ, v = d.get("f"), d.get("type"), d.get("value")

    def is_int(x: Any) -> bool:
        return x.__class__ is int

    def is_read(x: Any) -> bool:  # a record's value: a foreign one is text or null
        return x is None or x.__class__ is int or x.__class__ is str

    if f == "send":
        if not isinstance(v, dict) or not is_int(v.get("value")):
            return "a send's value must be an object with an integer 'value'"
        if typ == "invoke" and not (isinstance(v.get("topic"), str) and is_int(v.get("partition"))):
            return "a send invoke's value needs a string 'topic' and an integer 'partition'"
        if typ == "ok" and "offset" in v and not is_int(v["offset"]):
            return "a send ok's 'offset' must be an integer (-1 when the broker gave none)"
    elif f == "poll" and typ == "ok":
        records = v.get("records") if isinstance(v, dict) else None
        if not isinstance(records, list) or not all(
                isinstance(r, list) and len(r) == 4 and isinstance(r[0], str)
                and is_int(r[1]) and is_int(r[2]) and is_read(r[3]) for r in records):
            return "a poll ok's value needs 'records': [[topic, partition, offset, value], ...]"
    elif f == "drain" and typ == "ok":
        if not isinstance(v, dict) or not isinstance(v.get("topic"), str) or not is_int(
                v.get("partition")):
            return "a drain ok's value needs a string 'topic' and an integer 'partition'"
        records = v.get("records")
        if not isinstance(records, list) or not all(
                isinstance(r, list) and len(r) == 2 and is_int(r[0]) and is_read(r[1])
                for r in records):
            return "a drain ok's value needs 'records': [[offset, value], ...]"
    return None
