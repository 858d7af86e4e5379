"""REFERENCE, for tests only: the queue checker's engine as it was before its value ->
slot map became an array (faultline/checkers/queue.py at ea31ca4), kept unchanged but for
:meth:`Engine.slot`, :meth:`Engine.read_off` and :meth:`Engine.first_read` (what the
examples now ask), a consumer's first record judged as a poll-skip, the first lost
write's ack time noted (``Collected.first_loss_ns``) and the drain's edges (issue 33:
what ended once the drain began, a drain's gaps, reads below its log start), so that the
equivalence tests (test_queue_equivalence.py) can hold the current engine's results
equal to it. Delete it once the new engine is proven. Its offset maps are its own
(int64 cells, as the engine's were before they became int32), so that the
equivalence tests hold the engine's maps to them too.

Its anomalies, and the choices made where the table leaves room, are the engine's:
see :mod:`faultline.checkers.queue`'s docstring.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from itertools import zip_longest
from sys import intern
from typing import Any

from faultline.checkers import columns, examples, explain, provenance
from faultline.checkers.client_log import ClientLines
from faultline.checkers.columns import MAX_GROW, NONE, nones
from faultline.checkers.faults_seen import Timeline
from faultline.checkers.guarantees import GuaranteeConfig
from faultline.checkers.result import Result
from faultline.checkers.verdict import Collected, build_result, iso_rows
from faultline.checkers.whitebox import agreed_end, replicas_by_partition
from faultline.errors import HistoryError
from faultline.history import NEMESIS, Op, ReadResult
from faultline.spec import TestSpec
from tests.unit.checkers.reference_measures import FAIL, INFO, OK, Measures

OPEN = 0
_STATUS = {"ok": OK, "fail": FAIL, "info": INFO}
_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError)


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
    reads at or past its end are set aside as unknown (``short-drain``), never counted.
    The replicas' batches also say who wrote each copy of a duplicate and each of two
    reordered sends (:mod:`faultline.checkers.provenance`), and ``client_log``,
    ``client-log.jsonl``'s lines, what the producer logged meanwhile; neither changes
    what is counted, only who is named (``causes``, ``violations_by``) and the stories.
    Raises HistoryError for a malformed op; any other exception is a checker bug, which
    :func:`faultline.checkers.stored.check_stored` turns into an ``unknown`` verdict.
    """
    engine = Engine(spec, source, timeline, replicas, client_log)
    engine.feed(rows)
    cut = truncated if isinstance(truncated, bool) else truncated.truncated
    return engine.finish(cut, unavailable_after_ns)


class Engine:
    """One pass over the rows (:meth:`feed`), then :meth:`finish` decides. Internal."""

    def __init__(self, spec: TestSpec, source: str, timeline: Timeline | None = None,
                 replicas: Sequence[dict[str, Any]] | None = None,
                 client_log: Iterable[dict[str, Any]] = ()) -> None:
        self.spec = spec
        self.source = source
        self.timeline = timeline
        self.replicas = replicas
        self.client_lines = ClientLines(client_log)
        self._batches: dict[int, provenance.Batches] = {}  # tp -> its replicas' batches, when asked
        self.tp_ids: dict[tuple[str, int], int] = {}
        self.parts: list[Part] = []
        for p in range(spec.topic.partitions):
            self.part_id(spec.topic.name, p)
        # Per-value columns, indexed by slot (slots in invoke order).
        self.vslot: dict[int, int] = {}
        self.c_val: array[int] = array("q")
        self.c_tp: array[int] = array("q")
        self.c_proc: array[int] = array("q")
        self.c_inv: array[int] = array("q")
        self.c_done: array[int] = array("q")
        self.c_status: array[int] = array("b")
        self.c_ack: array[int] = array("q")
        self.c_drain: array[int] = array("q")  # first drain offset
        self.c_read_t: array[int] = array("q")  # first read (poll or drain)
        self.c_read_off: array[int] = array("q")
        self.c_read_by: array[int] = array("q")  # consumer process, or -1 for the drain
        self.errors: dict[int, str] = {}  # slot -> error of a fail / info send
        self.consumers: dict[int, dict[int, int]] = {}  # process -> part -> last offset
        self.gaps: list[tuple[int, int, int | None, int, int]] = []  # part, process, prev, off, time
        self.backwards: list[tuple[int, int, int, int, int]] = []  # same, nonmonotonic-poll
        # (part, offset) -> {value: [(source, time, process)]}, for same-source conflicts
        self.conflicts: dict[tuple[int, int], dict[int, list[tuple[str, Any, Any]]]] = {}
        self.odd_reads: dict[tuple[int, int], list[int]] = {}  # (part, value) -> off, t, by, n
        self.dups: dict[int, set[int]] = {}  # slot -> further drain offsets
        self.nemesis: list[Op] = []
        self.measures = Measures()
        self.ops = 0
        self.other = 0  # client ops with an f the checker does not read
        self.polls = [0, 0, 0]  # ok, fail, info completions
        self.drains = [0, 0, 0]

    def part_id(self, topic: Any, partition: Any) -> int:
        """The id of a topic-partition, registering it on first sight."""
        if not isinstance(topic, str) or partition.__class__ is not int:
            raise TypeError(f"not a topic-partition: {topic!r}, {partition!r}")
        key = (topic, partition)
        i = self.tp_ids.get(key)
        if i is None:
            i = self.tp_ids[key] = len(self.parts)
            self.parts.append(Part(topic, partition))
        return i

    def feed(self, rows: Iterable[dict[str, Any]]) -> None:
        """Consume the rows in order.

        This is the hot loop (millions of rows): sends and polls are handled inline
        with local aliases, because a method call and attribute loads per row cost
        as much as the work itself. Rare ops go through methods.
        """
        d: dict[str, Any] = {}
        vslot, parts, tp_ids = self.vslot, self.parts, self.tp_ids
        c_val, c_tp, c_proc, c_inv = self.c_val, self.c_tp, self.c_proc, self.c_inv
        c_done, c_status, c_ack, c_drain = self.c_done, self.c_status, self.c_ack, self.c_drain
        c_read_t, c_read_off, c_read_by = self.c_read_t, self.c_read_off, self.c_read_by
        consumers, measures, errors = self.consumers, self.measures, self.errors
        completed = measures.completed
        gaps, backwards = self.gaps, self.backwards
        part_id = self.part_id
        ops = 0
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
                            tp = part_id(v["topic"], v["partition"])
                        if val.__class__ is not int or val in vslot or val == NONE:
                            self._bad_value(d, val)
                        vslot[val] = len(c_val)
                        c_val.append(val)
                        c_tp.append(tp)
                        c_proc.append(d["process"])
                        c_inv.append(d["time"])
                        c_done.append(NONE)
                        c_status.append(OPEN)
                        c_ack.append(NONE)
                        c_drain.append(NONE)
                        c_read_t.append(NONE)
                        c_read_off.append(NONE)
                        c_read_by.append(NONE)
                        parts[tp].sends[OPEN] += 1
                        if measures.first_send is None:
                            measures.first_send = d["time"]
                        continue
                    s = vslot.get(val)
                    if s is None or c_status[s] != OPEN or c_proc[s] != d["process"]:
                        raise HistoryError(self.source, _line(d), f"send {typ} of value {val!r} "
                                           f"by process {d['process']} has no open invoke")
                    status = _STATUS[typ]
                    t = d["time"]
                    tp = c_tp[s]
                    part = parts[tp]
                    c_status[s] = status
                    c_done[s] = t
                    part.sends[OPEN] -= 1
                    part.sends[status] += 1
                    if status == OK:
                        off = v.get("offset", -1)
                        if off.__class__ is not int:
                            raise TypeError("offset")
                        if off >= 0:
                            c_ack[s] = off
                            cur = part.acks.put(off, val)
                            if cur != NONE and cur != val:
                                self._conflict(tp, off, cur, val, ("ack", t, d["process"]))
                    elif d.get("error"):
                        errors[s] = intern(d["error"])  # a few names, many times
                    completed(tp, status, c_inv[s], t)
                elif f == "poll":
                    if typ == "invoke":
                        continue
                    self.polls[_STATUS[typ] - 1] += 1
                    if typ != "ok":
                        continue
                    p = d["process"]
                    t = d["time"]
                    last_of = consumers.get(p)
                    if last_of is None:
                        last_of = consumers[p] = {}
                    key: tuple[Any, Any] = ("", -1)
                    tp = -1
                    arr = c_read_t  # rebound per partition below; any int64 array will do
                    part = None
                    for topic, partition, off, val in d["value"]["records"]:
                        if topic != key[0] or partition != key[1]:  # records come in runs
                            key = (topic, partition)
                            tp = tp_ids.get(key, -1)
                            if tp < 0:
                                tp = part_id(topic, partition)
                            part = parts[tp]
                            arr = part.polls.arr
                        if off.__class__ is not int or val.__class__ is not int:
                            raise TypeError("record")
                        last = last_of.get(tp)
                        if last is None:
                            gaps.append((tp, p, None, off, t))
                        elif off != last + 1:
                            (backwards if off <= last else gaps).append((tp, p, last, off, t))
                        last_of[tp] = off
                        part.polled += 1  # type: ignore[union-attr]
                        part.last_poll = t  # type: ignore[union-attr]
                        if 0 <= off < len(arr):  # OffsetMap.put, inline
                            cur = arr[off]
                            if cur == NONE:
                                arr[off] = val
                        else:
                            cur = part.polls.put(off, val)  # type: ignore[union-attr]
                            arr = part.polls.arr  # type: ignore[union-attr]
                        if cur != NONE and cur != val:
                            self._conflict(tp, off, cur, val, ("poll", t, p))
                        s = vslot.get(val)
                        if s is None or c_tp[s] != tp:
                            self._odd_read(tp, val, off, t, p)
                        elif c_read_t[s] == NONE:
                            c_read_t[s] = t
                            c_read_off[s] = off
                            c_read_by[s] = p
                elif f == "drain":
                    if typ == "invoke":  # the drain's start: its HW was taken before
                        v = d.get("value")
                        tp = tp_ids.get((v.get("topic"), v.get("partition")), -1) if isinstance(
                            v, dict) and isinstance(v.get("partition"), int) else -1
                        if tp >= 0 and parts[tp].drain_start is None:
                            parts[tp].drain_start = d["time"]
                    if typ != "invoke":
                        self.drains[_STATUS[typ] - 1] += 1
                    if typ == "ok":
                        self._drain(d)
                elif d["process"] == NEMESIS:
                    self.nemesis.append(Op(d["index"], d["time"], "nemesis", typ, f,
                                           d.get("value"), d.get("error")))
                else:
                    self.other += 1
        except _MALFORMED as e:
            problem = value_problem(d)
            if problem is None:
                raise  # a checker bug, not the history's fault
            raise HistoryError(self.source, _line(d), problem) from e
        finally:
            self.ops += ops

    def _bad_value(self, d: dict[str, Any], val: Any) -> None:
        what = "was already sent" if val in self.vslot else "is not a usable integer"
        raise HistoryError(self.source, _line(d), f"send value {val!r} {what}: "
                           "values must be unique integers (docs/history.md)")

    def _drain(self, d: dict[str, Any]) -> None:
        v = d["value"]
        t = d["time"]
        tp = self.part_id(v["topic"], v["partition"])
        part = self.parts[tp]
        vslot, c_tp, c_drain = self.vslot, self.c_tp, self.c_drain
        for off, val in v["records"]:
            if off.__class__ is not int or val.__class__ is not int:
                raise TypeError("record")
            cur = part.drains.put(off, val)
            conflicted = cur != NONE and cur != val  # read all the same, but no second copy
            if cur == NONE:
                part.drained += 1
            elif conflicted:
                self._conflict(tp, off, cur, val, ("drain", t, None))
            s = vslot.get(val)
            if s is None or c_tp[s] != tp:
                self._odd_read(tp, val, off, t, -1)
                continue
            if self.c_read_t[s] == NONE:
                self.c_read_t[s] = t
                self.c_read_off[s] = off
                self.c_read_by[s] = -1
            first = c_drain[s]
            if first == NONE:
                c_drain[s] = off
            elif first != off and not conflicted:
                self.dups.setdefault(s, set()).add(off)
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

    def finish(self, truncated: bool, unavailable_after_ns: int | None) -> Result:
        """Decide, once every row has been fed."""
        if unavailable_after_ns is not None:
            self.measures.unavailable_after_ns = unavailable_after_ns
        if self.c_inv:  # invoke times never decrease: the last is the latest
            self.measures.last_send = max(self.measures.last_send, self.c_inv[-1])
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
            offset=None if ack == NONE else ack, error=self.errors.get(s))

    def _values(self, c: Collected) -> None:
        """Per-value decisions: lost, aborted, indeterminate, ack/drain disagreement,
        nonmonotonic-send, duplicate."""
        parts = self.parts
        highest: dict[tuple[int, int], tuple[int, int]] = {}  # (proc, part) -> (stored, slot)
        rows = zip(self.c_tp, self.c_status, self.c_ack, self.c_drain, self.c_read_t,
                   self.c_proc, strict=True)
        for s, (tp, status, ack, drained, read_t, proc) in enumerate(rows):
            if status == OK:
                part = parts[tp]
                if part.complete:
                    if drained == NONE:
                        lso = part.lso or 0
                        if part.late(self.c_done[s]):
                            c.set_aside("lost-write", tp, late=True)
                        elif (ack != NONE and ack < lso) or (ack == NONE and lso > 0):
                            c.below_log_start += 1
                        elif part.short is not None and (ack == NONE or ack >= part.hw):
                            c.set_aside("lost-write", tp)
                        elif part.gap(ack) or (ack == NONE and part.drained < part.hw - lso):  # type: ignore[operator]
                            c.drain_gap += 1
                        else:
                            c.add("lost-write", tp, self.c_inv[s], partial(examples.lost, self, c, s))
                            done = self.c_done[s]
                            if c.first_loss_ns is None or done < c.first_loss_ns:
                                c.first_loss_ns = done
                    elif (ack != NONE and ack != drained and ack not in self.dups.get(s, ())
                          and part.drains.get(ack) == NONE):
                        if part.late(self.c_done[s]):
                            c.set_aside("inconsistent-offsets", tp, late=True)
                        elif ack < (part.lso or 0):  # the drain read nothing there
                            pass
                        elif part.short is not None and ack >= part.hw:  # type: ignore[operator]
                            c.set_aside("inconsistent-offsets", tp)
                        elif part.gap(ack):
                            c.drain_gap += 1
                        else:
                            c.iso_ack_offset.append(s)
                if drained != NONE:  # where it is stored (a lost value is no reordering)
                    key = (proc, tp)
                    prev = highest.get(key)
                    if prev is None or drained > prev[0]:
                        highest[key] = (drained, s)
                    elif drained < prev[0]:
                        copies = self.copies(tp, (prev[0], drained))
                        cause = provenance.reorder_cause(*copies)
                        c.add("nonmonotonic-send", tp, self.c_inv[s],
                              partial(examples.reorder, self, c, prev, s, copies, cause),
                              cause=cause)
            elif status == FAIL:
                if read_t != NONE:
                    c.add("aborted-read", tp, self.c_inv[s], partial(examples.aborted, self, c, s))
            elif read_t != NONE:
                c.indeterminate_read += 1
            else:
                c.indeterminate += 1
        for s, offsets in sorted(self.dups.items()):
            tp = self.c_tp[s]
            at = sorted({self.c_drain[s], *offsets})
            copies = self.copies(tp, at)
            cause = provenance.duplicate_cause(copies)
            c.add("duplicate", tp, self.c_inv[s], partial(examples.duplicate, self, c, s, at, copies, cause),
                  cause=cause)
        for (tp, val), (off, t, by, n) in sorted(self.odd_reads.items()):
            c.add("unexpected-value", tp, t,
                  partial(examples.unexpected, self, c, tp, val, off, t, by, n))

    def _offsets(self, c: Collected) -> None:
        """Per-offset decisions: inconsistent-offsets and phantom-read."""
        counted: set[tuple[int, int]] = set()  # (tp, offset): inconsistent, counted once
        for tp, part in enumerate(self.parts):
            lso = part.lso or 0
            for off, (a, p, dv) in aligned(part.acks, part.polls, part.drains):
                # The common case, cheaply: everything that is there agrees.
                if ((a == dv and p in (dv, NONE)) or (a == NONE and p == dv)) and (
                        (tp, off) not in self.conflicts):
                    continue
                values = {x for x in (a, p, dv) if x != NONE}
                extra = self.conflicts.get((tp, off), {})
                values.update(extra)
                if part.complete and off >= lso:
                    polled = ({p} if p != NONE else set()) | {
                        x for x, seen in extra.items() if any(k == "poll" for k, _, _ in seen)}
                    drained = {dv} | {
                        x for x, seen in extra.items() if any(k == "drain" for k, _, _ in seen)}
                    for x in sorted(polled - drained):
                        s = self.vslot.get(x)
                        t = (self.c_read_t[s] if s is not None and self.c_tp[s] == tp
                             and self.c_read_off[s] == off and self.c_read_by[s] != -1 else None)
                        if part.late(part.last_poll) and part.late(t):
                            c.set_aside("phantom-read", tp, late=True)
                        elif part.short is not None and off >= part.hw:  # type: ignore[operator]
                            c.set_aside("phantom-read", tp)
                        elif part.gap(off):
                            c.drain_gap += 1
                        else:
                            c.add("phantom-read", tp, examples.read_at(self, tp, off, x),
                                  partial(examples.phantom, self, c, tp, off, x))
                elif part.complete and p != NONE and self._vanished(tp, p):
                    c.below_log_start += 1
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
                    c.add("inconsistent-offsets", tp, examples.iso_at(self, tp, off, a, p, extra),
                          partial(examples.iso, self, c, tp, off, a, p, dv, extra, involves_ack,
                                  reads_disagree), iso_rows(involves_ack, reads_disagree))
        for s in c.iso_ack_offset:
            tp = self.c_tp[s]
            if (tp, self.c_ack[s]) in counted:
                continue
            counted.add((tp, self.c_ack[s]))
            c.add("inconsistent-offsets", tp, self.c_inv[s], partial(examples.iso_value, self, c, s),
                  iso_rows(True, False))

    def _consumers(self, c: Collected) -> None:
        for tp, p, prev, off, t in self.backwards:
            c.add("nonmonotonic-poll", tp, t,
                  partial(examples.backwards, self, c, tp, p, prev, off, t))
        for tp, p, prev, off, t in self.gaps:
            part = self.parts[tp]
            if not part.complete:
                continue
            skipped = part.drains.any_between((part.lso or 0) - 1 if prev is None else prev, off)
            if skipped and part.late(t):
                c.set_aside("poll-skip", tp, late=True)
            elif skipped:
                c.add("poll-skip", tp, t, partial(examples.skip, self, c, tp, p, prev, off, t, skipped))

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
        s = self.vslot.get(value) if value is not None else None
        if s is not None and self.c_tp[s] == tp and self.c_drain[s] != NONE:
            where = sorted({self.c_drain[s], *self.dups.get(s, ())})
        return explain.DrainFacts(part.complete, part.hw, part.lso,
                                  None if held == NONE else held, where)

    def slot(self, value: int) -> int | None:
        return self.vslot.get(value)

    def _vanished(self, tp: int, value: int) -> bool:
        s = self.vslot.get(value)
        return s is None or self.c_tp[s] != tp or (self.c_status[s] != OK and self.c_drain[s] == NONE)

    def shown(self, value: int) -> int:
        return value  # the reference reads integer values only

    def read_off(self, s: int) -> int:
        return self.c_read_off[s]

    def first_read(self, s: int) -> tuple[int, int]:
        return self.c_read_t[s], self.c_read_by[s]

    def where(self, tp: int) -> dict[str, Any]:
        return {"topic": self.parts[tp].topic, "partition": self.parts[tp].partition}


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
                and all(is_int(x) for x in r[1:]) for r in records):
            return "a poll ok's value needs 'records': [[topic, partition, offset, value], ...]"
    elif f == "drain" and typ == "ok":
        if not isinstance(v, dict) or not isinstance(v.get("topic"), str) or not is_int(
                v.get("partition")):
            return "a drain ok's value needs a string 'topic' and an integer 'partition'"
        records = v.get("records")
        if not isinstance(records, list) or not all(
                isinstance(r, list) and len(r) == 2 and all(is_int(x) for x in r)
                for r in records):
            return "a drain ok's value needs 'records': [[offset, value], ...]"
    return None


class OffsetMap:
    """offset -> int64 value, first value wins, in int64 cells (the engine's before its
    cells became int32); :meth:`put` reports what was there."""

    __slots__ = ("arr", "extra")

    def __init__(self) -> None:
        self.arr: array[int] = array("q")
        self.extra: dict[int, int] = {}

    def put(self, offset: int, value: int) -> int:
        arr = self.arr
        n = len(arr)
        if 0 <= offset < n:
            cur = arr[offset]
            if cur == NONE:
                arr[offset] = value
            return cur
        if n <= offset < n + MAX_GROW:
            arr.extend(nones(max(offset + 1 - n, n // 8 + 1024)))
            for o in [o for o in self.extra if n <= o < len(arr)]:
                arr[o] = self.extra.pop(o)
            return self.put(offset, value)
        cur = self.extra.get(offset, NONE)
        if cur == NONE:
            self.extra[offset] = value
        return cur

    def get(self, offset: int) -> int:
        if 0 <= offset < len(self.arr):
            return self.arr[offset]
        return self.extra.get(offset, NONE)

    def items(self) -> Iterator[tuple[int, int]]:
        for o, v in enumerate(self.arr):
            if v != NONE:
                yield o, v
        for o in sorted(self.extra):
            yield o, self.extra[o]

    def any_between(self, lo: int, hi: int) -> list[int]:
        arr = self.arr
        out = [o for o in range(max(lo + 1, 0), min(hi, len(arr))) if arr[o] != NONE]
        out += sorted(o for o in self.extra if lo < o < hi)
        return out


class Part(columns.Part):
    """:class:`faultline.checkers.columns.Part` with this module's offset maps."""

    __slots__ = ()

    def __init__(self, topic: str, partition: int) -> None:
        super().__init__(topic, partition)
        self.acks: OffsetMap = OffsetMap()  # type: ignore[assignment]
        self.polls: OffsetMap = OffsetMap()  # type: ignore[assignment]
        self.drains: OffsetMap = OffsetMap()  # type: ignore[assignment]


def aligned(*maps: OffsetMap) -> Iterator[tuple[int, tuple[int, ...]]]:
    """(offset, (value in each map)) for every offset below the longest array, then
    every offset only a dict holds; ascending (faultline/checkers/columns.py at 564f4b9)."""
    end = max(len(m.arr) for m in maps)
    rows = enumerate(zip_longest(*(m.arr for m in maps), fillvalue=NONE))
    patch = {o for m in maps for o in m.extra if 0 <= o < end}
    if patch:  # an offset in one map's dict but inside another's array: look it up
        for o, row in rows:
            yield (o, tuple(m.get(o) for m in maps)) if o in patch else (o, row)
    else:
        yield from rows
    for o in sorted({o for m in maps for o in m.extra if not 0 <= o < end}):
        yield o, tuple(m.get(o) for m in maps)
