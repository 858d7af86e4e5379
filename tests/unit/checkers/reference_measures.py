"""REFERENCE, for tests only: the measures' accumulation, one completion a call, as it was
before the compiled feed took it; ``tests/unit/checkers/test_anomalies.py`` holds the
checker's ``measures`` to it (they are no anomaly, so :mod:`faultline.checkers.anomalies`
does not define them)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

from faultline.checkers.faults_seen import NemesisAction
from faultline.checkers.measures import BUCKET_NS, UNAVAILABLE_AFTER_NS, _overlaps, fault_windows

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
