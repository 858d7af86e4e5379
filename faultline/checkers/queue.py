"""The queue checker: what was acknowledged against what was read, per topic-partition.

A pure function of a test spec and a history (docs/history.md): :func:`check` takes ops,
:func:`check_rows` parsed rows (such as :func:`faultline.history.iter_rows` yields) or a
:class:`~faultline.history.HistoryFile` (whose lines the engine reads itself,
:meth:`Engine.feed_file`), and :func:`check_rows_table` gives besides the verdict the
history's sends as columns, from the same pass, for the report (:mod:`faultline.checkers.table`).

What each anomaly is, and what the drain cannot decide, is defined in plain Python in
:mod:`faultline.checkers.anomalies`; this engine finds the same instances (held to them
by ``tests/unit/checkers/test_anomalies.py``) in one streaming pass over the history,
compiled (:mod:`.kernel`, :mod:`.scan`), into columns whose memory grows with the
distinct values and offsets, not with the lines (:mod:`.columns`; docs/design.md, "The
queue checker's engine"). Whether each instance is permitted is
:mod:`faultline.checkers.guarantees`'s.

Refused with a HistoryError naming the line (``index + 1``): a malformed value (a send
without a 64-bit integer ``value``, a poll record that is not ``[topic, partition, offset,
value]``, ...), an op naming a topic-partition the test's topic does not have, a number
that does not fit 64 bits (signed), more than 2**31 - 1 sends or 32,768 topic-partitions.
Any other exception inside the checker is a bug, which
:func:`faultline.checkers.stored.check_stored` turns into ``valid: "unknown"``, never a
pass.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson
import zstandard

from faultline.checkers import columns, examples, explain, kernel, provenance, scan
from faultline.checkers.anomalies import (
    AFTER_DRAIN,
    BELOW_LOG_START,
    DRAIN_MISSED,
    DRAIN_MISSED_HELD,
    SHORT_DRAIN,
)
from faultline.checkers.client_log import ClientLines
from faultline.checkers.columns import (
    EMPTY,
    NARROW_MAX,
    NONE,
    Narrow,
    OffsetMap,
    Part,
    Rising,
    disagreements,
    nones,
)
from faultline.checkers.faults_seen import Timeline
from faultline.checkers.guarantees import GuaranteeConfig
from faultline.checkers.kernel import FAIL, OK
from faultline.checkers.measures import Measures
from faultline.checkers.pairing import open_f, pairing_state
from faultline.checkers.result import Result
from faultline.checkers.table import HistoryDigest, SendTable
from faultline.checkers.verdict import Collected, QueueFacts, build_result, iso_rows, queue_facts
from faultline.checkers.whitebox import agreed_end, replicas_by_partition
from faultline.errors import HistoryError
from faultline.history import (
    CUT,
    F_DRAIN,
    F_NEMESIS,
    F_POLL,
    F_SEND,
    INT64_MAX,
    INT64_MIN,
    NEMESIS,
    OP_TYPE_CODES,
    P_NOT_INT,
    T_INVOKE,
    T_OK,
    TIME_MARGIN_NS,
    VALUE_MAX,
    VALUE_MIN,
    HistoryFile,
    Op,
    ReadResult,
    TooLarge,
    check_row,
    history_blocks,
    iter_rows,
    latest_time,
    pairing_message,
    parse_line,
    unreadable,
)
from faultline.rundir import PLAIN_HISTORY_FILE
from faultline.spec import TestSpec

#: The columns grow by this many slots at least (and by an eighth of what they hold).
GROW = 1 << 16
#: The highest topic-partition id (ids live in int16 cells).
MAX_PARTS = (1 << 15) - 1
_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError)
#: ops the compiled feed takes at a time, and the events it may leave between two calls
BATCH = 1 << 12
EVENTS = 1 << 14
_TYPE_NAMES = tuple(OP_TYPE_CODES)  # by code
_SOURCES = ("ack", "poll", "drain")  # an EV_CONFLICT's source
EMPTY_CELLS = np.zeros(0, np.int32)
_BLANK = np.zeros(kernel.FIELDS, np.int64)
_BLANK[[kernel.F_TP, kernel.F_ERR, kernel.F_OFF]] = -1
_BLANK[[kernel.F_HW, kernel.F_LSO]] = NONE


class _Pairing(Exception):
    """A row breaks docs/history.md's pairing rules, as found while encoding it."""


class _Batch:
    """Ops encoded for the compiled feed (:meth:`Engine._encode`): their table, their
    records', their lines, and the errors found in them."""

    __slots__ = ("errors", "n", "nr", "ops", "recs")

    def __init__(self) -> None:
        self.ops = np.zeros((BATCH, kernel.FIELDS), np.int64)
        self.recs = np.zeros((BATCH, 3), np.int64)
        self.n = 0  # ops
        self.nr = 0  # records
        self.errors: dict[int, HistoryError] = {}

    def records(self, more: int) -> Any:
        """The records' table, with room for ``more``."""
        if self.nr + more > len(self.recs):
            self.recs = np.concatenate((self.recs, np.zeros((max(more, len(self.recs)), 3), np.int64)))
        return self.recs

    def fail(self, k: int, error: HistoryError, stage: int) -> None:
        """Op ``k`` is in error: raised when the feed reaches it, at ``stage``."""
        self.ops[k, kernel.F_BAD] = stage
        self.errors[k] = error


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
                     table: bool = True) -> tuple[Result, HistoryDigest | None, QueueFacts]:
    """:func:`check_rows`, and from the same pass the history's sends as columns
    (:class:`~faultline.checkers.table.HistoryDigest`, what a report needs; None unless
    ``table``), and the facts the verdict was judged by, for the checkers after it.

    ``broker`` gives the broker state once the rows are exhausted, not before: a
    history followed while its run goes on (``faultline run``'s check) has its
    broker state only when it is closed. By default there is none.
    """
    engine = Engine(spec, source)
    if isinstance(rows, HistoryFile):
        engine.feed_file(rows)
    else:
        engine.feed(rows)
    cut = truncated if isinstance(truncated, bool) else truncated.truncated
    result, facts = engine.finish(cut, unavailable_after_ns, broker())
    return result, engine.table(cut) if table else None, facts


def warm(workdir: Path) -> None:
    """Compile the checker's compiled code (:mod:`.kernel`, :mod:`.scan`, the pairing
    rules), which numba caches on disk beside the modules: by checking, in ``workdir``,
    a history of a few lines that takes every compiled path (a file's common lines and
    others, rows, the measures). Once cached, this takes a quarter of a second;
    ``faultline setup`` does it so that no run's check pays the first compile (~15 s)."""
    spec = TestSpec()
    topic = spec.topic.name
    rows: list[dict[str, Any]] = [
        {"f": "send", "type": "invoke", "process": 0, "value": {"topic": topic, "partition": 0, "value": 0}},
        {"f": "send", "type": "ok", "process": 0, "value": {"topic": topic, "partition": 0, "value": 0,
                                                            "offset": 0}},
        {"f": "send", "type": "invoke", "process": 0, "value": {"topic": topic, "partition": 0, "value": 1}},
        {"f": "send", "type": "fail", "process": 0, "value": {"topic": topic, "partition": 0, "value": 1},
         "error": "NOT_ENOUGH_REPLICAS"},
        {"f": "kill", "type": "info", "process": NEMESIS, "value": {"nodes": [1]}},
        {"f": "poll", "type": "invoke", "process": 1, "value": None},
        {"f": "poll", "type": "ok", "process": 1, "value": {"records": [[topic, 0, 0, 0]]}},
        {"f": "drain", "type": "invoke", "process": 2, "value": {"topic": topic, "partition": 0}},
        {"f": "drain", "type": "ok", "process": 2, "value": {
            "topic": topic, "partition": 0, "log_start_offset": 0, "high_watermark": 1,
            "records": [[0, 0]], "last": True}},
    ]
    rows = [{"index": i, "time": i * 1000, **r} for i, r in enumerate(rows)]
    path = workdir / PLAIN_HISTORY_FILE
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    check_rows_table(spec, HistoryFile(str(path), ReadResult()))
    check_rows(spec, iter_rows(path))
    OffsetMap().put(0, 1)
    Rising().put(0, 1)


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
        # feeding they hold room past the last slot (empty cells, OPEN) for the compiled
        # feed to fill (:meth:`_grow`); :meth:`feed` cuts them to ``slots`` at its end.
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
        self.read_offs: Any = kernel.new_extra()
        # the errors of fail / info sends: slot and error (an index into error_names)
        self.err_slots: array[int] = array("i")
        self.err_codes: array[int] = array("i")
        self.error_names: dict[str, int] = {}
        self._errors_by_slot: tuple[Any, Any] | None = None
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
        parts = len(self.parts)
        self.measures = Measures(parts=parts)
        self.ops = 0
        self.other = 0  # client ops with an f the checker does not read
        self.polls = [0, 0, 0]  # ok, fail, info completions
        self.drains = [0, 0, 0]
        self.other_errors: list[tuple[int, str, str]] = []  # (time, f, kind), not sends
        self.end_time = 0  # the last op's time
        self.max_time = latest_time(spec.time_limit_s)  # the latest an op's may be
        # What only the compiled feed reads and writes (:mod:`.kernel`): its scalars and
        # events; each partition's offset maps, in one list (3 a partition: acks, polls,
        # drains) with their dicts; polled and drained records, and each partition's
        # complete drain (complete, time, HW, log start); polls and drains by outcome;
        # each consumer's last offset per partition; the pairing rules' open ops.
        self.S = np.zeros(kernel.SCALARS, np.int64)
        self.S[[kernel.S_FIRST_SEND, kernel.S_BUCKET]] = NONE, -1
        self.S[kernel.S_BUCKET_NS] = self.measures.bucket_ns
        self.S[kernel.S_UNAVAILABLE_NS] = self.measures.unavailable_after_ns
        self.E = np.zeros((EVENTS, kernel.EV_FIELDS), np.int64)
        self.maps = kernel.new_list(EMPTY_CELLS, 3 * parts)
        self.maps_x = kernel.new_list(self.parts[0].acks.extra, 3 * parts)
        for m, omap in enumerate(m for part in self.parts for m in (part.acks, part.polls, part.drains)):
            kernel.list_set(self.maps, m, omap.arr)
            kernel.list_set(self.maps_x, m, omap.extra)
        self.lens = np.zeros(3 * parts, np.int64)
        self.polled = np.zeros(parts, np.int64)
        self.drained = np.zeros(parts, np.int64)
        self.drain_end = np.zeros((parts, 5), np.int64)
        self.drain_end[:, 4] = NONE
        self.counts = np.zeros(6, np.int64)
        self.consumers: Any = kernel.new_pairs()
        self.open_sends, self.open_other, self.retired = pairing_state()
        self.f_names: dict[str, int] = {"send": F_SEND, "poll": F_POLL,
                                        "drain": F_DRAIN}

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

    def feed(self, rows: Iterable[dict[str, Any]], *, validate: bool = False) -> None:
        """Consume the rows in order: each is encoded as a row of the compiled feed's
        table (:meth:`_encode`), and :mod:`.kernel` applies them a batch at a time.
        ``validate`` also applies docs/history.md's pairing rules (for rows no reader
        has checked)."""
        batch = _Batch()
        self._c_val = None
        d: Any = None
        try:
            try:
                for d in rows:
                    self.ops += 1
                    self._encode(d, batch, validate)
                    if batch.n == BATCH:
                        self._apply(batch, validate)
            except HistoryError:  # the rows' reader's: an earlier row's error comes first
                self._apply(batch, validate)
                raise
            self._apply(batch, validate)
            if d is not None:
                self.end_time = d["time"]
        finally:
            self._settle()

    def feed_file(self, history: HistoryFile) -> None:
        """Consume a history file's lines in order, with docs/history.md's checks and
        pairing rules, as :func:`faultline.history.iter_rows` reads them (the same errors,
        a cut last line noted in ``history.result``): the common lines straight into the
        compiled feed's table (:func:`.scan.scan`), any other parsed and checked as
        iter_rows does, then encoded (:meth:`_encode`)."""
        batch = _Batch()
        self._c_val = None
        name, result = history.path, history.result
        topic = np.frombuffer(self.spec.topic.name.encode(), np.uint8)
        parts = len(self.parts)
        index = last_time = 0  # the next line's index, the last line's time
        got = np.empty(8, np.int64)  # the scanner's value object
        names, name_ends = scan.literal(""), np.zeros(0, np.int64)  # the errors numbered
        try:
            for block in history_blocks(name, history.follow, history.tap):
                buf = np.frombuffer(block, np.uint8)
                pos = 0
                while True:
                    if len(name_ends) < len(self.error_names):  # the scanner reads those too
                        names, name_ends = _names(self.error_names)
                    what, pos, batch.n, batch.nr, index, last_time = scan.scan(
                        buf, pos, topic, parts, batch.ops, batch.n, batch.recs, batch.nr, index,
                        last_time, self.max_time, got, names, name_ends)
                    if what == scan.BLOCK_DONE:
                        break
                    if what == scan.BATCH_FULL:
                        if batch.n:
                            self._apply(batch, True)
                        else:  # one line's records: more room
                            batch.records(len(batch.recs) + 1)
                        continue
                    end = scan.line_end(block, pos)
                    try:
                        d = parse_line(name, index + 1, block[pos:end])
                        if d is CUT:
                            result.truncated = True
                            break
                        t = check_row(name, index + 1, d, index, last_time)
                    except HistoryError:
                        self._apply(batch, True)  # an earlier line's error comes first
                        raise
                    pos = end
                    last_time = min(t, INT64_MAX)  # more: its op is in error (_encode)
                    index += 1
                    self._encode(d, batch, True)
                    if batch.n == BATCH:
                        self._apply(batch, True)
            self._apply(batch, True)
        except (zstandard.ZstdError, TooLarge) as e:
            raise unreadable(name, index + 1, e) from None
        finally:
            self.ops += index
            result.lines = index
            if index:
                self.end_time = last_time
            self._settle()

    def _encode(self, d: Any, batch: _Batch, validate: bool) -> None:
        """Put row ``d`` in the batch's next op: what the compiled feed needs of it. What
        it does not need is done here: a nemesis op is kept, a client op other than a
        send that did not end ok is kept for the report's errors, a foreign value read
        gets its code. An error found here is kept with the op, and raised when the feed
        reaches it (an earlier op's error comes first)."""
        k = batch.n
        batch.n += 1
        o = batch.ops[k]
        o[:] = _BLANK
        o[kernel.F_R0] = o[kernel.F_R1] = batch.nr
        line = _line(d)
        o[kernel.F_LINE] = -1 if line is None else line
        try:
            f, typ, p, t = d["f"], d["type"], d["process"], d["time"]
            ty = OP_TYPE_CODES[typ]
            # the words history.pairing and the scanner give
            why = (f"process {p} does not fit 64 bits" if p != NEMESIS and not INT64_MIN <= p <= INT64_MAX
                   else None if INT64_MIN <= t <= INT64_MAX else "a time that does not fit 64 bits (signed)")
            if why is not None:
                batch.fail(k, HistoryError(self.source, _line(d), why), kernel.BAD_SHAPE)
                return
            if t > self.max_time:
                batch.fail(k, HistoryError(self.source, _line(d), (
                    f"time {t} ns is past the test's time limit ({self.spec.time_limit_s:g} s, "
                    f"test.json) plus {TIME_MARGIN_NS // 10**9} s: no run journals an op that late")),
                    kernel.BAD_SHAPE)
                return
            o[kernel.F_TY] = ty
            o[kernel.F_T] = t
            if p == NEMESIS:
                o[kernel.F_F] = F_NEMESIS
                self.nemesis.append(Op(d["index"], t, "nemesis", typ, f, d.get("value"), d.get("error")))
                return
            if p.__class__ is not int:
                raise TypeError("process")
            o[kernel.F_P] = p
            if f == "send":
                o[kernel.F_F] = F_SEND
                self._encode_send(d, o, typ, ty, p, validate)
            elif f == "poll" or f == "drain":
                o[kernel.F_F] = F_POLL if f == "poll" else F_DRAIN
                if f == "drain" and typ == "invoke":
                    self._drain_began(d.get("value"), t)
                if typ == "ok":
                    (self._encode_records if f == "poll" else self._encode_drain)(d, batch, o)
                elif typ != "invoke":
                    self._client_error(d)
            else:
                code = self.f_names.get(f)
                if code is None:
                    code = self.f_names[f] = len(self.f_names)
                o[kernel.F_F] = code
                self.other += 1
                if typ == "fail" or typ == "info":
                    self._client_error(d)
        except _Pairing as e:
            batch.fail(k, HistoryError(self.source, _line(d), str(e)), kernel.BAD_PAIRING)
        except HistoryError as e:
            batch.fail(k, e, kernel.BAD_VALUE)
        except OverflowError:  # numpy's: an int64 cell
            batch.fail(k, HistoryError(self.source, _line(d), "a number does not fit 64 bits "
                                       "(signed)"), kernel.BAD_VALUE)
        except _MALFORMED:
            problem = value_problem(d)
            if problem is None:
                raise  # a checker bug, not the history's fault
            batch.fail(k, HistoryError(self.source, _line(d), problem), kernel.BAD_VALUE)

    def _encode_send(self, d: dict[str, Any], o: Any, typ: str, ty: int, p: int,
                     validate: bool) -> None:
        if validate:  # the pairing rules need a 64-bit value
            v = d.get("value")
            sent = v.get("value") if v.__class__ is dict else None
            if sent.__class__ is not int or not INT64_MIN <= sent <= INT64_MAX:
                raise _Pairing(pairing_message(P_NOT_INT, p, "send", typ, sent, ""))
            o[kernel.F_VAL] = sent
        v = d["value"]
        val = v["value"]
        if val.__class__ is not int:
            if ty == T_INVOKE:
                self._bad_value(d, val)
            raise HistoryError(self.source, _line(d), f"send {typ} of value {val!r} by "
                               f"process {p} has no open invoke")
        if ty == T_INVOKE:
            tp = self.tp_ids.get((v["topic"], v["partition"]))
            o[kernel.F_TP] = self.part_id(v["topic"], v["partition"], d) if tp is None else tp
            if not VALUE_MIN <= val <= VALUE_MAX:
                self._bad_value(d, val)
        elif not INT64_MIN <= val <= INT64_MAX:  # never sent: no open invoke
            raise HistoryError(self.source, _line(d), f"send {typ} of value {val!r} by "
                               f"process {p} has no open invoke")
        o[kernel.F_VAL] = val
        if ty == T_OK:
            off = v.get("offset", -1)
            if off.__class__ is not int:
                raise TypeError("offset")
            o[kernel.F_OFF] = off
        elif ty != T_INVOKE and d.get("error"):
            e = d["error"]
            if e.__class__ is not str:
                raise TypeError("error")
            code = self.error_names.get(e)
            if code is None:
                code = self.error_names[e] = len(self.error_names)
            o[kernel.F_ERR] = code

    def _encode_records(self, d: dict[str, Any], batch: _Batch, o: Any) -> None:
        """A poll's records: [topic, partition, offset, value] each."""
        records = d["value"]["records"]
        recs = batch.records(len(records))
        j = batch.nr
        tp_ids, part_id, foreign = self.tp_ids, self.part_id, self._foreign
        key: tuple[Any, Any] = ("", -1)
        tp = -1
        for topic, partition, off, val in records:
            if topic != key[0] or partition != key[1]:
                key = (topic, partition)
                tp = tp_ids.get(key, -1)
                if tp < 0:
                    tp = part_id(topic, partition, d)
            if off.__class__ is not int or val.__class__ is not int or not VALUE_MIN <= val <= VALUE_MAX:
                val = foreign(off, val)
            recs[j] = tp, off, val
            j += 1
        batch.nr = j
        o[kernel.F_R1] = j

    def _encode_drain(self, d: dict[str, Any], batch: _Batch, o: Any) -> None:
        """A drain's records, [offset, value] each, and whether it was its partition's
        last."""
        v = d["value"]
        tp = self.part_id(v["topic"], v["partition"], d)
        records = v["records"]
        recs = batch.records(len(records))
        j = batch.nr
        for off, val in records:
            if off.__class__ is not int or val.__class__ is not int or not VALUE_MIN <= val <= VALUE_MAX:
                val = self._foreign(off, val)
                self.foreign_at.setdefault((tp, val), []).append(off)
            recs[j] = tp, off, val
            j += 1
        batch.nr = j
        o[kernel.F_R1] = j
        o[kernel.F_TP] = tp
        if v.get("last") is True:
            hw, lso = v.get("high_watermark"), v.get("log_start_offset")
            o[kernel.F_LAST] = 1
            o[kernel.F_HW] = hw if hw.__class__ is int else NONE
            o[kernel.F_LSO] = lso if lso.__class__ is int else NONE

    def _apply(self, batch: _Batch, validate: bool) -> None:
        """Feed the batch's ops to the compiled feed, growing what it asks for, and
        empty the batch."""
        k, end = 0, batch.n
        m = self.measures
        last: tuple[int, int] | None = None
        while True:
            code, k, arg = kernel.feed(
                batch.ops, batch.recs, k, end, validate, self.S, self.E,
                self.vslot.arr, self.vslot.extra, self.c_tp, self.c_proc.arr, self.c_proc.extra,
                self.c_inv.arr, self.c_inv.extra, self.c_inv.bases, self.c_done, self.c_status,
                self.c_ack.arr, self.c_ack.extra, self.c_drain.arr, self.c_drain.extra,
                self.c_read.arr, self.read_t, self.read_by.arr, self.read_by.extra,
                self.read_offs, self.err_slots, self.err_codes, self.maps, self.maps_x, self.lens,
                self.polled, self.drained, self.drain_end, self.consumers, self.counts,
                m.lat, m.last_ok, m.miss_fail, m.miss_info, self.open_sends, self.open_other,
                self.retired)
            self._events()
            if code == kernel.DONE:
                break
            if (code, k) == last:  # the room it asked for was not enough: a checker bug
                raise RuntimeError(f"the compiled feed stopped twice at op {k} ({code})")
            last = (code, k) if code != kernel.GROW_MAP else None  # a map grows in steps
            if code == kernel.GROW_SLOTS:
                self._grow()
            elif code == kernel.GROW_MAP:
                self._grow_map(arg, batch, k)
            elif code == kernel.FLUSH:  # the events are applied: room for more
                o = batch.ops[k]
                need = kernel.EV_PER * int(o[kernel.F_R1] - o[kernel.F_R0] + 2)
                if need > len(self.E):  # more than it holds at all: one op's records
                    self.E = np.zeros((need, kernel.EV_FIELDS), np.int64)
                if self.S[kernel.S_LATS] == len(m.lat):
                    m.lat = np.concatenate((m.lat, np.zeros(len(m.lat), np.int64)))
                if self.S[kernel.S_READS] == len(self.read_t):
                    more = max(GROW, len(self.read_t) // 8)
                    self.read_t.extend(nones(more))
                    self.read_by.grow(more)
                if self.S[kernel.S_ERRS] == len(self.err_slots):
                    more = max(GROW, len(self.err_slots) // 8)
                    for col in (self.err_slots, self.err_codes):
                        col.frombytes(bytes(more * col.itemsize))
            else:
                raise self._error(arg, batch, k)
        batch.n = batch.nr = 0

    def _grow_map(self, which: int, batch: _Batch, k: int) -> None:
        """Grow the offset map ``which`` (kernel.GROW_MAP's argument) for op ``k``."""
        o = batch.ops[k]
        if which == kernel.VSLOT:
            self.vslot.reserve(int(o[kernel.F_VAL]))
            return
        tp, kind = divmod(which - 1, 3)
        omap = (self.parts[tp].acks, self.parts[tp].polls, self.parts[tp].drains)[kind]
        if kind == kernel.ACKS:
            omap.reserve(int(o[kernel.F_OFF]))
        else:
            for r in range(int(o[kernel.F_R0]), int(o[kernel.F_R1])):
                if batch.recs[r, 0] == tp and omap.reserve(int(batch.recs[r, 1])):
                    break
        kernel.list_set(self.maps, which - 1, omap.arr)
        self.lens[which - 1] = len(omap.arr)

    def _error(self, code: int, batch: _Batch, k: int) -> HistoryError:
        """The HistoryError the compiled feed stopped at op ``k`` for."""
        if code == kernel.E_ENCODED:
            return batch.errors[k]
        o = batch.ops[k]
        p, val, line = int(o[kernel.F_P]), int(o[kernel.F_VAL]), int(o[kernel.F_LINE])
        typ = _TYPE_NAMES[int(o[kernel.F_TY])]
        names = list(self.f_names)
        f = names[int(o[kernel.F_F])] if o[kernel.F_F] >= 0 else "nemesis"
        if code >= kernel.E_PAIRING:
            message = pairing_message(code - kernel.E_PAIRING, p, f, typ, val,
                                      names[open_f(self.open_other, p)])
        elif code == kernel.E_ALREADY_SENT:
            message = (f"send value {val!r} was already sent: values must be unique 64-bit "
                       "integers, from -2**63 + 2**32 (docs/history.md)")
        else:
            message = f"send {typ} of value {val!r} by process {p} has no open invoke"
        return HistoryError(self.source, None if line < 0 else line, message)

    @property
    def c_val(self) -> array[int]:
        """slot -> value, once the feed is done: the value index (:attr:`vslot`) inverted,
        made on first use, a block of it at a time. The feed keeps no column of values
        (8 B a send less while it runs)."""
        if self._c_val is None:
            self._c_val = col = nones(self.slots)
            out, index, block = _view(col), self.vslot.arr, columns.BLOCK
            for lo in range(0, len(index), block):
                slots = index[lo:lo + block]
                held = np.flatnonzero(slots >= 0)
                out[slots[held]] = lo + held
            for value, s in self.vslot.extras().items():
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

    def _grow(self) -> None:
        """Room for more slots in every column, empty (:data:`NONE`, OPEN)."""
        room = int(self.S[kernel.S_ROOM])
        more = max(GROW, room // 8)
        if room + more > NARROW_MAX:  # a slot must fit the value index's int32 cells
            raise HistoryError(self.source, None, f"more than {NARROW_MAX} sends")
        room += more
        for col in (self.c_tp, self.c_status):
            col.frombytes(bytes((room - len(col)) * col.itemsize))  # OPEN is 0; a part is always set
        self.c_done.extend(nones(room - len(self.c_done)))
        for narrow in (self.c_inv, self.c_proc, self.c_ack, self.c_drain, self.c_read):
            narrow.grow(room - len(narrow.arr))
        self.S[kernel.S_ROOM] = room

    def _events(self) -> None:
        """Apply what the compiled feed left in its events buffer, in order, and empty it."""
        n = int(self.S[kernel.S_EVENTS])
        m = self.measures
        for kind, a, b, c, d, e, f, g in self.E[:n].tolist():
            if kind == kernel.EV_CONFLICT:
                self._conflict(a, b, c, d, (_SOURCES[e], f, None if e == 2 else g))
            elif kind == kernel.EV_ODD:
                self._odd_read(a, b, c, d, e)
            elif kind == kernel.EV_GAP:
                self.gaps.append((a, b, c if d else None, e, f))
            elif kind == kernel.EV_BACK:
                self.backwards.append((a, b, c, e, f))
            elif kind == kernel.EV_DUP:
                self.dups.setdefault(a, set()).add(b)
            elif kind == kernel.EV_LAT:
                m.latency(a, b, c, d, e, f)
            elif kind == kernel.EV_BUCKET:
                m.bucket(a, b, c, d)
            else:
                m.window(a, b, c, fail=d, info=e, ongoing=False)
        self.S[kernel.S_EVENTS] = 0

    def _settle(self) -> None:
        """Once the rows are fed: the columns cut to the slots, and what the compiled feed
        kept in arrays given to the partitions and the measures."""
        n = self.slots = int(self.S[kernel.S_SLOTS])
        for col in (self.c_tp, self.c_done, self.c_status):
            del col[n:]
        for narrow in (self.c_proc, self.c_inv, self.c_ack, self.c_drain, self.c_read):
            narrow.cut(n)
        self.S[kernel.S_ROOM] = n
        reads, errs = int(self.S[kernel.S_READS]), int(self.S[kernel.S_ERRS])
        del self.read_t[reads:]
        self.read_by.cut(reads)
        del self.err_slots[errs:]
        del self.err_codes[errs:]
        self.polls, self.drains = self.counts[:3].tolist(), self.counts[3:].tolist()
        for tp, part in enumerate(self.parts):
            part.polled, part.drained = int(self.polled[tp]), int(self.drained[tp])
            complete, t, hw, lso, polled = self.drain_end[tp].tolist()
            part.last_poll = None if polled == NONE else polled
            if complete:
                part.complete, part.drain_time = True, t
                part.hw = None if hw == NONE else hw
                part.lso = None if lso == NONE else lso
        first, last = int(self.S[kernel.S_FIRST_SEND]), int(self.S[kernel.S_LAST_SEND])
        self.measures.first_send = None if first == NONE else first
        self.measures.last_send = last
        self._count_sends()

    def _drain_began(self, v: Any, t: int) -> None:
        """Note the first drain invoke of a partition of the test topic (``v`` its value)."""
        if isinstance(v, dict) and v.get("topic").__class__ is str and v.get("partition").__class__ is int:
            tp = self.tp_ids.get((v["topic"], v["partition"]))
            if tp is not None and self.parts[tp].drain_start is None:
                self.parts[tp].drain_start = t

    def _client_error(self, d: dict[str, Any]) -> None:
        """A client op other than a send that did not end ok, for the report's errors."""
        self.other_errors.append((d["time"], d["f"], d.get("error") or f"{d['type']} (no error)"))

    def table(self, truncated: bool) -> HistoryDigest:
        """The sends and what else a report needs, as columns (:mod:`.table`): the engine's
        last use, after :meth:`finish`. It first lets go of what only the decisions read
        (the offset maps, the drain and read columns), then of each column the table
        takes a copy of once the copy is made, so that the table, made of int64 columns,
        never holds more than the feed did."""
        for part in self.parts:
            part.acks, part.polls, part.drains = OffsetMap(), OffsetMap(), OffsetMap()
        self.maps = self.maps_x = None  # the compiled feed's references to the maps
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
        return HistoryDigest(sends, self.other_errors, self.ops, self.end_time, m.first_send,
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
               broker: BrokerState) -> tuple[Result, QueueFacts]:
        """Decide, once every row has been fed, with the run's broker state."""
        self.timeline, self.replicas = broker.timeline, broker.replicas
        self.client_lines = ClientLines(broker.client_log)
        kernel.flush_measures(self.S, self.E, self.measures.lat)
        self._events()
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
        return build_result(collected, self), queue_facts(collected, self)

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
        off = kernel.extra_get(self.read_offs, s, NONE)
        if off != NONE:
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
        reads = self.c_read.arr
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
                    kind = self._undecided(part, self.c_done[s], ack_at)
                    if kind is not None:
                        _count_undecided(c, "lost-write", tp, kind)
                    else:
                        c.add("lost-write", tp, self.c_inv[s], partial(examples.lost, self, c, s))
                        done = self.c_done[s]
                        if c.first_loss_ns is None or done < c.first_loss_ns:
                            c.first_loss_ns = done
                elif (ack_at != NONE and ack_at != stored and ack_at not in self.dups.get(s, ())
                      and part.drains.get(ack_at) == NONE):
                    # the drain read the value elsewhere, and nothing at the ack's offset
                    kind = self._undecided(part, self.c_done[s], ack_at)
                    if kind is not None:
                        _count_undecided(c, "inconsistent-offsets", tp, kind)
                    else:
                        c.iso_ack_offset.append(s)
            elif status[s] == FAIL and reads[s] != EMPTY:
                c.add("aborted-read", tp, self.c_inv[s], partial(examples.aborted, self, c, s))
            prev = reorders.get(s)
            if prev is not None:  # where it is stored (a lost value is no reordering)
                copies = self.copies(tp, (prev[0], stored))
                cause = provenance.reorder_cause(*copies)
                c.add("nonmonotonic-send", tp, self.c_inv[s],
                      partial(examples.reorder, self, c, prev, s, copies, cause), cause=cause)
        for s, offsets in sorted(self.dups.items()):
            tp = self.c_tp[s]
            at = sorted({self.c_drain[s], *offsets})
            copies = self.copies(tp, at)
            cause = provenance.duplicate_cause(copies)
            c.add("duplicate", tp, self.c_inv[s],
                  partial(examples.duplicate, self, c, s, at, copies, cause), cause=cause)
        for (tp, val), (off, t, by, n) in sorted(self.odd_reads.items()):
            c.add("unexpected-value", tp, t,
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
                if part.complete:
                    polled = ({p} if p != NONE else set()) | _by_kind(extra, "poll")
                    if off >= lso:
                        # every value the drain read there is in it (the log changed under it)
                        drained = {dv} | _by_kind(extra, "drain")
                        for x in sorted(polled - drained):
                            # when the poll ended, or by when: no poll of it ended after the last
                            ended = (self.poll_time(tp, off, x) if part.late(part.last_poll)
                                     else part.last_poll)
                            kind = self._undecided(part, ended, off, read=True)
                            if kind is not None:
                                _count_undecided(c, "phantom-read", tp, kind)
                            else:
                                c.add("phantom-read", tp, examples.read_at(self, tp, off, x),
                                      partial(examples.phantom, self, c, tp, off, x))
                    else:  # each value read below the log start, and gone
                        c.below_log_start += sum(self.vanished(tp, x) for x in polled)
                if len(values) > 1:
                    # An ack is involved when an ack's association is what is wrong: two
                    # acks disagree, or the drain holds another value there (or, with the
                    # drain silent, reads disagree with the ack). An ack the drain agrees
                    # with leaves only reads disagreeing.
                    acked = {a} | _by_kind(extra, "ack")
                    involves_ack = a != NONE and (len(acked) > 1 or (
                        a != dv if dv != NONE else bool(values - acked)))
                    reads_disagree = len({x for x in (p, dv) if x != NONE}
                                         | _by_kind(extra, "poll", "drain")) > 1
                    counted.add((tp, off))
                    c.add("inconsistent-offsets", tp, examples.iso_at(self, tp, off, a, p, extra),
                          partial(examples.iso, self, c, tp, off, a, p, dv, extra, involves_ack,
                                  reads_disagree), iso_rows(involves_ack, reads_disagree))
        for s in c.iso_ack_offset:  # the ack's offset, empty in the drain: once an offset
            tp = self.c_tp[s]
            if (tp, self.c_ack[s]) in counted:
                continue
            counted.add((tp, self.c_ack[s]))
            c.add("inconsistent-offsets", tp, self.c_inv[s], partial(examples.iso_value, self, c, s),
                  iso_rows(True, False))

    def _consumers(self, c: Collected) -> None:
        if self.spec.consumer.mode == "subscribe":  # a group's members: checkers/groups.py
            return
        for tp, p, prev, off, t in self.backwards:
            c.add("nonmonotonic-poll", tp, t,
                  partial(examples.backwards, self, c, tp, p, prev, off, t))
        for tp, p, after, off, t in self.gaps:
            part = self.parts[tp]
            if not part.complete:
                continue
            # a first record comes right after the log start: every partition is
            # assigned from the beginning
            skipped = part.drains.any_between((part.lso or 0) - 1 if after is None else after, off)
            if skipped and part.late(t):
                c.set_aside("poll-skip", tp, late=True)
            elif skipped:
                c.add("poll-skip", tp, t, partial(examples.skip, self, c, tp, p, after, off, t, skipped))

    @staticmethod
    def _undecided(part: Part, ended: int | None, offset: int, read: bool = False) -> str | None:
        """:func:`anomalies.undecided <faultline.checkers.anomalies.undecided>` on the
        columns, for complete ``part``: why its drain cannot decide an instance about an op
        that ended at ``ended`` (an ack; a consumer's read when ``read``) and a record at
        ``offset`` (:data:`NONE`: an ack that gave none), or None."""
        if part.late(ended):
            return AFTER_DRAIN
        lso = part.lso or 0
        if offset == NONE:  # the value may have been anywhere
            return (BELOW_LOG_START if lso > 0 else SHORT_DRAIN if part.short is not None
                    else DRAIN_MISSED if part.hw is not None and part.drained < part.hw - lso
                    else None)
        if offset < lso:
            return BELOW_LOG_START
        # past a short drain's end the record may be there, unread; a read's record not past
        # every replica's log end, where none holds one
        if (part.short is not None and offset >= part.hw  # type: ignore[operator]
                and (not read or part.log_end is None or offset < part.log_end)):
            return SHORT_DRAIN
        if part.missed(offset):
            return DRAIN_MISSED_HELD
        if part.gap(offset):
            return DRAIN_MISSED
        return None

    def vanished(self, tp: int, value: int) -> bool:
        """Whether ``value``, read below partition ``tp``'s log start, is not in its drain
        and not an ok send of it (:meth:`_values` counts those)."""
        s = self.slot(value)
        return s is None or self.c_tp[s] != tp or (self.c_status[s] != OK and self.c_drain[s] == NONE)

    def poll_time(self, tp: int, off: int, value: int) -> int | None:
        """When a consumer read ``value`` at ``off`` of partition ``tp``, where the history
        says (its send's first read was that one), else None."""
        s = self.slot(value)
        if s is None or self.c_tp[s] != tp or self.read_off(s) != off:
            return None
        t, by = self.first_read(s)
        return None if by == -1 else t

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


def _names(numbered: dict[str, int]) -> tuple[Any, Any]:
    """Names numbered 0, 1, ... (in their number's order) as :func:`.scan.scan` reads them:
    their bytes one after another, and where each ends."""
    words = [name.encode() for name in numbered]
    return scan.literal("".join(numbered)), np.cumsum([len(w) for w in words], dtype=np.int64)


def _view(col: array[int], dtype: type[np.generic] = np.int64) -> Any:
    """A column as a numpy array: the column itself, not a copy, so only once the feed is
    done (while a view exists, the column cannot grow)."""
    return np.frombuffer(col, dtype=dtype) if len(col) else np.zeros(0, dtype)


def _count_undecided(c: Collected, name: str, tp: int, kind: str) -> None:
    """Count an instance of ``name`` on ``tp`` that the complete drain cannot decide, by
    :meth:`Engine._undecided`'s ``kind``: unknown, never an anomaly."""
    if kind == BELOW_LOG_START:
        c.below_log_start += 1
    elif kind == DRAIN_MISSED_HELD:
        c.drain_missed += 1  # the drain skipped what every replica holds
    elif kind == DRAIN_MISSED:
        c.drain_gap += 1  # the drain skipped the record there
    else:
        c.set_aside(name, tp, late=kind == AFTER_DRAIN)


def _by_kind(extra: dict[int, list[tuple[str, Any, Any]]], *kinds: str) -> set[int]:
    """The values of an offset's conflicts (:attr:`Engine.conflicts`) that a source of
    ``kinds`` saw there."""
    return {x for x, seen in extra.items() if any(k in kinds for k, _, _ in seen)}


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
