"""The story of each anomaly example, as lines a person reads top to bottom.

The checker writes a story for each example in ``results.json`` (``story``: events
``{time, text}``, ``explanation``: a paragraph); the report shows it as it is. For an
example without one (an older or hand-written results.json) :class:`Storyteller`
tells it from the history: who sent the value when, how the send ended (for an ack:
at which offset), the faults in force or begun after, and what the drained partition
holds at that offset now. Either way, when the run has observations, the story gains
the leader, ISR and HW of the moment the record was acknowledged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from faultline.harness import report_measures as m

#: How many faults a story names after the moment that matters.
STORY_FAULTS = 5


def secs(ns: float | None) -> str:
    """ns since the run started as seconds, e.g. ``12.345 s``."""
    return "?" if ns is None else f"{ns / 1e9:.3f} s"


def text(x: Any) -> str:
    """Any JSON value as short text: strings as they are, small flat objects as ``k: v``."""
    if isinstance(x, str):
        return x
    if isinstance(x, dict) and len(x) <= 3 and all(isinstance(v, str | int | float) for v in x.values()):
        return ", ".join(f"{k}: {v}" for k, v in x.items())
    return json.dumps(x, separators=(",", ": "), default=str)


def cell(key: str, v: Any) -> str:
    """An example's field as a table cell: times in seconds, JSON cut at 240 characters."""
    if (key == "time" or key.endswith("_time")) and isinstance(v, int | float) and not isinstance(v, bool):
        return secs(v)
    t = v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), default=str)
    return t if len(t) <= 240 else t[:237] + "..."


def story_lines(x: Any) -> list[str]:
    """A checker story as lines: a string, or events ``{time, text}`` (time in ns or None)."""
    if x is None or x == "":
        return []
    if isinstance(x, list):
        return [(f"{secs(e['time'])}: " if isinstance(e.get("time"), int) else "") + str(e.get("text", ""))
                if isinstance(e, dict) and "text" in e else text(e) for e in x]
    if isinstance(x, dict):
        return [f"{k}: {text(v)}" for k, v in x.items()]
    return [str(x)]


class Storyteller:
    """Tells an anomaly example's story from the history and the observations.

    Contract: :meth:`lines` returns the checker's story when the example has one and
    otherwise tells it from the history (see the module doc); in both cases a line with
    the leader at the acknowledgement is added when observations cover that moment.
    """

    def __init__(self, history: m.HistorySummary, faults: Sequence[m.FaultWindow],
                 observations: Mapping[m.Partition, list[dict[str, Any]]]) -> None:
        self._h = history
        self._faults = faults
        self._obs = observations
        self._by_value: dict[m.Partition, dict[Any, list[int]]] = {}

    def lines(self, ex: Mapping[str, Any]) -> list[str]:
        """The example's story, one line per step."""
        told = story_lines(ex.get("story"))
        out = told or self.tell(ex)
        value = ex.get("value")
        send = self._h.sends.get(value) if isinstance(value, int) else None
        if send is not None and send.outcome == "ok" and send.end_time is not None:
            lead = self.leader_at((send.topic, send.partition), send.end_time)
            if lead and told:
                # right after the acknowledgement, where the checker's story says it happened
                at = next((i + 1 for i, line in enumerate(out) if "acknowledged" in line), len(out))
                out.insert(at, f"observed at the ack: {lead}")
        return out

    def leader_at(self, part: m.Partition, t: int) -> str:
        """``leader nX (ISR [..], HW h)`` from the last observation at or before ``t``, or ''."""
        last = None
        for s in self._obs.get(part, ()):
            if s["time"] > t:
                break
            last = s
        if last is None:
            return ""
        return f"leader n{last.get('leader')} (ISR {last.get('isr')}, HW {last.get('hw')})"

    def tell(self, ex: Mapping[str, Any]) -> list[str]:
        """The story from the history alone, for an example the checker told nothing about."""
        value = ex.get("value")
        send = self._h.sends.get(value) if isinstance(value, int) else None
        topic = str(ex.get("topic", send.topic if send else ""))
        partition = ex.get("partition", send.partition if send else None)
        out: list[str] = []
        after = ex.get("time") if isinstance(ex.get("time"), int) else None
        if send is not None:
            out.append(f"{secs(send.invoke_time)}: process {send.process} sent value {send.value} "
                       f"to {send.topic}/{send.partition}")
            if send.outcome == "ok":
                at = f" at offset {send.offset}" if send.offset is not None and send.offset >= 0 else ""
                lead = self.leader_at((send.topic, send.partition), send.end_time or 0)
                out.append(f"{secs(send.end_time)}: acknowledged{at}" + (f" by {lead}" if lead else ""))
            elif send.outcome is None:
                out.append("the send never completed")
            else:
                what = "failed" if send.outcome == "fail" else "ended unknown (info)"
                out.append(f"{secs(send.end_time)}: {what}" + (f": {send.error}" if send.error else ""))
            after = send.end_time if send.end_time is not None else send.invoke_time
        elif isinstance(value, int):
            out.append(f"no send in the history carried value {value}")
        if after is not None:
            out += self._faults_after(after)
        if isinstance(partition, int):
            offset = ex.get("offset", send.offset if send else None)
            out.append(self._now((topic, partition), offset if isinstance(offset, int) else None, value))
        return out

    def _faults_after(self, t: int) -> list[str]:
        later = [w for w in self._faults if w.end is None or w.end >= t]
        out = []
        for w in later[:STORY_FAULTS]:
            nodes = f" of node(s) {', '.join(map(str, w.nodes))}" if w.nodes else ""
            end = f"until {secs(w.end)}" if w.end is not None else "never healed"
            out.append(f"{secs(w.start)}: {'already in force: ' if w.start < t else ''}{w.f}{nodes}, {end}")
        if len(later) > STORY_FAULTS:
            out.append(f"... and {len(later) - STORY_FAULTS} more faults")
        return out or ["no fault was in force or began after that"]

    def _now(self, part: m.Partition, offset: int | None, value: Any) -> str:
        d = self._h.drains.get(part)
        if d is None:
            return f"{part[0]}/{part[1]} was never drained"
        if not d.complete:
            return "the drain of this partition never completed, so its contents are not known"
        parts: list[str] = []
        if offset is not None and offset >= 0:
            if offset in d.records:
                held = d.records[offset]
                same = " (this value)" if held == value else ""
                parts.append(f"offset {offset} holds value {held}{same}")
            elif d.log_start_offset is not None and offset < d.log_start_offset:
                parts.append(f"offset {offset} is below the log start {d.log_start_offset}")
            elif d.high_watermark is not None and offset >= d.high_watermark:
                parts.append(f"offset {offset} is past the high watermark {d.high_watermark}: truncated")
            else:
                parts.append(f"offset {offset} holds nothing")
        if isinstance(value, int):
            if part not in self._by_value:
                self._by_value[part] = d.offsets_of()
            where = self._by_value[part].get(value)
            parts.append(f"value {value} is at offset(s) {', '.join(map(str, where))}" if where
                         else f"value {value} is nowhere in the partition")
        return "the drain shows " + ("; ".join(parts) if parts else f"{len(d.records)} records")
