"""Stories a person can follow, one per anomaly example.

Each function returns ``(story, explanation)``: ``story`` is a list of events
``{"time": ns or None, "text": str}`` in time order (what happened to the record:
sent when, acknowledged at which offset, which faults came after, what the partition
holds now), ``explanation`` one paragraph saying what the anomaly is and whether the
guarantees permit it. Pure: plain facts in, plain data out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faultline.checkers.provenance import Copy

Event = dict[str, Any]
Story = tuple[list[Event], str]

#: Faults listed after the moment that matters; more are summarised in one line.
STORY_FAULTS = 5


@dataclass(frozen=True, slots=True)
class SendFacts:
    """What the history says about one send; ``outcome`` is ok, fail, info or open."""

    value: int
    topic: str
    partition: int
    process: int
    invoke_time: int
    end_time: int | None
    outcome: str
    offset: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Foreign:
    """A value read that no send can carry, as the history holds it: a foreign
    record's text or null, or an integer outside a send's range. A story shows it as
    JSON (``"abc"``, ``null``); results.json holds :attr:`raw` (:func:`raw`)."""

    raw: str | int | None

    def __str__(self) -> str:
        return json.dumps(self.raw, ensure_ascii=False)


#: A value as a story takes it: a send's integer, or a foreign one.
Value = int | Foreign


def raw(value: Value | None) -> str | int | None:
    """A value as results.json holds it: the integer, or what the history held."""
    return value.raw if isinstance(value, Foreign) else value


def order(value: Value) -> tuple[bool, Any]:
    """Integers ascending, then foreign values by their JSON."""
    return (True, str(value)) if isinstance(value, Foreign) else (False, value)


@dataclass(frozen=True, slots=True)
class DrainFacts:
    """What the final drain says about one offset and one value of a partition."""

    complete: bool
    high_watermark: int | None
    log_start_offset: int | None
    holds: Value | None  # the value the drain has at the offset in question, if any
    offsets_of_value: Sequence[int]  # where the drain has the value in question


@dataclass(frozen=True, slots=True)
class Attribution:
    """Who wrote the copies of a duplicate (or two reordered sends), as the replicas'
    batches say (``copies``, None where they do not), the ``cause`` that makes, its
    ``culprit`` (broker, client or unknown) and ``why``, and the client log's lines of
    the sending process meanwhile (``client_lines``)."""

    copies: Sequence[Copy | None]
    cause: str
    culprit: str
    why: str
    client_lines: Sequence[Mapping[str, Any]]


def _attribution_events(a: Attribution, offsets: Sequence[int]) -> list[Event]:
    """A line per copy, then the client's own lines, each at its time."""
    out: list[Event] = []
    for off, copy in zip(offsets, a.copies, strict=True):
        text = copy.text() if copy is not None else (
            f"offset {off}: the replicas disagree on who wrote it, or none of their batches "
            "with a producer id holds it")
        out.append({"time": None, "text": "the replicas' logs hold " + text})
    for line in a.client_lines:
        message = str(line.get("message", ""))
        if message.startswith("[thrd:") and "]: " in message:  # librdkafka's thread tag
            message = message.split("]: ", 1)[1]
        out.append({"time": line.get("time"), "text": f"client log of process {line.get('process')} "
                                                      f"({line.get('facility')}): {message}"})
    return out


def _blame(a: Attribution, permitted: str | None) -> str:
    """Who wrote the copies; that the culprit broke a promise only where one was broken
    (``permitted`` None)."""
    if a.culprit == "unknown":
        return f"Who wrote the copies is not known: {a.why}. "
    if permitted:
        return f"As the replicas' batches show, {a.why}. "
    return {"broker": "The broker broke it (a Kafka bug): ",
            "client": "The client broke it (a violation of idempotence by the client under "
                      "test): "}[a.culprit] + a.why + ". "


def secs(t: int | None) -> str:
    """A history time (ns) as seconds since the run started, for a person."""
    return "?" if t is None else f"{t / 1e9:.3f}s"


def send_events(s: SendFacts) -> list[Event]:
    """The send's invoke and completion."""
    out = [{"time": s.invoke_time,
            "text": f"process {s.process} sent value {s.value} to {s.topic}/{s.partition}"}]
    if s.outcome == "ok":
        at = "" if s.offset is None else f" at offset {s.offset}"
        out.append({"time": s.end_time, "text": f"acknowledged{at}"})
    elif s.outcome == "open":
        out.append({"time": None, "text": "the send never completed"})
    else:
        what = "failed (certainly not written)" if s.outcome == "fail" else "ended unknown (info)"
        err = f": {s.error}" if s.error else ""
        out.append({"time": s.end_time, "text": f"{what}{err}"})
    return out


def fault_events(after: int, faults: Sequence[Mapping[str, Any]]) -> list[Event]:
    """Faults in force at ``after`` or begun later, at most STORY_FAULTS of them."""
    relevant = [f for f in faults if f["end"] is None or f["end"] >= after]
    out: list[Event] = []
    for f in relevant[:STORY_FAULTS]:
        nodes = f" of node(s) {', '.join(map(str, f['nodes']))}" if f["nodes"] else ""
        end = "never healed" if f["end"] is None else f"until {secs(f['end'])}"
        when = "already in force: " if f["start"] < after else ""
        out.append({"time": f["start"], "text": f"{when}{f['f']}{nodes}, {end}"})
    if len(relevant) > STORY_FAULTS:
        out.append({"time": None, "text": f"... and {len(relevant) - STORY_FAULTS} more faults"})
    if not relevant:
        out.append({"time": None, "text": "no fault was in force or began after that"})
    return out


def drain_text(d: DrainFacts, offset: int | None, value: Value | None) -> str:
    """What the partition holds now at ``offset``, and where ``value`` is."""
    if not d.complete:
        return "the drain of this partition never completed, so its contents are not known"
    parts = []
    if offset is not None:
        if d.holds is not None:
            same = " (this value)" if d.holds == value else ""
            parts.append(f"offset {offset} holds value {d.holds}{same}")
        elif d.log_start_offset is not None and offset < d.log_start_offset:
            parts.append(f"offset {offset} is below the log start {d.log_start_offset}")
        elif d.high_watermark is not None and offset >= d.high_watermark:
            parts.append(f"offset {offset} is at or past the high watermark "
                         f"{d.high_watermark} it read to")
        else:
            parts.append(f"offset {offset} holds nothing")
    if value is not None:
        if d.offsets_of_value:
            where = ", ".join(map(str, d.offsets_of_value))
            parts.append(f"value {value} is at offset(s) {where}")
        else:
            parts.append(f"value {value} is nowhere in the partition")
    return "the drain shows " + "; ".join(parts)


def _finish(events: list[Event], d: DrainFacts, offset: int | None, value: Value | None,
            end_time: int | None) -> list[Event]:
    events.append({"time": end_time, "text": drain_text(d, offset, value)})
    return events


def _verdict(permitted: str | None) -> str:
    return (f"Permitted: {permitted}." if permitted
            else "Not permitted by the guarantees for this config and these faults.")


def lost_write(s: SendFacts, d: DrainFacts, faults: Sequence[Mapping[str, Any]],
               drain_time: int | None, permitted: str | None) -> Story:
    """A value acknowledged but absent from the completed drain."""
    ev = send_events(s) + fault_events(s.end_time or s.invoke_time, faults)
    _finish(ev, d, s.offset, s.value, drain_time)
    at = f" at offset {s.offset}" if s.offset is not None else ""
    return ev, (f"Value {s.value} was acknowledged{at} at {secs(s.end_time)} but is not in "
                f"{s.topic}/{s.partition} after the run: {drain_text(d, s.offset, s.value)}. "
                + _verdict(permitted))


def phantom_read(topic: str, partition: int, value: Value, offset: int, time: int | None,
                 process: int | None, send: SendFacts | None, d: DrainFacts,
                 faults: Sequence[Mapping[str, Any]], drain_time: int | None,
                 permitted: str | None) -> Story:
    """A polled record (offset, value) that the completed drain does not hold.

    ``time`` and ``process`` are the poll's, None when the history does not say which
    poll it was (the faults are then those from the run's start).
    """
    ev = send_events(send) if send else []
    if process is None or time is None:
        ev.append({"time": None, "text": f"a consumer polled value {value} at offset {offset} "
                                         "(which consumer, and when, is not known)"})
    else:
        ev.append({"time": time,
                   "text": f"consumer {process} polled value {value} at offset {offset}"})
    ev += fault_events(time or 0, faults)
    _finish(ev, d, offset, value, drain_time)
    return ev, (f"A consumer read value {value} at offset {offset} of {topic}/{partition}, "
                f"a record the partition no longer holds: {drain_text(d, offset, value)}. "
                "Consumers only see records below the high watermark, which are committed. "
                + _verdict(permitted))


def inconsistent_offsets(topic: str, partition: int, offset: int | None,
                         sightings: Sequence[Mapping[str, Any]], d: DrainFacts,
                         drain_time: int | None, permitted: str | None) -> Story:
    """An offset with two values (or a value acked at an offset the drain disagrees with)."""
    ev: list[Event] = []
    for s in sightings:
        who = f" by process {s['process']}" if s.get("process") is not None else ""
        ev.append({"time": s.get("time"),
                   "text": f"{s['source']}{who}: value {s['value']} at offset {s['offset']}"})
    ev.sort(key=lambda e: (e["time"] is None, e["time"] or 0))
    values = sorted({s["value"] for s in sightings}, key=order)
    _finish(ev, d, offset, None, drain_time)
    what = (f"Offset {offset} of {topic}/{partition} was associated with values "
            f"{', '.join(map(str, values))}" if len(values) > 1 else
            f"Value {values[0]} was acknowledged at an offset where the drain does not hold it")
    return ev, f"{what} ({', '.join(sorted({s['source'] for s in sightings}))}). " + _verdict(
        permitted)


def duplicate(s: SendFacts | None, value: int, offsets: Sequence[int], topic: str,
              partition: int, permitted: str | None, a: Attribution) -> Story:
    """One value stored at more than one offset in the drain, and who wrote each copy."""
    extra = _attribution_events(a, offsets)
    ev = (send_events(s) if s else []) + [e for e in extra if e["time"] is not None]
    ev.sort(key=lambda e: (e["time"] is None, e["time"] or 0))
    ev.append({"time": None, "text": f"the drain has value {value} at offsets "
                                      f"{', '.join(map(str, offsets))}"})
    ev += [e for e in extra if e["time"] is None]
    return ev, (f"Value {value} is stored {len(offsets)} times in {topic}/{partition} (offsets "
                f"{', '.join(map(str, offsets))}). " + _blame(a, permitted) + _verdict(permitted))


def aborted_read(s: SendFacts, read_time: int | None, read_offset: int | None,
                 reader: str) -> Story:
    """A value whose send failed (certainly not written) that was read."""
    ev = send_events(s)
    ev.append({"time": read_time, "text": f"{reader} read value {s.value} at offset {read_offset}"})
    ev.sort(key=lambda e: (e["time"] is None, e["time"] or 0))
    return ev, (f"The send of value {s.value} failed ({s.error or 'no error named'}), which "
                f"means it was certainly not written, yet {reader} read it. Never permitted: "
                "either the client reported a failure for a write that happened, or the "
                "harness classified an indeterminate error as a failure.")


def unexpected_value(topic: str, partition: int, value: Value, offset: int, time: int,
                     reader: str, send: SendFacts | None) -> Story:
    """A value read that no send to this partition carried (before it was read)."""
    ev: list[Event] = send_events(send) if send else []
    ev.append({"time": time, "text": f"{reader} read value {value} at offset {offset} "
                                     f"of {topic}/{partition}"})
    ev.sort(key=lambda e: (e["time"] is None, e["time"] or 0))
    if isinstance(value, Foreign):
        why = ("no send can carry it (the workload writes decimal integers): another "
               "producer wrote to the topic, or the record was corrupted")
    elif send is None:
        why = "no send in the history carried it (stale data on the topic, or corruption)"
    elif (send.topic, send.partition) != (topic, partition):
        why = f"its send went to {send.topic}/{send.partition}"
    else:
        why = f"it was read before its send was invoked at {secs(send.invoke_time)}"
    return ev, f"Value {value} was read from {topic}/{partition} but {why}. Never permitted."


def nonmonotonic_send(first: SendFacts, second: SendFacts, first_at: int, second_at: int,
                      permitted: str | None, a: Attribution) -> Story:
    """Two ok sends of one producer to one partition stored in the opposite order, and
    who wrote each."""
    extra = _attribution_events(a, [first_at, second_at])
    ev = send_events(first) + send_events(second) + [e for e in extra if e["time"] is not None]
    ev.sort(key=lambda e: (e["time"] is None, e["time"] or 0))
    ev += [e for e in extra if e["time"] is None]
    return ev, (f"Process {first.process} sent value {first.value} before value "
                f"{second.value}, but they are stored at offsets {first_at} and {second_at}. "
                + _blame(a, permitted) + _verdict(permitted))


def nonmonotonic_poll(process: int, offset: int, previous: int, time: int,
                      faults: Sequence[Mapping[str, Any]], permitted: str | None) -> Story:
    """A consumer got an offset at or below one it already got."""
    ev = [{"time": time, "text": f"consumer {process} got offset {offset} after offset "
                                 f"{previous}"}]
    return ev + fault_events(time, faults)[:2], (
        f"Consumer {process} went back from offset {previous} to {offset} without being "
        "reassigned. " + _verdict(permitted))


def poll_skip(process: int, previous: int | None, offset: int, time: int, skipped: Sequence[int],
              permitted: str | None) -> Story:
    """A consumer's successive records skipped offsets the drain holds (``previous``
    None: its first record of the partition, where it read from the log start)."""
    shown = ", ".join(map(str, skipped[:10])) + (" ..." if len(skipped) > 10 else "")
    after = (f"right after offset {previous}" if previous is not None else
             "as its first record of the partition, which it reads from the log start")
    ev: list[Event] = [{"time": time, "text": f"consumer {process} got offset {offset} {after}"},
          {"time": None, "text": f"the drain holds records at {shown}"}]
    return ev, (f"Consumer {process} skipped {len(skipped)} offset(s) that hold records. "
                + _verdict(permitted))
