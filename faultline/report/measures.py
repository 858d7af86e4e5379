"""What a report draws that the checker does not measure, from the history's columns.

The checker's ``measures`` (results.json, or the checker run in memory when a run
has none: :func:`faultline.report.page.load_run`) give the fault windows, total
acknowledged throughput, latency percentiles and unavailability windows; this module
reads them into the report's types (:func:`fault_windows`, :func:`total_throughput`,
:func:`percentiles`, :func:`availability`) and computes from the sends the checker's
pass left as columns (:class:`~faultline.checkers.table.SendTable`, never a second
pass over the history) what they lack: per-partition throughput, the latency scatter
and errors by kind; and, from the white-box observations, which HW answers are a
deposed leader's stale ones (:func:`stale_hw`).

It is pure: columns and JSON in, plain data out. It imports no Kafka client, no cluster
code and no plotting library, so it can be tested with hand-made sends.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from faultline.checkers.columns import NONE
from faultline.checkers.measures import BUCKET_NS
from faultline.checkers.table import OUTCOMES, SendTable
from faultline.checkers.whitebox import hw_epoch

Partition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """A fault in force from ``start`` to ``end`` (ns; None: never healed in the history)."""

    f: str
    start: int
    end: int | None
    nodes: tuple[Any, ...] = ()
    detail: str = ""


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


#: The most time buckets a report draws: a run of the longest time limit (a week) with the
#: most its history may hold past it (a day), in the checker's buckets of a second, has
#: about 700,000.
MAX_BUCKETS = 1_000_000


def bucket_width(measures: Mapping[str, Any]) -> int:
    """The checker's bucket width (``measures.bucket_ns``; its default when not a positive int)."""
    w = measures.get("bucket_ns")
    return w if isinstance(w, int) and w > 0 else BUCKET_NS


def bucket_count(end: int, measures: Mapping[str, Any]) -> int:
    """How many buckets of :func:`bucket_width` cover [0, end]."""
    return max(end, 1) // bucket_width(measures) + 1


@dataclass(frozen=True, slots=True)
class Buckets:
    """Time buckets: bucket i covers [starts[i], starts[i] + width) ns."""

    width: int
    starts: list[int]

    @staticmethod
    def over(end: int, measures: Mapping[str, Any]) -> Buckets:
        """Buckets covering [0, end], as wide as the checker's (:func:`bucket_width`):
        :func:`bucket_count` of them, which the caller holds to :data:`MAX_BUCKETS`."""
        w = bucket_width(measures)
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


def throughput(sends: SendTable, buckets: Buckets) -> dict[str, list[float]]:
    """Acknowledged sends per second in each bucket, per ``topic/partition`` (the checker
    measures only the total: :func:`total_throughput`)."""
    ok = (sends.outcome == 1) & (sends.end_time != NONE)
    where = np.minimum(np.maximum(sends.end_time[ok], 0) // buckets.width, len(buckets.starts) - 1)
    part = sends.part[ok]
    scale = 1e9 / buckets.width
    out = {}
    for p in np.unique(part).tolist():
        counts = np.bincount(where[part == p], minlength=len(buckets.starts))
        topic, partition = sends.parts[p]
        out[f"{topic}/{partition}"] = (counts * scale).tolist()
    return dict(sorted(out.items()))


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


def latency_points(sends: SendTable, max_points: int = 4000) -> LatencyPoints:
    """Every completed send as (invoke time, latency, outcome), downsampled to about
    ``max_points``.

    Downsampling keeps the non-ok sends (the story) up to half the budget, an even
    stride of them beyond (a run of many faults can fail hundreds of thousands: the
    errors plot counts every one), the slowest tenth of the budget, and an even stride
    of the rest, in time order.
    """
    done = np.flatnonzero(sends.end_time != NONE)
    done = done[np.argsort(sends.invoke_time[done], kind="stable")]
    total = len(done)
    lat = sends.end_time[done] - sends.invoke_time[done]
    if total > max_points:
        failed = np.flatnonzero(sends.outcome[done] != 1)
        keep = np.zeros(total, dtype=bool)
        keep[failed[::max(1, -(-len(failed) // (max_points // 2)))]] = True  # ceil: at most half
        keep[np.argsort(lat, kind="stable")[-(max_points // 10):]] = True
        budget = max(max_points - int(keep.sum()), 1)
        keep[::max(total // budget, 1)] = True
        done, lat = done[keep], lat[keep]
    return LatencyPoints((sends.invoke_time[done] / 1e9).tolist(),
                         np.maximum(lat / 1e6, 0.01).tolist(),
                         [OUTCOMES[o] or "open" for o in sends.outcome[done].tolist()], total)


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


def stale_hw(samples: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """Per observation of one partition, in time order: where its HW was answered under a
    leader epoch (``hw_epoch``) older than one an earlier sample's HW was answered under,
    the newest epoch seen before; else None.

    Such an answer is a deposed leader's stale HW, not the partition's HW going back
    (:func:`~faultline.checkers.whitebox.check_hw_monotonic` judges it only against its
    own and older epochs). A sample without a HW or an epoch (files written before
    ``hw_epoch`` was recorded) is never stale and sets no epoch."""
    out: list[int | None] = []
    newest: int | None = None
    for s in samples:
        epoch = hw_epoch(s)
        if epoch is None:
            out.append(None)
            continue
        out.append(newest if newest is not None and epoch < newest else None)
        newest = epoch if newest is None else max(newest, epoch)
    return out
