"""The story of each anomaly example, as lines a person reads top to bottom.

The checker writes a story for each example in ``results.json`` (``story``: events
``{time, text}``, ``explanation``: a paragraph); the report shows it as it is. When
the run has observations, the story gains the leader, ISR and HW of the moment the
record was acknowledged; when it has the decoded metadata log (results.json's
``white_box.leader_changes``), the leader and epoch at the acknowledgement and the
election that followed it. An example without a story (a results.json the checker did
not write) has none here: the report shows its own fields only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from faultline.checkers.table import HistoryDigest
from faultline.report import measures as m


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
    """An example's field as a table cell: times in seconds, JSON cut at 240 characters;
    text as it is, but a ``value`` (a value read that no send can carry) quoted, apart
    from the workload's integers."""
    if (key == "time" or key.endswith("_time")) and isinstance(v, int | float) and not isinstance(v, bool):
        return secs(v)
    t = (v if isinstance(v, str) and key != "value"
         else json.dumps(v, separators=(",", ":"), default=str, ensure_ascii=False))
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
    """Shows an anomaly example's story with what the observations add.

    Contract: :meth:`lines` returns the checker's story as lines, with a line giving the
    leader at the acknowledgement when observations cover that moment, and lines from
    ``leader_changes`` (the metadata log's elections: the leader and epoch at the
    acknowledgement, the next election of the partition); an example without a story
    gives no lines.
    """

    def __init__(self, history: HistoryDigest,
                 observations: Mapping[m.Partition, list[dict[str, Any]]],
                 leader_changes: Sequence[Mapping[str, Any]] = ()) -> None:
        self._h = history
        self._obs = observations
        self._stale = {p: m.stale_hw(ss) for p, ss in observations.items()}
        self._changes: dict[int, list[Mapping[str, Any]]] = {}
        for c in leader_changes:
            if isinstance(c.get("partition"), int) and isinstance(c.get("time"), int):
                self._changes.setdefault(c["partition"], []).append(c)

    def lines(self, ex: Mapping[str, Any]) -> list[str]:
        """The example's story, one line per step."""
        out = story_lines(ex.get("story"))
        value = ex.get("value")
        send = self._h.sends.get(value) if isinstance(value, int) else None
        if out and send is not None and send.outcome == "ok" and send.end_time is not None:
            # right after the acknowledgement, where the checker's story says it happened
            at = next((i + 1 for i, line in enumerate(out) if "acknowledged" in line), len(out))
            lead = self.leader_at((send.topic, send.partition), send.end_time)
            extra = ([f"observed at the ack: {lead}"] if lead else []) + self.elections_around(
                send.partition, send.end_time)
            out[at:at] = extra
        return out

    def elections_around(self, partition: int, t: int) -> list[str]:
        """From the metadata log: who led ``partition`` at ``t`` (and since when), and
        the first election after ``t``; [] without leader changes."""
        changes = self._changes.get(partition, [])
        before = [c for c in changes if c["time"] <= t]
        after = [c for c in changes if c["time"] > t and c.get("to") is not None]
        out = []
        if before and before[-1].get("to") is not None:
            c = before[-1]
            out.append(f"metadata log: n{c['to']} led (epoch {c.get('epoch')}) since {secs(c['time'])}")
        if after:
            c = after[0]
            how = {"isr": "from the ISR", "elr": "from the ELR", "unclean": "UNCLEAN, outside ISR and ELR",
                   "last-known-leader": "as last known leader (KIP-966, unclean)"}.get(str(c.get("kind")), "")
            out.append(f"{secs(c['time'])}: n{c['to']} was elected {how} (epoch {c.get('epoch')}; "
                       f"ISR before {c.get('isr_before')}, ELR {c.get('elr_before')})")
        return out

    def leader_at(self, part: m.Partition, t: int) -> str:
        """``leader nX (ISR [..], HW h)`` from the last observation at or before ``t``, or '';
        a HW that was a deposed leader's stale answer (:func:`m.stale_hw`) is told as such."""
        samples = self._obs.get(part, [])
        at = next((i for i, s in enumerate(samples) if s["time"] > t), len(samples)) - 1
        if at < 0:
            return ""
        last, newest = samples[at], self._stale[part][at]
        stale = ("" if newest is None else f" answered under leader epoch {last.get('hw_epoch')}, older "
                 f"than epoch {newest} seen before: a deposed leader's stale answer")
        return f"leader n{last.get('leader')} (ISR {last.get('isr')}, HW {last.get('hw')}{stale})"
