"""What a report draws that the checker does not measure, from the stored history.

The checker's ``measures`` (results.json, or the checker run in memory when a run
has none: :func:`faultline.report.page.load_run`) give the fault windows, total
acknowledged throughput, latency percentiles and unavailability windows; this module
reads them into the report's types (:func:`fault_windows`, :func:`total_throughput`,
:func:`percentiles`, :func:`availability`) and computes from ``history.jsonl`` only
what they lack: every send with its outcome (for the latency scatter and the anomaly
stories), errors by kind, per-partition throughput and the span of the sends.

It is pure: ops and JSON in, plain data out. It imports no Kafka client, no cluster
code and no plotting library, so it can be tested with hand-made rows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from faultline.checkers.measures import BUCKET_NS
from faultline.history import NEMESIS

Partition = tuple[str, int]


class Send(NamedTuple):
    """One send: its invoke and, when it completed, how (``outcome`` None while open).

    A NamedTuple, not a dataclass: a long run has hundreds of thousands of them.
    """

    process: int
    value: Any
    topic: str
    partition: int
    invoke_time: int
    end_time: int | None = None
    outcome: str | None = None
    offset: int | None = None
    error: str | None = None

    @property
    def latency(self) -> int | None:
        """ns from invoke to completion, None if it never completed."""
        return None if self.end_time is None else self.end_time - self.invoke_time


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """A fault in force from ``start`` to ``end`` (ns; None: never healed in the history)."""

    f: str
    start: int
    end: int | None
    nodes: tuple[Any, ...] = ()
    detail: str = ""


@dataclass(slots=True)
class HistorySummary:
    """What the report needs from one pass over a history, beyond the checker's measures.

    ``sends`` is keyed by the send's value (unique within a run, docs/history.md);
    ``errors`` holds (time, f, kind) of every client completion that was not ok;
    ``first_send`` / ``last_send`` bound the sends: the first send invoke and the
    last send op (the span availability is measured over).
    """

    sends: dict[Any, Send] = field(default_factory=dict)
    errors: list[tuple[int, str, str]] = field(default_factory=list)
    end_time: int = 0
    first_send: int | None = None
    last_send: int = 0
    ops: int = 0


def summarize(rows: Iterable[Mapping[str, Any]]) -> HistorySummary:
    """One pass over history rows (``faultline.history.iter_rows``, in index order)."""
    s = HistorySummary()
    open_sends: dict[tuple[Any, Any], tuple[int, Any]] = {}  # (process, value) -> (time, value)
    sends, errors = s.sends, s.errors
    n = t = 0
    for d in rows:
        n += 1
        t, process, typ, f = d["time"], d["process"], d["type"], d["f"]
        if process == NEMESIS:
            continue
        v = d.get("value")
        if f == "send" and isinstance(v, dict):
            key = (process, v.get("value"))
            s.last_send = t
            if s.first_send is None:
                s.first_send = t
            if typ == "invoke":
                open_sends[key] = (t, v)
                continue
            opened = open_sends.pop(key, None)
            if opened is None:
                continue
            offset = v.get("offset")
            sends[key[1]] = Send(process, key[1], str(v.get("topic", "")), int(v.get("partition", -1)),
                                 opened[0], t, typ, offset if isinstance(offset, int) else None,
                                 d.get("error"))
        if typ == "fail" or typ == "info":
            errors.append((t, f, d.get("error") or f"{typ} (no error)"))
    s.ops, s.end_time = n, t
    for (process, value), (invoked, v) in open_sends.items():
        sends[value] = Send(int(process), value, str(v.get("topic", "")), int(v.get("partition", -1)),
                            invoked)
    return s


# --- the checker's measures, read into the report's types ------------------------------


def fault_windows(measures: Mapping[str, Any]) -> list[FaultWindow]:
    """``measures.faults`` ({f, start, end, nodes, detail}); entries without a start are skipped."""
    raw = measures.get("faults")
    out = []
    for w in raw if isinstance(raw, list) else ():
        if isinstance(w, dict) and isinstance(w.get("start"), int):
            end = w.get("end")
            detail = str(w.get("detail") or "")
            out.append(FaultWindow(str(w.get("f", "?")), w["start"], end if isinstance(end, int) else None,
                                   tuple(w.get("nodes") or ()),
                                   detail if len(detail) <= 160 else detail[:157] + "..."))
    return out


@dataclass(frozen=True, slots=True)
class Buckets:
    """Time buckets: bucket i covers [starts[i], starts[i] + width) ns."""

    width: int
    starts: list[int]

    @staticmethod
    def over(end: int, measures: Mapping[str, Any]) -> Buckets:
        """Buckets covering [0, end], as wide as the checker's (``measures.bucket_ns``)."""
        w = measures.get("bucket_ns")
        w = w if isinstance(w, int) and w > 0 else BUCKET_NS
        return Buckets(w, list(range(0, max(end, 1) + 1, w)))

    def index(self, t: int) -> int:
        """The bucket holding ``t``, clamped to the last one."""
        return min(max(t, 0) // self.width, len(self.starts) - 1)


def total_throughput(measures: Mapping[str, Any], buckets: Buckets) -> list[float]:
    """Acknowledged sends per second in each bucket, from ``measures.throughput``."""
    total = [0.0] * len(buckets.starts)
    raw = measures.get("throughput")
    for x in raw if isinstance(raw, list) else ():
        if isinstance(x, dict):
            total[buckets.index(int(x.get("start", 0)))] += float(x.get("ok", 0)) * 1e9 / buckets.width
    return total


def percentiles(measures: Mapping[str, Any], buckets: Buckets) -> dict[str, list[float | None]]:
    """p50 / p95 / p99 / max latency (ms) of ok sends per bucket, from ``measures.latency``;
    None for a bucket without one."""
    out: dict[str, list[float | None]] = {k: [None] * len(buckets.starts)
                                          for k in ("p50", "p95", "p99", "max")}
    raw = measures.get("latency")
    for x in raw if isinstance(raw, list) else ():
        if isinstance(x, dict):
            i = buckets.index(int(x.get("start", 0)))
            for k, series in out.items():
                series[i] = x.get(f"{k}_ms")
    return out


@dataclass(frozen=True, slots=True)
class Availability:
    """One partition's unavailability: windows (ns) with no ok send for over the threshold."""

    windows: list[tuple[int, int]]
    fraction: float
    acked: int


def availability(measures: Mapping[str, Any], acked: Mapping[Partition, int],
                 start: int, end: int) -> dict[Partition, Availability]:
    """Per partition of ``acked`` (partition -> ok sends) and of ``measures.unavailable``:
    its windows, and the share of [start, end] (the span of the sends) outside them."""
    windows: dict[Partition, list[tuple[int, int]]] = {p: [] for p in acked}
    raw = measures.get("unavailable")
    for entry in raw if isinstance(raw, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("partition"), int):
            windows[(str(entry.get("topic", "")), entry["partition"])] = [
                (w["start"], w["end"]) for w in entry.get("windows") or ()
                if isinstance(w, dict) and isinstance(w.get("start"), int) and isinstance(w.get("end"), int)]
    span = max(end - start, 1)
    return {p: Availability(ws, max(0.0, 1 - sum(b - a for a, b in ws) / span), acked.get(p, 0))
            for p, ws in sorted(windows.items())}


# --- what only the history gives ------------------------------------------------------


def throughput(sends: Iterable[Send], buckets: Buckets) -> dict[str, list[float]]:
    """Acknowledged sends per second in each bucket, per ``topic/partition`` (the checker
    measures only the total: :func:`total_throughput`)."""
    per: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(buckets.starts))
    for s in sends:
        if s.outcome == "ok" and s.end_time is not None:
            per[f"{s.topic}/{s.partition}"][buckets.index(s.end_time)] += 1
    scale = 1e9 / buckets.width
    return {k: [c * scale for c in v] for k, v in sorted(per.items())}


@dataclass(frozen=True, slots=True)
class LatencyPoints:
    """A latency scatter, maybe downsampled: ``shown`` of ``total`` sends."""

    invoke_s: list[float]
    latency_ms: list[float]
    outcome: list[str]
    total: int

    @property
    def shown(self) -> int:
        """How many points are drawn."""
        return len(self.invoke_s)


def latency_points(sends: Iterable[Send], max_points: int = 4000) -> LatencyPoints:
    """Every completed send as (invoke time, latency, outcome), downsampled to ``max_points``.

    Downsampling keeps every non-ok send (they are few and they are the story), the
    slowest tenth of the budget, and an even stride of the rest, in time order.
    """
    done = sorted((s for s in sends if s.end_time is not None), key=lambda s: s.invoke_time)
    total = len(done)
    if total > max_points:
        lat = np.array([s.latency for s in done], dtype=np.int64)
        keep = {i for i, s in enumerate(done) if s.outcome != "ok"}
        keep.update(int(i) for i in np.argsort(lat)[-(max_points // 10):])
        budget = max(max_points - len(keep), 1)
        keep.update(range(0, total, max(total // budget, 1)))
        done = [done[i] for i in sorted(keep)]
    return LatencyPoints([s.invoke_time / 1e9 for s in done],
                         [max((s.latency or 0) / 1e6, 0.01) for s in done],
                         [s.outcome or "open" for s in done], total)


def errors_by_kind(errors: Iterable[tuple[int, str, str]], buckets: Buckets,
                   max_kinds: int = 9) -> dict[str, list[int]]:
    """Count of failed/indeterminate completions per bucket, per ``f: error``; rare kinds as ``other``."""
    errs = list(errors)
    common = [k for k, _ in Counter(f"{f}: {e}" for _, f, e in errs).most_common()]
    top = set(common[:max_kinds]) if len(common) > max_kinds + 1 else set(common)
    per: dict[str, list[int]] = {}
    for t, f, e in errs:
        kind = f"{f}: {e}" if f"{f}: {e}" in top else "other"
        per.setdefault(kind, [0] * len(buckets.starts))[buckets.index(t)] += 1
    return dict(sorted(per.items(), key=lambda kv: -sum(kv[1])))
