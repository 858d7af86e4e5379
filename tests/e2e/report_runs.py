"""Stored runs for report tests: a run directory as `faultline run` leaves it.

:func:`make_run` writes ``test.json`` (a real TestSpec), ``history.jsonl`` (through
the real HistoryWriter, on a scripted clock), ``results.json`` and, optionally,
``observations.jsonl`` and ``metadata.jsonl`` (the decoded KRaft metadata log: the topic
created with leaders 1, 2, 3; each kill fences its node and moves its partition's
leadership to the next node, from the ISR; the start unfences it and restores the ISR).
The history is a small simulation of a queue workload on
three partitions whose leaders are nodes 1, 2, 3: producers send round-robin, a
consumer polls with a lag, and each kill of node n takes partition n-1 offline for a
while, after which its new leader has lost the last ``lost_per_kill`` acknowledged
records and hands their offsets to new sends (a lost write plus an offset that held
two values). Then every partition is drained.

``results.json`` comes from the checker's ``check_run``; with ``use_checker=False`` it
holds docs/history.md's required fields only, from what the simulation knows (a results.json
of an older version: no measures, no stories). Every file written validates against its
schema in ``faultline/schemas`` (tests/e2e/test_fixture_runs.py holds each kind of stored
run the suite makes to it).
"""

from __future__ import annotations

import bisect
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultline.checkers.results_file import check_run
from faultline.history import HistoryWriter
from faultline.spec import NemesisSpec, TestSpec

TOPIC = "fl-queue"
ANOMALY_TYPES = ("lost-write", "phantom-read", "inconsistent-offsets", "duplicate", "aborted-read",
                 "unexpected-value", "nonmonotonic-send", "nonmonotonic-poll", "poll-skip")
S = 1_000_000_000  # ns per second


@dataclass(slots=True)
class _ScriptedWriter(HistoryWriter):
    """The real writer, with the clock set by the script instead of the monotonic one."""

    clock: int = 0

    def now(self) -> int:
        return self.clock


@dataclass(frozen=True, slots=True)
class Scenario:
    """What the simulated run does; kills are (at s, node, held for s)."""

    duration_s: float = 30.0
    rate: float = 40.0
    producers: int = 2
    kills: tuple[tuple[float, int, float], ...] = ((10.0, 2, 8.0),)
    lost_per_kill: int = 1
    outage_s: float = 2.5
    poll_every_s: float = 0.5
    poll_lag_s: float = 2.0
    observations: bool = True
    metadata: bool = True
    seed: int = 42


@dataclass(slots=True)
class StoredRun:
    """A run directory and what the test needs to know about it."""

    path: Path
    lost: list[dict[str, Any]] = field(default_factory=list)
    lines: int = 0


def make_run(path: Path, scenario: Scenario = Scenario(), *, use_checker: bool = True) -> StoredRun:
    """Write a stored run into ``path`` (created) and return it."""
    path.mkdir(parents=True, exist_ok=True)
    sc, rng = scenario, random.Random(scenario.seed)
    spec = TestSpec(name="queue-acks-all-kill", seed=sc.seed, time_limit_s=sc.duration_s,
                    start_wall_ms=1_795_000_000_000, nemesis=NemesisSpec(faults=("kill",), interval_s=10))
    (path / "test.json").write_text(json.dumps(spec.to_json(), indent=2))

    # (time, seq, process, type, f, value, error), sorted by time then seq at the end
    events: list[tuple[int, int, Any, str, str, Any, str | None]] = []
    seq = 0

    def ev(t: float | int, process: Any, type_: str, f: str, value: Any, error: str | None = None) -> None:
        nonlocal seq
        events.append((int(t), seq, process, type_, f, value, error))
        seq += 1

    invokes = sorted((i * 0.007 + k / sc.rate, i, k) for i in range(sc.producers)
                     for k in range(int(sc.duration_s * sc.rate)))
    next_process = 10
    proc = {i: i for i in range(sc.producers)}
    retire_at: dict[int, int] = {}  # producer -> when its info retires its process (ns)
    infos_left = dict.fromkeys(range(len(scenario.kills)), 2)
    next_off = [0, 0, 0]
    log: list[dict[int, tuple[Any, int]]] = [{}, {}, {}]  # offset -> (value, ack ns)
    kills = sorted(sc.kills)
    done_kills: set[int] = set()
    lost: list[dict[str, Any]] = []
    stats = {"ok": 0, "fail": 0, "info": 0}
    for value, (t, i, k) in enumerate(invokes, start=1):
        for j, (at, node, _) in enumerate(kills):
            if j not in done_kills and t >= at:
                done_kills.add(j)
                p = node - 1
                victims = sorted(log[p])[-sc.lost_per_kill:] if sc.lost_per_kill else []
                for off in victims:
                    v, ack = log[p].pop(off)
                    lost.append({"topic": TOPIC, "partition": p, "value": v, "offset": off, "time": ack})
                if victims:
                    next_off[p] = victims[0]
        t_ns = int(t * S)
        if i in retire_at and t_ns >= retire_at[i]:
            proc[i], next_process = next_process, next_process + 1
            del retire_at[i]
        process, p = proc[i], (k + i) % 3
        ev(t_ns, process, "invoke", "send", {"topic": TOPIC, "partition": p, "value": value})
        down = [(j, at) for j, (at, node, _) in enumerate(kills)
                if node - 1 == p and at - 0.05 <= t < at + sc.outage_s]
        near = any(at <= t < at + 1 for at, _, _ in kills)
        if down:
            if k % 7 == 0 and infos_left[down[0][0]] > 0:
                infos_left[down[0][0]] -= 1
                ev(t_ns + 3 * S, process, "info", "send", {"topic": TOPIC, "partition": p, "value": value},
                   "_MSG_TIMED_OUT")
                retire_at[i] = min(retire_at.get(i, t_ns + 3 * S), t_ns + 3 * S)
                stats["info"] += 1
            else:
                ev(max(t_ns + rng.randint(20, 40) * 1_000_000, int(down[0][1] * S) + 1_000_000), process,
                   "fail", "send", {"topic": TOPIC, "partition": p, "value": value}, "NOT_LEADER_OR_FOLLOWER")
                stats["fail"] += 1
            continue
        lat_ms = rng.uniform(50, 150) if near else (rng.uniform(20, 40) if rng.random() < 0.02
                                                    else rng.uniform(2, 8))
        ack = t_ns + int(lat_ms * 1e6)
        off = next_off[p]
        next_off[p] += 1
        log[p][off] = (value, ack)
        stats["ok"] += 1
        ev(ack, process, "ok", "send", {"topic": TOPIC, "partition": p, "value": value, "offset": off})

    end = sc.duration_s
    for at, node, hold in kills:
        ev(at * S, "nemesis", "info", "kill", {"nodes": [node]})
        ev(at * S + 50_000_000, "nemesis", "info", "kill",
           {"nodes": [node], "result": f"killed pid {4000 + node}"})
        ev((at + hold) * S, "nemesis", "info", "start", {"nodes": [node]})
        ev((at + hold) * S + 400_000_000, "nemesis", "info", "start", {"nodes": [node], "result": "started"})

    surviving = sorted((ack, p, off, v) for p in range(3) for off, (v, ack) in log[p].items())
    acks = [x[0] for x in surviving]
    t_poll, prev = sc.poll_every_s, -1.0
    consumer = 2
    while t_poll < end:
        lo, hi = (prev - sc.poll_lag_s) * S, (t_poll - sc.poll_lag_s) * S
        window = surviving[bisect.bisect_right(acks, lo):bisect.bisect_right(acks, hi)]
        recs = sorted([[TOPIC, p, off, v] for _, p, off, v in window], key=lambda r: (r[1], r[2]))
        ev(t_poll * S, consumer, "invoke", "poll", None)
        ev(t_poll * S + 1_000_000, consumer, "ok", "poll", {"records": recs})
        prev, t_poll = t_poll, t_poll + sc.poll_every_s

    t_drain = (end + 1.0) * S
    for p in range(3):
        records = [[off, v] for off, (v, _) in sorted(log[p].items())]
        chunks = [records[n:n + 500] for n in range(0, len(records), 500)] or [[]]
        for c, chunk in enumerate(chunks):
            ev(t_drain, 3, "invoke", "drain", {"topic": TOPIC, "partition": p})
            t_drain += 5_000_000
            last = c == len(chunks) - 1
            ev(t_drain, 3, "ok", "drain", {"topic": TOPIC, "partition": p, "records": chunk,
                                           "log_start_offset": 0, "high_watermark": next_off[p],
                                           **({"last": True} if last else {})})
            t_drain += 1_000_000

    events.sort(key=lambda e: (e[0], e[1]))
    with _ScriptedWriter(path / "history.jsonl") as w:
        for t, _, process, type_, f, value, error in events:
            w.clock = t
            w.append(process, type_, f, value, error)  # type: ignore[arg-type]

    if sc.observations:
        _write_observations(path / "observations.jsonl", sc, log, lost)
    if sc.metadata:
        _write_metadata(path / "metadata.jsonl", sc)
    inconsistent = [{"topic": TOPIC, "partition": x["partition"], "offset": x["offset"],
                     "values": [x["value"], log[x["partition"]][x["offset"]][0]]}
                    for x in lost if x["offset"] in log[x["partition"]]]
    _write_results(path, lost, inconsistent, stats, use_checker)
    return StoredRun(path, lost, len(events))


def _write_observations(path: Path, sc: Scenario, log: list[dict[int, tuple[Any, int]]],
                        lost: list[dict[str, Any]]) -> None:
    """One sample per partition per second, as the observer writes them: a replica in the
    ISR has the HW as its LEO; one out of it (killed) keeps the LEO and the HW checkpoint it
    had when it left until it is back. Checkpoints are written every 5 s (Kafka's default)."""
    acks = [sorted([ack for _, ack in log[p].values()] + [x["time"] for x in lost if x["partition"] == p])
            for p in range(3)]
    frozen: list[dict[int, tuple[int, int]]] = [{}, {}, {}]  # p -> node out of the ISR -> (LEO, ckpt)
    with path.open("w") as fh:
        for sec in range(int(sc.duration_s) + 1):
            t = sec * S
            for p in range(3):
                leader, isr = p + 1, [1, 2, 3]
                for at, node, hold in sc.kills:
                    if at + 0.2 <= sec < at + hold + 3:
                        isr = [n for n in isr if n != node]
                    if node == leader and at + 0.3 <= sec < at + hold + 3:
                        leader = node % 3 + 1
                hw = sum(1 for a in acks[p] if a <= t)
                ckpt = sum(1 for a in acks[p] if a <= (sec - sec % 5) * S)
                leo, hw_checkpoint = {}, {}
                for n in (1, 2, 3):
                    if n in isr:
                        frozen[p].pop(n, None)
                        leo[str(n)], hw_checkpoint[str(n)] = hw, ckpt
                    else:
                        leo[str(n)], hw_checkpoint[str(n)] = frozen[p].setdefault(n, (hw, ckpt))
                fh.write(json.dumps({"time": t, "topic": TOPIC, "partition": p, "leader": leader, "isr": isr,
                                     "replicas": [p + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1], "hw": hw,
                                     "leo": leo, "hw_checkpoint": hw_checkpoint}) + "\n")


def _write_metadata(path: Path, sc: Scenario) -> None:
    lines: list[dict[str, Any]] = [{"type": "topic", "time": -S, "topic": TOPIC, "raw": {"name": TOPIC}}]
    state = {p: {"leader": p + 1, "isr": [1, 2, 3], "elr": [], "last_known_elr": [], "leader_epoch": 0}
             for p in range(3)}
    for p in range(3):
        lines.append({"type": "partition", "time": -S, "topic": TOPIC, "partition": p, **state[p], "raw": {}})
    events: list[tuple[float, str, int]] = []
    for at, node, hold in sc.kills:
        events += [(at + 0.3, "kill", node), (at + hold + 1.0, "start", node)]
    for t, what, node in sorted(events):
        if what == "kill":
            lines.append({"type": "broker-registration-change", "time": int(t * S), "broker": node,
                          "fenced": True, "raw": {"brokerId": node, "fenced": 1}})
        else:
            lines.append({"type": "broker-registration-change", "time": int(t * S), "broker": node,
                          "fenced": False, "raw": {"brokerId": node, "fenced": -1}})
        for p, st in state.items():
            before = dict(st)
            if what == "kill":
                st["isr"] = [n for n in st["isr"] if n != node]
                if st["leader"] == node:
                    st["leader"], st["leader_epoch"] = node % 3 + 1, st["leader_epoch"] + 1
            else:
                st["isr"] = sorted({*st["isr"], node})
            if st != before:
                lines.append({"type": "partition-change", "time": int(t * S), "topic": TOPIC, "partition": p,
                              **st, "raw": {"partitionId": p, "isr": st["isr"]}})
    with path.open("w") as fh:
        for offset, line in enumerate(lines):
            fh.write(json.dumps({"offset": offset, **line}) + "\n")


def _write_results(path: Path, lost: list[dict[str, Any]], inconsistent: list[dict[str, Any]],
                   stats: dict[str, int], use_checker: bool) -> None:
    if use_checker:
        check_run(path)
        return
    counts = dict.fromkeys(ANOMALY_TYPES, 0)
    counts["lost-write"], counts["inconsistent-offsets"] = len(lost), len(inconsistent)
    violations = [a for a in ("lost-write", "inconsistent-offsets") if counts[a]]
    results = {
        "valid": not violations,
        "anomaly_counts": counts,
        "anomalies": {"lost-write": lost[:1000], "inconsistent-offsets": inconsistent[:1000]},
        "permitted": ["duplicate"],
        "permitted_reasons": {"duplicate": "a producer was restarted after an indeterminate send"},
        "violations": violations,
        "unknown": [],
        "stats": {"send": stats},
    }
    (path / "results.json").write_text(json.dumps(results, indent=1))
