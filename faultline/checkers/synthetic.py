"""Histories from a correct in-memory log, for property tests and the benchmark.

:func:`generate` simulates producers, consumers and a nemesis against a log that
keeps every promise (each written record stays at its offset forever, consumers
read in order from 0, a failed send is never written), and yields docs/history.md rows.
The queue checker must find no anomaly in them; tests mutate them to plant one.
Deterministic for a given :class:`Shape` (its seed included).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Shape:
    """What to generate. ``values`` sends in all; fractions are per send."""

    seed: int = 0
    topic: str = "fl-queue"
    partitions: int = 3
    producers: int = 2
    consumers: int = 1
    values: int = 100
    in_flight: int = 5
    poll_batch: int = 10
    fail: float = 0.02  # sends that end fail (never written)
    info: float = 0.02  # sends that end info (written or not, at random)
    faults: int = 2  # kill/start pairs spread over the run
    drain_batch: int = 500
    step_ns: int = 200_000


def generate(shape: Shape) -> Iterator[Row]:
    """Rows of one run: main phase, then every open send completed, then the drain."""
    rng = random.Random(shape.seed)
    logs: list[list[int]] = [[] for _ in range(shape.partitions)]
    index = 0
    now = 0
    procs = list(range(shape.producers))
    next_proc = shape.producers + shape.consumers
    consumers = list(range(shape.producers, shape.producers + shape.consumers))
    open_sends: dict[int, deque[tuple[int, int, str, int]]] = {p: deque() for p in procs}
    positions: dict[int, list[int]] = {c: [0] * shape.partitions for c in consumers}
    fault_at = {int(shape.values * (i + 1) / (shape.faults + 1)) for i in range(shape.faults)}

    def row(process: Any, typ: str, f: str, value: Any, error: str | None = None) -> Row:
        nonlocal index, now
        now += rng.randint(1, shape.step_ns)
        r = {"index": index, "time": now, "process": process, "type": typ, "f": f,
             "value": value}
        if error is not None:
            r["error"] = error
        index += 1
        return r

    def complete(p: int) -> Iterator[Row]:
        nonlocal next_proc
        value, part, outcome, offset = open_sends[p].popleft()
        v = {"topic": shape.topic, "partition": part, "value": value}
        if outcome == "ok":
            yield row(p, "ok", "send", {**v, "offset": offset})
        elif outcome == "fail":
            yield row(p, "fail", "send", v, "NOT_ENOUGH_REPLICAS")
        else:
            yield row(p, "info", "send", v, "_MSG_TIMED_OUT")
            # retire the process: its other open sends complete under it, new ones
            # go to a fresh process number
            if p in procs:
                procs[procs.index(p)] = next_proc
                open_sends[next_proc] = deque()
                next_proc += 1

    sent = 0
    while sent < shape.values:
        if sent in fault_at:
            node = rng.randint(1, 3)
            yield row("nemesis", "info", "kill", {"nodes": [node]})
            yield row("nemesis", "info", "kill", {"nodes": [node], "result": "killed"})
            fault_at.discard(sent)
            yield row("nemesis", "info", "start", {"nodes": [node]})
            yield row("nemesis", "info", "start", {"nodes": [node], "result": "started"})
        p = rng.choice(procs)
        roll = rng.random()
        if open_sends[p] and (len(open_sends[p]) >= shape.in_flight or roll < 0.45):
            yield from complete(p)
        elif consumers and roll > 0.9:
            c = rng.choice(consumers)
            yield row(c, "invoke", "poll", None)
            records: list[list[Any]] = []
            pos = positions[c]
            for part in rng.sample(range(shape.partitions), shape.partitions):
                while pos[part] < len(logs[part]) and len(records) < shape.poll_batch:
                    records.append([shape.topic, part, pos[part], logs[part][pos[part]]])
                    pos[part] += 1
            yield row(c, "ok", "poll", {"records": records})
        else:
            part = rng.randrange(shape.partitions)
            value = sent
            sent += 1
            r = rng.random()
            outcome = "fail" if r < shape.fail else "info" if r < shape.fail + shape.info else "ok"
            offset = -1
            if outcome == "ok" or (outcome == "info" and rng.random() < 0.5):
                offset = len(logs[part])
                logs[part].append(value)
            open_sends[p].append((value, part, outcome, offset))
            yield row(p, "invoke", "send",
                      {"topic": shape.topic, "partition": part, "value": value})
    for p in list(open_sends):
        while open_sends[p]:
            yield from complete(p)
    drainer = next_proc
    for part, log in enumerate(logs):
        start = 0
        while True:
            chunk = log[start:start + shape.drain_batch]
            last = start + len(chunk) >= len(log)
            yield row(drainer, "invoke", "drain", {"topic": shape.topic, "partition": part})
            yield row(drainer, "ok", "drain", {
                "topic": shape.topic, "partition": part,
                "records": [[start + i, v] for i, v in enumerate(chunk)],
                "log_start_offset": 0, "high_watermark": len(log), "last": last})
            start += len(chunk)
            if last:
                break
