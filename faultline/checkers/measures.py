"""Measures that are not anomalies: throughput, latency, unavailability, fault windows.

Fed one send completion at a time by the queue checker's compiled feed (in history
order, so completion times never decrease), it keeps O(one bucket) of latencies plus
a few counters per partition, and :meth:`Measures.finish` returns the ``measures`` object
of results.json (described in ``faultline/schemas/results.schema.json``):

- ``bucket_ns`` and ``throughput``: per bucket of completion time, ok / fail / info
  send completions (ok is acknowledged throughput) and the indexes of the fault
  windows in force during it, dense from the first bucket to the last;
- ``latency``: per bucket with at least one ok send, the exact p50 / p95 / p99 / max
  of invoke-to-ok latency in milliseconds;
- ``unavailable``: per partition, windows longer than ``unavailable_after_ns`` with
  no ok send to it, from the last ok (or the first send of the run) to the next ok
  (or the last send of the run, ``ongoing: true``), with the fail / info
  completions seen meanwhile and the indexes of the fault windows they overlap;
- ``faults``: fault windows ``{f, kind, start, end, nodes, detail}`` from the
  nemesis actions; ``end`` is null for a fault never healed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from faultline.checkers.faults_seen import NemesisAction, fault_of, nodes_of
from faultline.checkers.kernel import NONE

BUCKET_NS = 1_000_000_000
UNAVAILABLE_AFTER_NS = 1_000_000_000

#: A heal action and the fault actions it ends (matched on nodes where both name some).
HEALS: Mapping[str, tuple[str, ...]] = {
    "start": ("kill", "stop"),
    "resume": ("pause",),
    "heal": ("partition",),
    "clear-toxics": ("toxic", "toxics"),
    "reset-clock": ("clock",),
    "restore": ("degrade",),
    "restart-client": ("crash-client",),
    "resume-client": ("pause-client",),
    "start-client": ("stop-client",),
}
#: Faults held until a heal ends them; any other action spans its own begin..completion.
HELD: frozenset[str] = frozenset(("kill", "stop", "pause", "partition", "toxic", "toxics", "clock",
                                  "degrade", "crash-client", "pause-client", "stop-client"))



class Measures:
    """The measures of one run; see the module doc for what it returns. The compiled feed
    (:func:`faultline.checkers.kernel.feed`) takes each send's completion in history
    order (so completion times never decrease): it keeps the current bucket's counts
    and latencies and each partition's last ok and misses since in its own arrays
    (:attr:`lat`, :attr:`last_ok`, :attr:`miss_fail`, :attr:`miss_info`), and gives
    each bucket, its latencies and each unavailability window here once known."""

    __slots__ = (
        "_buckets",
        "_latency",
        "_unavailable",
        "bucket_ns",
        "first_send",
        "last_ok",
        "last_send",
        "lat",
        "miss_fail",
        "miss_info",
        "unavailable_after_ns",
    )

    def __init__(self, bucket_ns: int = BUCKET_NS,
                 unavailable_after_ns: int = UNAVAILABLE_AFTER_NS, *, parts: int = 0) -> None:
        self.bucket_ns = bucket_ns
        self.unavailable_after_ns = unavailable_after_ns
        self._buckets: dict[int, list[int]] = {}  # bucket -> [ok, fail, info]
        self._latency: list[dict[str, Any]] = []
        #: When the first send was invoked, and the last send op's time; the caller
        #: keeps these up to date (they bound the unavailability windows).
        self.first_send: int | None = None
        self.last_send = 0
        self.lat = np.zeros(1 << 12, np.int64)  # the current bucket's ok latencies
        self.last_ok = np.full(parts, NONE, np.int64)  # partition id -> its last ok send's time
        self.miss_fail = np.zeros(parts, np.int64)  # partition id -> fails since its last ok
        self.miss_info = np.zeros(parts, np.int64)
        self._unavailable: dict[int, list[dict[str, Any]]] = {}

    def bucket(self, b: int, ok: int, fail: int, info: int) -> None:
        """Bucket ``b``'s send completions by outcome."""
        self._buckets[b] = [ok, fail, info]

    def latency(self, b: int, count: int, p50: int, p95: int, p99: int, top: int) -> None:
        """Bucket ``b``'s ``count`` ok latencies' percentiles and maximum (ns)."""
        self._latency.append({"start": b * self.bucket_ns, "count": count,
                              "p50_ms": p50 / 1e6, "p95_ms": p95 / 1e6, "p99_ms": p99 / 1e6,
                              "max_ms": top / 1e6})

    def window(self, part: int, start: int, end: int, *, fail: int, info: int,
               ongoing: bool) -> None:
        """Partition ``part`` had no ok send from ``start`` to ``end``, with ``fail`` and
        ``info`` completions meanwhile."""
        self._unavailable.setdefault(part, []).append(
            {"start": start, "end": end, "duration_ms": (end - start) / 1e6,
             "fail": fail, "info": info, "ongoing": ongoing, "faults": []})

    def finish(self, parts: Sequence[tuple[str, int]], sent_to: set[int],
               actions: Sequence[NemesisAction]) -> dict[str, Any]:
        """The ``measures`` object; ``parts[i]`` names partition id i, ``sent_to`` the ids
        that got at least one send."""
        for part in sorted(sent_to):
            last = int(self.last_ok[part])
            if last == NONE:
                last = self.first_send or 0
            if self.last_send - last > self.unavailable_after_ns:
                self.window(part, last, self.last_send, fail=int(self.miss_fail[part]),
                            info=int(self.miss_info[part]), ongoing=True)
        faults = fault_windows(actions)
        unavailable = []
        for part, windows in sorted(self._unavailable.items()):
            for w in windows:
                w["faults"] = [i for i, f in enumerate(faults) if _overlaps(f, w)]
            topic, partition = parts[part]
            unavailable.append({"topic": topic, "partition": partition, "windows": windows})
        throughput = []
        if self._buckets:
            lo, hi = min(self._buckets), max(self._buckets)
            for b in range(lo, hi + 1):
                ok, fail, info = self._buckets.get(b, (0, 0, 0))
                start, end = b * self.bucket_ns, (b + 1) * self.bucket_ns - 1
                throughput.append({"start": start, "ok": ok, "fail": fail, "info": info,
                                   "faults": [i for i, f in enumerate(faults) if _overlaps(
                                       f, {"start": start, "end": end})]})
        return {"bucket_ns": self.bucket_ns, "unavailable_after_ns": self.unavailable_after_ns,
                "throughput": throughput, "latency": self._latency,
                "unavailable": unavailable, "faults": faults}


def _overlaps(fault: Mapping[str, Any], window: Mapping[str, Any]) -> bool:
    end = fault["end"]
    return bool(fault["start"] <= window["end"] and (end is None or end >= window["start"]))


def fault_windows(actions: Sequence[NemesisAction]) -> list[dict[str, Any]]:
    """Fault windows ``{f, kind, start, end, nodes, detail}`` from paired nemesis actions.

    A held fault (:data:`HELD`) lasts from its begin until the completion of the heal
    that ends it (:data:`HEALS`, matched on nodes when both name nodes); a partial heal
    (a targeted ``release``, whose value holds the ``grudge`` and ``replication`` left in
    effect) ends every partition window and opens one for what it leaves; any other
    fault action (``wipe``, ``lose-unflushed``) spans its own begin..completion. A
    fault never healed has ``end`` None; a skipped one (``result: "skipped"``) has no
    window. Sorted by start.
    """
    held: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for a in actions:
        nodes = nodes_of(a.value)
        if a.f in HEALS:
            end = a.end if a.end is not None else a.start
            # a partial heal (a targeted release) carries the whole network fault left in
            # effect: it ends every partition window, and what is left is one of its own
            left = {k: a.value[k] for k in ("grudge", "replication") if a.f == "heal" and a.value.get(k)}
            keep = []
            for h in held:
                if h["f"] in HEALS[a.f] and (left or not nodes or not h["nodes"] or {
                        str(n) for n in nodes} & {str(n) for n in h["nodes"]}):
                    h["end"] = end
                    out.append(h)
                else:
                    keep.append(h)
            held = keep
            if left:
                held.append({"f": "partition", "kind": "partition", "start": end, "end": None,
                             "nodes": _grudge_nodes(left.values()), "detail": _detail(left)})
            continue
        kind = fault_of(a.f)
        if kind is None or a.skipped:  # a skipped fault did nothing: no window
            continue
        w = {"f": a.f, "kind": kind, "start": a.start, "end": a.end, "nodes": nodes,
             "detail": _detail(a.value)}
        if a.f in HELD:
            w["end"] = None
            held.append(w)
        else:
            out.append(w)
    out.extend(held)
    out.sort(key=lambda w: (w["start"], w["f"]))
    return out


def _grudge_nodes(grudges: Iterable[Any]) -> list[Any]:
    """Every node the history-form grudges name (:func:`nodes_of`), ids in order first."""
    found = {n for g in grudges for n in nodes_of({"grudge": g})}
    return sorted(found, key=lambda n: (not isinstance(n, int), n if isinstance(n, int) else 0, str(n)))


def _detail(value: Mapping[str, Any]) -> str:
    """A short text for a fault's value, leaving out what ``nodes`` already says."""
    parts = []
    grudge = value.get("grudge")
    if isinstance(grudge, dict):
        parts.append("; ".join(f"n{k} drops {','.join(map(str, d))}"
                               for k, d in grudge.items() if isinstance(d, list) and d))
    for k, x in value.items():
        if k not in ("nodes", "grudge", "leaders"):
            parts.append(f"{k}: {x}")
    return ", ".join(p for p in parts if p)
