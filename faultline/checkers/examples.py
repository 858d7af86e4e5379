"""The example objects of results.json, one function per anomaly type.

Each takes the engine (for what the history said) and the Collected (for the fault
windows and what is permitted), and returns the example's fields plus ``story`` and
``explanation``; see ``faultline/schemas/results.schema.json`` for the keys. The
engine builds them lazily, only for the first MAX_ANOMALY_EXAMPLES of each type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from faultline.checkers import explain, provenance
from faultline.checkers.client_log import ClientLines
from faultline.checkers.columns import NONE, Part
from faultline.checkers.guarantees import culprit
from faultline.checkers.verdict import Collected
from faultline.checkers.whitebox import replicas_at


class Cells(Protocol):
    """A column read by slot (an int64 array, or :class:`~faultline.checkers.columns.Narrow`)."""

    def __getitem__(self, s: int, /) -> int: ...


class Engine(Protocol):
    """What an example reads of the engine that fed the rows: per-value columns by slot
    (the partition, value, process, ack offset, completion time, first drain offset,
    first read's time, offset and reader), the slot of each value, every
    topic-partition, the client log's lines, and the facts it assembles for stories."""

    @property
    def parts(self) -> Sequence[Part]: ...
    def slot(self, value: int) -> int | None: ...
    def shown(self, value: int) -> explain.Value: ...
    @property
    def c_tp(self) -> Sequence[int]: ...
    @property
    def c_val(self) -> Sequence[int]: ...
    @property
    def c_proc(self) -> Cells: ...
    @property
    def c_ack(self) -> Cells: ...
    @property
    def c_inv(self) -> Cells: ...
    @property
    def c_done(self) -> Sequence[int]: ...
    @property
    def c_drain(self) -> Cells: ...
    def read_off(self, s: int) -> int: ...
    def first_read(self, s: int) -> tuple[int, int]: ...
    @property
    def client_lines(self) -> ClientLines: ...
    def send_facts(self, s: int) -> explain.SendFacts: ...
    def copies(self, tp: int, offsets: Sequence[int]) -> list[provenance.Copy | None]: ...
    def drain_facts(self, tp: int, offset: int | None, value: int | None) -> explain.DrainFacts: ...
    def where(self, tp: int) -> dict[str, Any]: ...


def read_at(e: Engine, tp: int, off: int, val: int) -> int:
    """When ``val`` was first read at offset ``off`` of partition ``tp``, where a phantom
    read's window opens; where no consumer's read says, at its send (or the run's start)."""
    s = e.slot(val)
    if s is None:
        return 0
    if e.read_off(s) == off and e.first_read(s)[1] != -1:
        return e.first_read(s)[0]
    return e.c_inv[s]


def iso_at(e: Engine, tp: int, off: int, a: int, p: int,
           extra: dict[int, list[tuple[str, Any, Any]]]) -> int:
    """Where an inconsistent offset's window opens: at the earliest of its acks' sends
    and its reads (the drain's, the latest, when nothing else says)."""
    times = [int(t) for seen in extra.values() for _, t, _ in seen if t is not None]
    acked = [a] + [x for x, seen in extra.items() if any(k == "ack" for k, _, _ in seen)]
    times += [e.c_inv[s] for x in acked if x != NONE and (s := e.slot(x)) is not None]
    if p != NONE:
        times.append(read_at(e, tp, off, p))
    return min(times, default=e.parts[tp].drain_time or 0)


def lost(e: Engine, c: Collected, s: int) -> dict[str, Any]:
    f = e.send_facts(s)
    tp = e.c_tp[s]
    story = _with_replicas(e, tp, f.offset, explain.lost_write(
        f, e.drain_facts(tp, f.offset, f.value), c.faults, e.parts[tp].drain_time,
        c.permissions.reason("lost-write", tp, e.c_inv[s])))
    return {**e.where(tp), "value": f.value, "offset": f.offset, "time": f.end_time,
            "invoke_time": f.invoke_time, "process": f.process, **c.tell(story)}


def _with_replicas(e: Engine, tp: int, offset: int | None,
                   story: explain.Story) -> explain.Story:
    """The story, ending with what the replicas' logs hold at ``offset`` when the run
    has ``replicas.jsonl``."""
    reps = e.parts[tp].replicas
    if not reps or offset is None:
        return story
    return [*story[0], {"time": None, "text": replicas_at(reps, offset)}], story[1]


def _attributed(e: Engine, copies: list[provenance.Copy | None], cause: str,
                sends: Sequence[explain.SendFacts]) -> tuple[explain.Attribution, dict[str, Any]]:
    """The provenance of a duplicate's or a reordering's copies, and the client log's lines
    of the sending process while its sends were open: for the story, and as example fields."""
    who, why = culprit(cause)
    start = min(f.invoke_time for f in sends)
    end = max(f.end_time if f.end_time is not None else f.invoke_time for f in sends)
    lines = e.client_lines.around(sends[0].process, start, end)
    a = explain.Attribution(copies, cause, who, why, lines)
    return a, {"copies": [None if x is None else x.to_json() for x in copies], "cause": cause,
               "culprit": who, "client_events": [dict(x) for x in lines]}


def reorder(e: Engine, c: Collected, prev: tuple[int, int], s: int,
            copies: list[provenance.Copy | None], cause: str) -> dict[str, Any]:
    """``copies``: the records at the two offsets, as the engine read them to count it;
    ``cause``: what it counted them as (:func:`provenance.reorder_cause`)."""
    first, second = e.send_facts(prev[1]), e.send_facts(s)
    second_at = e.c_drain[s]
    a, fields = _attributed(e, copies, cause, [first, second])
    story = explain.nonmonotonic_send(first, second, prev[0], second_at,
                                      c.permissions.reason("nonmonotonic-send", e.c_tp[s], e.c_inv[s]), a)
    return {**e.where(e.c_tp[s]), "process": first.process,
            "values": [first.value, second.value], "offsets": [prev[0], second_at],
            "time": second.invoke_time, **fields, **c.tell(story)}


def aborted(e: Engine, c: Collected, s: int) -> dict[str, Any]:
    f = e.send_facts(s)
    t, by = e.first_read(s)
    reader = "the drain" if by == -1 else f"consumer {by}"
    off = e.read_off(s)
    story = explain.aborted_read(f, t, off, reader)
    return {**e.where(e.c_tp[s]), "value": f.value, "offset": off,
            "time": t, "process": f.process, "error": f.error,
            "reader": reader, **c.tell(story)}


def duplicate(e: Engine, c: Collected, s: int, offsets: list[int],
              copies: list[provenance.Copy | None], cause: str) -> dict[str, Any]:
    """``offsets``: every offset the value was read at, sorted; ``copies``: the records
    there, as the engine read them to count it; ``cause``: what it counted them as
    (:func:`provenance.duplicate_cause`)."""
    f = e.send_facts(s)
    a, fields = _attributed(e, copies, cause, [f])
    story = explain.duplicate(f, f.value, offsets, f.topic, f.partition,
                              c.permissions.reason("duplicate", e.c_tp[s], e.c_inv[s]), a)
    return {**e.where(e.c_tp[s]), "value": f.value, "offsets": offsets,
            "time": f.end_time if f.end_time is not None else f.invoke_time, **fields,
            **c.tell(story)}


def unexpected(e: Engine, c: Collected, tp: int, val: int, off: int, t: int, by: int,
                n: int) -> dict[str, Any]:
    s = e.slot(val)
    value = e.shown(val)
    reader = "the drain" if by == -1 else f"consumer {by}"
    story = explain.unexpected_value(e.parts[tp].topic, e.parts[tp].partition, value,
                                     off, t, reader, None if s is None else
                                     e.send_facts(s))
    return {**e.where(tp), "value": explain.raw(value), "offset": off, "time": t, "reader": reader,
            "reads": n, **c.tell(story)}


def phantom(e: Engine, c: Collected, tp: int, off: int, val: int) -> dict[str, Any]:
    s = e.slot(val)
    t = by = None
    if s is not None and e.read_off(s) == off and e.first_read(s)[1] != -1:
        t, by = e.first_read(s)
    part, value = e.parts[tp], e.shown(val)
    story = _with_replicas(e, tp, off, explain.phantom_read(
        part.topic, part.partition, value, off, t, by, None if s is None else e.send_facts(s),
        e.drain_facts(tp, off, val), c.faults, part.drain_time,
        c.permissions.reason("phantom-read", tp, read_at(e, tp, off, val))))
    return {**e.where(tp), "value": explain.raw(value), "offset": off, "time": t, "process": by,
            **c.tell(story)}


def sighting(e: Engine, tp: int, source: str, off: int, val: int) -> dict[str, Any]:
    """One source's association of ``off`` with ``val``; its ``value`` as a story takes
    it (:func:`explain.raw` gives results.json's)."""
    s = e.slot(val)
    t: Any = None
    p: Any = None
    if source == "ack" and s is not None:
        t, p = e.c_done[s], e.c_proc[s]
    elif source == "poll" and s is not None and e.read_off(s) == off:
        t, p = e.first_read(s)
        p = None if p == -1 else p
    elif source == "drain":
        t = e.parts[tp].drain_time
    return {"source": source, "value": e.shown(val), "offset": off, "time": t, "process": p}


def iso(e: Engine, c: Collected, tp: int, off: int, a: int, p: int, dv: int,
         extra: dict[int, list[tuple[str, Any, Any]]], involves_ack: bool,
         reads_disagree: bool) -> dict[str, Any]:
    sightings = [sighting(e, tp, k, off, x)
                 for k, x in (("ack", a), ("poll", p), ("drain", dv)) if x != NONE]
    for x, seen in extra.items():
        for source, t, proc in seen:
            sightings.append({"source": source, "value": e.shown(x), "offset": off, "time": t,
                              "process": proc})
    story = _with_replicas(e, tp, off, explain.inconsistent_offsets(
        e.parts[tp].topic, e.parts[tp].partition, off, sightings,
        e.drain_facts(tp, off, None), e.parts[tp].drain_time,
        c.permissions.iso_reason(involves_ack, reads_disagree, tp, iso_at(e, tp, off, a, p, extra))))
    times = [x["time"] for x in sightings if x["time"] is not None]
    values = sorted({x["value"] for x in sightings}, key=explain.order)
    return {**e.where(tp), "offset": off, "values": [explain.raw(x) for x in values],
            "involves_ack": involves_ack, "reads_disagree": reads_disagree,
            "sightings": [{**x, "value": explain.raw(x["value"])} for x in sightings],
            "time": min(times) if times else None,
            **c.tell(story)}


def iso_value(e: Engine, c: Collected, s: int) -> dict[str, Any]:
    tp, val, ack, drained = e.c_tp[s], e.c_val[s], e.c_ack[s], e.c_drain[s]
    sightings = [sighting(e, tp, "ack", ack, val), sighting(e, tp, "drain", drained, val)]
    part = e.parts[tp]
    story = _with_replicas(e, tp, ack, explain.inconsistent_offsets(
        part.topic, part.partition, ack, sightings, e.drain_facts(tp, ack, val), part.drain_time,
        c.permissions.iso_reason(True, False, tp, e.c_inv[s])))
    return {**e.where(tp), "offset": ack, "values": [val], "value": val,
            "offsets": [ack, drained], "involves_ack": True, "reads_disagree": False,
            "sightings": sightings,  # of a send's value: an integer, as results.json holds it
            "time": e.c_done[s], **c.tell(story)}


def backwards(e: Engine, c: Collected, tp: int, p: int, prev: int, off: int,
               t: int) -> dict[str, Any]:
    story = explain.nonmonotonic_poll(p, off, prev, t, c.faults,
                                      c.permissions.reason("nonmonotonic-poll", tp, t))
    return {**e.where(tp), "process": p, "offset": off, "previous": prev, "time": t,
            **c.tell(story)}


def skip(e: Engine, c: Collected, tp: int, p: int, prev: int | None, off: int, t: int,
          skipped: list[int]) -> dict[str, Any]:
    story = explain.poll_skip(p, prev, off, t, skipped, c.permissions.reason("poll-skip", tp, t))
    return {**e.where(tp), "process": p, "previous": prev, "offset": off, "time": t,
            "skipped": skipped[:10], "skipped_count": len(skipped), **c.tell(story)}
