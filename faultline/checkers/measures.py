"""Measures that are not anomalies: throughput, latency, unavailability, fault windows.

Fed one send completion at a time by the queue checker (in history order, so
completion times never decrease), it keeps O(one bucket) of latencies plus a few
counters per partition, and :meth:`Measures.finish` returns the ``measures`` object
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

from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from faultline.checkers.faults_seen import NemesisAction, fault_of, nodes_of

BUCKET_NS = 1_000_000_000
UNAVAILABLE_AFTER_NS = 1_000_000_000

#: A heal action and the fault actions it ends (matched on nodes where both name some).
HEALS: Mapping[str, tuple[str, ...]] = {
    "start": ("kill", "stop"),
    "resume": ("pause",),
    "heal": ("partition",),
    "clear-toxics": ("toxic", "toxics"),
    "reset-clock": ("clock",),
}
#: Faults held until a heal ends them; any other action spans its own begin..completion.
HELD: frozenset[str] = frozenset(("kill", "stop", "pause", "partition", "toxic", "toxics", "clock"))

OK, FAIL, INFO = 1, 2, 3


class Measures:
    """Accumulates the measures of one run; see the module doc for what it returns."""

    __slots__ = (
        "_bucket",
        "_buckets",
        "_counts",
        "_last_ok",
        "_lat",
        "_latency",
        "_misses",
        "_unavailable",
        "bucket_ns",
        "first_send",
        "last_send",
        "unavailable_after_ns",
    )

    def __init__(self, bucket_ns: int = BUCKET_NS,
                 unavailable_after_ns: int = UNAVAILABLE_AFTER_NS) -> None:
        self.bucket_ns = bucket_ns
        self.unavailable_after_ns = unavailable_after_ns
        self._buckets: dict[int, list[int]] = {}  # bucket -> [ok, fail, info]
        self._counts: list[int] = [0, 0, 0]  # _buckets[_bucket]
        self._bucket = -1  # the bucket whose latencies are in _lat
        self._lat: array[int] = array("q")
        self._latency: list[dict[str, Any]] = []
        #: When the first send was invoked, and the last send op's time; the caller
        #: keeps these up to date (they bound the unavailability windows).
        self.first_send: int | None = None
        self.last_send = 0
        self._last_ok: dict[int, int] = {}  # partition id -> time of its last ok send
        self._misses: dict[int, list[int]] = {}  # partition id -> [fail, info] since last ok
        self._unavailable: dict[int, list[dict[str, Any]]] = {}

    def completed(self, part: int, status: int, invoke_time: int, time: int) -> None:
        """A send to partition id ``part`` completed with ``status`` (OK, FAIL, INFO).

        Calls come in history order, so ``time`` never decreases.
        """
        self.last_send = time
        b = time // self.bucket_ns
        if b != self._bucket:
            self._flush_latency()
            self._bucket = b
            self._counts = self._buckets.setdefault(b, [0, 0, 0])
        self._counts[status - 1] += 1
        if status == OK:
            self._lat.append(time - invoke_time)
            last = self._last_ok.get(part)
            if last is None:
                last = self.first_send if self.first_send is not None else invoke_time
            if time - last > self.unavailable_after_ns:
                self._window(part, last, time, ongoing=False)
            self._last_ok[part] = time
            if self._misses:
                self._misses.pop(part, None)
        else:
            misses = self._misses.get(part)
            if misses is None:
                misses = self._misses[part] = [0, 0]
            misses[status - 2] += 1

    def _window(self, part: int, start: int, end: int, *, ongoing: bool) -> None:
        fail, info = self._misses.get(part, (0, 0))
        self._unavailable.setdefault(part, []).append(
            {"start": start, "end": end, "duration_ms": (end - start) / 1e6,
             "fail": fail, "info": info, "ongoing": ongoing, "faults": []})

    def _flush_latency(self) -> None:
        lat = self._lat
        if not lat:
            return
        s = sorted(lat)
        n = len(s)

        def pct(q: float) -> float:
            return s[min(n - 1, int(q * n))] / 1e6

        self._latency.append({"start": self._bucket * self.bucket_ns, "count": n,
                              "p50_ms": pct(0.50), "p95_ms": pct(0.95), "p99_ms": pct(0.99),
                              "max_ms": s[-1] / 1e6})
        self._lat = array("q")

    def finish(self, parts: Sequence[tuple[str, int]], sent_to: set[int],
               actions: Sequence[NemesisAction]) -> dict[str, Any]:
        """The ``measures`` object; ``parts[i]`` names partition id i, ``sent_to`` the ids
        that got at least one send."""
        self._flush_latency()
        for part in sorted(sent_to):
            last = self._last_ok.get(part, self.first_send or 0)
            if self.last_send - last > self.unavailable_after_ns:
                self._window(part, last, self.last_send, ongoing=True)
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
