"""The compiled queue checker held to the anomalies' definitions
(:mod:`faultline.checkers.anomalies`): on every partition, the same instances of each
anomaly, and the same ones set aside as the drain's edges.

The histories: the stored real run; a correct log's (:mod:`faultline.checkers.synthetic`)
with mutations, shuffled drains, and values, offsets, processes and times that take the
engine's other paths (int32 cells' marks, dicts, invoke times beyond int32 differences)
with its columns grown and its decisions taken a few at a time; and arbitrary ones
(:func:`wild`), where sends, polls and drain ops interleave with any records, log starts
and high watermarks, and replicas that agree or not.
"""

from __future__ import annotations

import copy
import random
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from faultline.checkers import anomalies, columns, queue
from faultline.checkers.anomalies import Partition, Read
from faultline.checkers.faults_seen import nemesis_actions
from faultline.checkers.queue import check
from faultline.checkers.result import ANOMALIES, MAX_ANOMALY_EXAMPLES, UNKNOWN
from faultline.checkers.synthetic import Shape, generate
from faultline.checkers.whitebox import BrokerFiles, partition_timeline
from faultline.history import NEMESIS, HistoryFile, Op, ReadResult, iter_rows
from faultline.spec import MAX_TIME_LIMIT_S, TestSpec
from tests.unit.checkers.queue_hist import TOPIC, H, make_spec
from tests.unit.checkers.reference_measures import FAIL, INFO, OK, Measures
from tests.unit.checkers.test_queue_properties import MUTATIONS, Index, shapes

STORED = Path(__file__).parents[2] / "e2e" / "data" / "kill-partition"
Rows = list[dict[str, Any]]
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- what each side found ------------------------------------------------------------------


def _reader(by: int | None) -> str:
    return "the drain" if by is None else f"consumer {by}"


#: anomaly -> (an example's key, an instance's key): what identifies an instance
KEYS: dict[str, tuple[Callable[[dict[str, Any]], Any], Callable[[Any], Any]]] = {
    "lost-write": (lambda e: (e["value"], e["offset"], e["process"], e["time"], e["invoke_time"]),
                   lambda s: (s.value, s.offset, s.process, s.ended, s.invoked)),
    "phantom-read": (lambda e: (e["offset"], e["value"]), lambda r: (r.offset, r.value)),
    "inconsistent-offsets": (
        lambda e: (e["offset"], frozenset(e["values"]), e["involves_ack"], e["reads_disagree"]),
        lambda x: (x.offset, x.values, x.involves_ack, x.reads_disagree)),
    "duplicate": (lambda e: (e["value"], tuple(e["offsets"])),
                  lambda x: (x.send.value, tuple(x.offsets))),
    "aborted-read": (lambda e: (e["value"], e["offset"], e["time"], e["reader"]),
                     lambda x: (x.send.value, x.read.offset, x.read.time, _reader(x.read.reader))),
    "unexpected-value": (lambda e: (e["value"], e["offset"], e["time"], e["reader"], e["reads"]),
                         lambda x: (x.read.value, x.read.offset, x.read.time,
                                    _reader(x.read.reader), x.reads)),
    "nonmonotonic-send": (lambda e: (e["process"], tuple(e["values"]), tuple(e["offsets"])),
                          lambda x: (x.earlier.process, (x.earlier.value, x.later.value),
                                     (x.earlier_at, x.later_at))),
    "nonmonotonic-poll": (lambda e: (e["process"], e["offset"], e["previous"], e["time"]),
                          lambda x: (x.read.reader, x.read.offset, x.previous, x.read.time)),
    "poll-skip": (lambda e: (e["process"], e["previous"], e["offset"], e["time"],
                             tuple(e["skipped"]), e["skipped_count"]),
                  lambda x: (x.read.reader, x.previous, x.read.offset, x.read.time,
                             tuple(x.skipped[:10]), len(x.skipped))),
}
assert set(KEYS) == set(ANOMALIES)


@dataclass
class Seen:
    """What a side found: per partition, each anomaly's instances (keys, counted) and how
    many it set aside (after-drain, short-drain); run-wide, the other unknowns' counts."""

    counted: dict[int, dict[str, Counter[Any]]] = field(default_factory=dict)
    set_aside: dict[int, dict[str, int]] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)


def engine_seen(r: dict[str, Any]) -> Seen:
    """What the compiled checker's results.json says (every example kept: few)."""
    seen = Seen()
    for p in r["partitions"]:
        seen.counted[p["partition"]] = {name: Counter() for name in ANOMALIES}
        seen.set_aside[p["partition"]] = {}
    for name, examples in r["anomalies"].items():
        assert len(examples) == r["anomaly_counts"][name] < MAX_ANOMALY_EXAMPLES
        for e in examples:
            seen.counted[e["partition"]][name][KEYS[name][0](e)] += 1
    for p in r["partitions"]:
        assert p["anomaly_counts"] == {n: sum(c.values()) for n, c in seen.counted[p["partition"]].items()
                                       if c}
    for u in r["unknown"]:
        if u["kind"] in (anomalies.AFTER_DRAIN, anomalies.SHORT_DRAIN):
            seen.set_aside[u["partition"]][u["kind"]] = u["count"]
        elif u["kind"] in (anomalies.BELOW_LOG_START, anomalies.DRAIN_MISSED,
                           anomalies.DRAIN_MISSED_HELD):
            seen.run[u["kind"]] = u["count"]
    seen.run["indeterminate"] = (r["stats"]["indeterminate_read"], r["stats"]["indeterminate_unread"])
    seen.run["first_loss_ns"] = r["first_loss_ns"]
    return seen


def spec_seen(parts: Sequence[Partition]) -> Seen:
    """What the definitions find, in results.json's terms, where the engine decides
    otherwise as it does (:func:`as_the_engine_decides`)."""
    seen = Seen()
    read = unread = 0
    losses = []
    for tp, p in enumerate(parts):
        found = as_the_engine_decides(p, anomalies.find(p))
        seen.counted[tp] = {name: Counter(KEYS[name][1](x) for x in found.counted[name])
                            for name in ANOMALIES}
        losses += [s.ended for s in found.counted["lost-write"]]
        late = found.undecided.get(anomalies.AFTER_DRAIN, [])
        seen.set_aside[tp] = {anomalies.AFTER_DRAIN: len(late)} if late else {}
        if p.short():  # said of a short drain, whatever it set aside
            seen.set_aside[tp][anomalies.SHORT_DRAIN] = len(found.undecided.get(anomalies.SHORT_DRAIN, []))
        for kind in (anomalies.BELOW_LOG_START, anomalies.DRAIN_MISSED, anomalies.DRAIN_MISSED_HELD):
            if found.undecided.get(kind):
                seen.run[kind] = seen.run.get(kind, 0) + len(found.undecided[kind])
        settled = anomalies.indeterminate(p)
        read, unread = read + len(settled[0]), unread + len(settled[1])
    seen.run["indeterminate"] = (read, unread)
    seen.run["first_loss_ns"] = min(losses, default=None)
    return seen


def held_to_the_definitions(spec: TestSpec, rows: Rows, replicas: Sequence[dict[str, Any]] | None = None,
                            **kw: Any) -> dict[str, Any]:
    """The engine's results.json object for ``rows``, found equal to what the definitions
    find; and equal to the engine's from the rows' file, read by its own reader (the
    compiled scanner) as by the rows' (:func:`iter_rows`), compressed or not."""
    result = queue.check_rows(spec, rows, replicas=replicas, **kw).to_json()
    state = queue.BrokerState(kw.get("timeline"), replicas)
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
        for compressed in (False, True):
            path = Path(tmp) / ("history.jsonl.zst" if compressed else "history.jsonl")
            write_history(path, rows, compressed)
            read = ReadResult()
            from_file = queue.check_rows_table(spec, HistoryFile(str(path), read),
                                               broker=lambda: state, table=False)[0]
            assert from_file.to_json() == result and read.lines == len(rows)
    engine, defined = engine_seen(result), spec_seen(anomalies.partitions(spec, rows, replicas))
    assert engine.counted == defined.counted
    assert engine.set_aside == defined.set_aside
    assert engine.run == defined.run
    assert_tally(spec, rows, result)
    return result


def write_history(path: Path, rows: Rows, compressed: bool) -> None:
    """``rows`` as a history file, plain or as zstd frames of a few lines each."""
    lines = [orjson.dumps(r) + b"\n" for r in rows]
    if not compressed:
        path.write_bytes(b"".join(lines))
        return
    zstd = zstandard.ZstdCompressor()
    path.write_bytes(b"".join(zstd.compress(b"".join(lines[i:i + 7])) for i in range(0, len(lines), 7)))


# -- what is no anomaly: the counts and the measures ---------------------------------------------


def assert_tally(spec: TestSpec, rows: Rows, r: dict[str, Any]) -> None:
    """results.json's counts (``stats``, ``partitions``) and ``measures`` as the rows say
    them, the measures by their reference (:mod:`.reference_measures`)."""
    status = {"ok": OK, "fail": FAIL, "info": INFO}
    n = spec.topic.partitions
    sends: dict[Any, list[Any]] = {}  # value -> [partition, process, invoked, outcome]
    polls, drains = Counter[str](), Counter[str]()
    polled, drained = [0] * n, [set[int]() for _ in range(n)]
    measures = Measures()
    for d in rows:
        f, typ, v = d["f"], d["type"], d.get("value") or {}
        if f == "send" and typ == "invoke":
            sends[v["value"]] = [v["partition"], d["process"], d["time"], "open"]
            if measures.first_send is None:
                measures.first_send = d["time"]
        elif f == "send":
            sends[v["value"]][3] = typ
            measures.completed(sends[v["value"]][0], status[typ], sends[v["value"]][2], d["time"])
        elif f in ("poll", "drain") and typ != "invoke":
            (polls if f == "poll" else drains)[typ] += 1
        if f == "poll" and typ == "ok":
            for _, tp, _, _ in v["records"]:
                polled[tp] += 1
        elif f == "drain" and typ == "ok":
            drained[v["partition"]].update(o for o, _ in v["records"])
    if sends:  # invoke times never decrease: the last is the latest
        measures.last_send = max(measures.last_send, max(s[2] for s in sends.values()))
    nemesis = [Op(d["index"], d["time"], "nemesis", d["type"], d["f"], d.get("value"), d.get("error"))
               for d in rows if d["process"] == NEMESIS]
    expected = measures.finish([(TOPIC, p) for p in range(n)], {s[0] for s in sends.values()},
                               nemesis_actions(nemesis))
    assert r["measures"] == expected
    outcomes = Counter((s[0], s[3]) for s in sends.values())
    assert r["stats"]["send"] == {k: sum(outcomes[(tp, k)] for tp in range(n))
                                  for k in ("ok", "fail", "info")}
    assert r["stats"]["send_open"] == sum(outcomes[(tp, "open")] for tp in range(n))
    assert r["stats"]["poll"] == {k: polls[k] for k in ("ok", "fail", "info")}
    assert r["stats"]["drain"] == {k: drains[k] for k in ("ok", "fail", "info")}
    assert (r["stats"]["ops"], r["stats"]["records_polled"], r["stats"]["records_drained"]) == (
        len(rows), sum(polled), sum(map(len, drained)))
    for p in r["partitions"]:
        tp = p["partition"]
        assert (p["polled"], p["drained"]) == (polled[tp], len(drained[tp]))
        assert p["sends"] == {k: outcomes[(tp, k)] for k in ("ok", "fail", "info", "open")}


# -- where the engine decides otherwise (findings) ------------------------------------------
#
# Each a disagreement the comparison allows for, exactly as the engine decides, with
# a minimal history that fails (strict xfail) until the engine decides as the
# definition does; then its allowance goes.


def untimed(p: Partition, read: Read) -> bool:
    """Whether the engine sets phantom read ``read`` aside as ``after-drain`` although
    it ended before the drain began: it keeps one read per send, its first, so it knows
    when ``read`` was only if that is it; else it takes the partition's last poll, and
    sets aside when that one ended late."""
    if p.late(read.time) or not p.late(max(r.time for r in p.polled)):
        return False
    send = next((s for s in p.sends if s.value == read.value), None)
    first = p.reads_of(send)[0] if send is not None and p.reads_of(send) else None
    return first is None or first.reader is None or first.offset != read.offset


def as_the_engine_decides(p: Partition, found: anomalies.Found) -> anomalies.Found:
    """``found`` with the instances the engine decides otherwise moved where it puts
    them: phantom reads it cannot time (:func:`untimed`) set aside as ``after-drain``."""
    if p.drain is None:
        return found
    undecided = found.undecided
    found.counted["phantom-read"] = [r for r in found.counted["phantom-read"] if not untimed(p, r)]
    for kind in (anomalies.SHORT_DRAIN, anomalies.DRAIN_MISSED_HELD, anomalies.DRAIN_MISSED):
        undecided[kind] = [(a, x) for a, x in undecided.get(kind, [])
                           if not (a == "phantom-read" and untimed(p, x))]
    undecided.setdefault(anomalies.AFTER_DRAIN, []).extend(
        ("phantom-read", r) for r in anomalies.phantom_reads(p) if untimed(p, r))
    return found


def defined(h: H, **kw: Any) -> anomalies.Found:
    return anomalies.find(anomalies.partitions(make_spec(**kw), (o.to_dict() for o in h.ops))[0])


@pytest.mark.xfail(strict=True, reason="finding: the engine keeps one read per send")
def test_a_phantom_read_known_to_be_earlier_than_the_drain_is_counted() -> None:
    """Value 1, acknowledged at offset 1, is polled there, then by another consumer at
    offset 0 (where the drain reads 0), both before the drain began; a third poll ends
    once it had begun. The read at 0 is a phantom read: the history says it ended before
    the drain began, so offset 0 was below the high watermark the drain reads to. The
    engine sets it aside (``after-drain``): it keeps only value 1's first read, at 1."""
    h = H()
    h.send(0, 0, offset=0)
    h.send(0, 1, offset=1)
    h.poll(5, [(1, 1)])
    h.poll(6, [(0, 1)])
    h.op(99, "invoke", "drain", {"topic": TOPIC, "partition": 0})
    h.poll(7, [(1, 1)])
    h.op(99, "ok", "drain", {"topic": TOPIC, "partition": 0, "records": [[0, 0], [1, 1]],
                             "log_start_offset": 0, "high_watermark": 2, "last": True})
    assert [(r.offset, r.value) for r in defined(h).counted["phantom-read"]] == [(0, 1)]
    r = check(make_spec(), h.ops)
    assert r.anomaly_counts["phantom-read"] == 1


def test_an_ack_below_the_log_start_of_a_value_drained_elsewhere_is_unknown() -> None:
    """Value 2 is acknowledged at offset 0, below the drain's log start 1, and drained at
    offset 1: the record at 0 is gone, so whether 2 was written twice (a duplicate) or
    acknowledged at the wrong offset (an inconsistent offset), the drain cannot tell:
    ``below-log-start``, as a lost write there is. The engine finds nothing: valid."""
    h = H()
    h.send(0, 2, offset=0)
    h.drain([(1, 2)], hw=2, lso=1)
    assert [a for a, _ in defined(h).undecided[anomalies.BELOW_LOG_START]] == ["inconsistent-offsets"]
    r = check(make_spec(), h.ops)
    assert r.valid == UNKNOWN


def test_a_second_value_read_below_the_log_start_and_gone_is_unknown() -> None:
    """Two consumers read offset 0, below the drain's log start 1: one value 1, which the
    drain read at 1, and one value 2, whose send ended ``info`` and which the drain never
    read. Value 2 went missing below the log start: ``below-log-start``, whatever else
    the offset's two values make it (inconsistent-offsets, between reads). The engine
    looks only at the first value read there."""
    h = H()
    h.send(0, 1, offset=1)
    h.send(0, 2, "info")
    h.poll(5, [(0, 1)])
    h.poll(6, [(0, 2)])
    h.drain([(1, 1)], hw=2, lso=1)
    assert [r.value for _, r in defined(h).undecided[anomalies.BELOW_LOG_START]] == [2]
    r = check(make_spec(), h.ops)
    assert [u["count"] for u in r.unknown if u["kind"] == anomalies.BELOW_LOG_START] == [1]


def test_a_drain_without_a_high_watermark_decides_a_loss_without_an_offset() -> None:
    """The drain's last op gives no ``high_watermark`` (docs/history.md's schema makes
    it optional) and an ack gave no offset (acks=0): whether the drain skipped a record
    is unknown, so the value it did not read is lost (permitted with acks=0). The engine
    raises TypeError comparing with the missing HW (a checker error: ``unknown``)."""
    h = H()
    h.send(0, 1)
    h.op(99, "invoke", "drain", {"topic": TOPIC, "partition": 0})
    h.op(99, "ok", "drain", {"topic": TOPIC, "partition": 0, "records": [], "log_start_offset": 0,
                             "last": True})
    assert len(defined(h, acks="0").counted["lost-write"]) == 1
    r = check(make_spec(acks="0"), h.ops)
    assert r.anomaly_counts["lost-write"] == 1


# -- the stored real run, and a correct log's histories mutated ----------------------------------


def test_the_stored_real_run_is_held_to_the_definitions() -> None:
    spec = TestSpec.load(STORED / "test.json")
    files = BrokerFiles.read(STORED)
    read = ReadResult()
    rows = list(iter_rows(STORED, read))
    r = held_to_the_definitions(spec, rows, files.replicas, truncated=read,
                                timeline=partition_timeline(files.metadata, spec.topic.name))
    assert r["stats"]["send"]["ok"] > 0


def reoffset(rows: Rows, shift: int) -> None:
    """Add ``shift`` to every offset: acks (those given), polls, drains, HW and log start.
    Offsets past the arrays' reach (or negative) go to the maps' dicts."""
    for r in rows:
        v = r["value"]
        if r["f"] == "send" and r["type"] == "ok" and v.get("offset", -1) >= 0:
            v["offset"] += shift
        elif r["f"] == "poll" and r["type"] == "ok":
            v["records"] = [[t, p, o + shift, x] for t, p, o, x in v["records"]]
        elif r["f"] == "drain" and r["type"] == "ok":
            v["records"] = [[o + shift, x] for o, x in v["records"]]
            for k in ("high_watermark", "log_start_offset"):
                if isinstance(v.get(k), int):
                    v[k] += shift


def shuffle_drains(rows: Rows, seed: int) -> None:
    """Shuffle the drained values among each partition's drained offsets: reorderings,
    wrong acks and phantom reads by the hundred."""
    by_part: dict[int, list[list[int]]] = {}
    for r in rows:
        if r["f"] == "drain" and r["type"] == "ok":
            by_part.setdefault(r["value"]["partition"], []).extend(r["value"]["records"])
    rng = random.Random(seed)
    for records in by_part.values():
        values = [x for _, x in records]
        rng.shuffle(values)
        for rec, x in zip(records, values, strict=True):
            rec[1] = x


def reprocess(rows: Rows, shift: int) -> None:
    """Add ``shift`` to every client process."""
    for r in rows:
        if isinstance(r["process"], int):
            r["process"] += shift


def revalue(rows: Rows, shift: int, spread: int) -> None:
    """Give every value ``value * spread + shift``, in sends and reads alike."""
    def f(v: int) -> int:
        return v * spread + shift

    for r in rows:
        v = r["value"]
        if r["f"] == "send":
            v["value"] = f(v["value"])
        elif r["f"] == "poll" and r["type"] == "ok":
            v["records"] = [[t, p, o, f(x)] for t, p, o, x in v["records"]]
        elif r["f"] == "drain" and r["type"] == "ok":
            v["records"] = [[o, f(x)] for o, x in v["records"]]


def spec_for(partitions: int, acks: str = "all") -> TestSpec:
    return replace(make_spec(acks=acks, partitions=partitions), time_limit_s=MAX_TIME_LIMIT_S)


def held_in_small_steps(spec: TestSpec, rows: Rows, data: st.DataObject,
                        replicas: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """:func:`held_to_the_definitions`, with the engine's columns grown and its decisions
    taken as ``data`` draws: a slot at a time, or a few, or the usual."""
    grow = data.draw(st.sampled_from([1, 7, queue.GROW]), "how the columns grow")
    block = data.draw(st.sampled_from([1, 7, 1 << 20]), "how many sends and offsets decide at once")
    default = queue.GROW, columns.BLOCK
    queue.GROW, columns.BLOCK = grow, block
    try:
        return held_to_the_definitions(spec, rows, replicas)
    finally:
        queue.GROW, columns.BLOCK = default


@SETTINGS
@given(shape=shapes, data=st.data(), acks=st.sampled_from(["all", "1", "0"]),
       shift=st.sampled_from([0, 0, -(10**6), 2**40, columns.EMPTY]),
       spread=st.sampled_from([1, 1, 3, 2**21]), offsets=st.sampled_from([0, 0, -50, 2**30, 2**40]),
       shuffle=st.sampled_from([None, None, 1, 2]), processes=st.sampled_from([0, 0, 2**40]),
       stretch=st.sampled_from([1, 1, 10**6]),
       mutations=st.lists(st.sampled_from(sorted(MUTATIONS)), max_size=3))
def test_a_correct_logs_histories_mutated_are_held_to_the_definitions(
        shape: Shape, data: st.DataObject, acks: str, shift: int, spread: int, offsets: int,
        shuffle: int | None, processes: int, stretch: int, mutations: list[str]) -> None:
    rows = copy.deepcopy(list(generate(shape)))
    for name in mutations:
        ix = Index(rows)
        if ix.polls:
            MUTATIONS[name][0](ix, data)
    if shuffle is not None:
        shuffle_drains(rows, shuffle)
    revalue(rows, shift, spread)
    reoffset(rows, offsets)
    reprocess(rows, processes)
    for r in rows:  # times seconds apart (within the longest test's): beyond the int32 cells of invoke times
        r["time"] *= stretch
    note(f"{shape}, acks={acks}, values * {spread} + {shift}, offsets + {offsets}, "
         f"processes + {processes}, times * {stretch}, "
         f"drains shuffled by seed {shuffle}, mutations {mutations}")
    held_in_small_steps(spec_for(shape.partitions, acks), rows, data)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_values_that_are_the_int32_cells_marks_are_held_to_the_definitions(seed: int) -> None:
    """Values -2**31 and -2**31 + 1, the marks of the offset maps' int32 cells (empty, and
    held in the dict), acknowledged, polled and drained at offsets that disagree: each
    is kept whole, and every disagreement found."""
    rows = copy.deepcopy(list(generate(Shape(seed=seed, values=60, partitions=1, fail=0, info=0))))
    revalue(rows, columns.EMPTY, 1)
    shuffle_drains(rows, seed)
    r = held_to_the_definitions(make_spec(partitions=1), rows)
    assert r["anomaly_counts"]["inconsistent-offsets"] > 0


# -- arbitrary histories ----------------------------------------------------------------------


#: a value no send carries: never sent, or another producer's record (text, null)
STRANGERS = st.sampled_from([-1, 10**12, "x", None])


@dataclass
class Wild:
    """A history of ``partitions`` (rows that keep docs/history.md's pairing rules) and
    its replicas' lines (None: no replicas.jsonl)."""

    partitions: int
    rows: Rows
    replicas: list[dict[str, Any]] | None


@st.composite
def wild(draw: st.DrawFn) -> Wild:
    """A log each partition appends to as sends are written, and everything that reads
    or says it, each now and then wrong: acks at another offset or none, ``fail`` sends
    written, consumers that skip, go back or read what is not there, a drain (ops in
    the middle of the rest, or none with ``last``) that misses, moves, repeats or
    invents records, with any log start and high watermark, and replicas that hold
    more or less than it read, and disagree."""
    n = draw(st.integers(1, 3), "partitions")
    logs: list[list[Any]] = [[] for _ in range(n)]
    rows: Rows = []
    t = 0
    process = {("p", i): i for i in range(3)} | {("c", i): 10 + i for i in range(2)}
    fresh = iter(range(100, 10**6))
    position = {(c, tp): 0 for c in range(2) for tp in range(n)}
    due: list[list[Any]] = []  # [ops until it ends, process key, completion row]

    def row(p: int, typ: str, f: str, value: Any) -> None:
        nonlocal t
        t += draw(st.sampled_from([0, 1, 1000]))
        rows.append({"index": len(rows), "time": t, "process": p, "type": typ, "f": f, "value": value})

    def odd(p: float) -> bool:  # a perturbation, drawn
        return draw(st.integers(0, 99)) < p * 100

    def drain(tp: int, records: list[list[Any]], last: bool, hw: int, lso: int) -> None:
        where = {"topic": TOPIC, "partition": tp}
        row(99, "invoke", "drain", where)
        row(99, "ok", "drain", {**where, "records": records, "high_watermark": hw,
                                "log_start_offset": lso, "last": last})

    for value in range(draw(st.integers(0, 25), "sends")):
        for d in due:
            d[0] -= 1
        for _, who, done in [d for d in due if d[0] < 0]:
            row(done["process"], done["type"], "send", done["value"])
            if done["type"] == "info":  # its process is retired
                process[who] = next(fresh)
        due = [d for d in due if d[0] >= 0]
        if odd(0.3):  # a consumer polls
            c = draw(st.integers(0, 1))
            p, tp = process[("c", c)], draw(st.integers(0, n - 1))
            records = []
            for _ in range(draw(st.integers(0, 4))):
                at = position[(c, tp)] + (draw(st.sampled_from([-2, -1, 1, 2])) if odd(0.1) else 0)
                held = logs[tp][at] if 0 <= at < len(logs[tp]) else None
                x = draw(STRANGERS) if odd(0.1) or (held is None and odd(0.5)) else held
                if held is not None or x is not None:
                    records.append([TOPIC, tp, max(at, 0), x])
                    position[(c, tp)] = max(at, 0) + 1
            answer = draw(st.sampled_from(["ok"] * 8 + ["fail", "info"]))
            row(p, "invoke", "poll", None)
            row(p, answer, "poll", {"records": records} if answer == "ok" else None)
            if answer == "info":
                process[("c", c)] = next(fresh)
        if odd(0.03):  # a drain op in the middle of it all
            tp = draw(st.integers(0, n - 1))
            drain(tp, [[o, x] for o, x in enumerate(logs[tp])], odd(0.5), len(logs[tp]), 0)
        who = ("p", draw(st.integers(0, 2)))
        tp = draw(st.integers(0, n - 1))
        outcome = draw(st.sampled_from(["ok"] * 6 + ["fail", "info", None]))
        sent = {"topic": TOPIC, "partition": tp, "value": value}
        row(process[who], "invoke", "send", sent)
        offset = -1
        if outcome == "ok" or (outcome == "info" and odd(0.5)) or (outcome == "fail" and odd(0.1)):
            offset = len(logs[tp])
            logs[tp].append(value)
            if odd(0.05):  # written twice
                logs[tp].append(value)
        if offset >= 0 and odd(0.1):  # an ack that says another offset, or none
            offset = draw(st.integers(-1, len(logs[tp]) + 1))
        if outcome is not None:
            done = {**sent, "offset": offset} if outcome == "ok" else sent
            due.append([draw(st.integers(0, 4)), who, {"process": process[who], "type": outcome,
                                                       "value": done}])
    late = draw(st.integers(0, len(due)))  # completions once the drain has begun
    for _, _, done in due[:len(due) - late]:
        row(done["process"], done["type"], "send", done["value"])
    for tp, log in enumerate(logs):
        if odd(0.05):
            continue  # no drain
        lso = draw(st.sampled_from([0, 0, 0, 1, 2]))
        since = draw(st.integers(0, lso)) if odd(0.3) else lso  # the log start moved as it read
        records = [[o, x] for o, x in enumerate(log) if o >= since]
        if records and odd(0.3):  # it misses a record
            del records[draw(st.integers(0, len(records) - 1))]
        if records and odd(0.2):  # it reads another value somewhere
            records[draw(st.integers(0, len(records) - 1))][1] = draw(
                st.sampled_from([*log, -1, "x"]))
        if odd(0.1):  # a record past the log's end
            records.append([len(log) + draw(st.integers(0, 1)), draw(st.sampled_from([*log, None]))])
        hw = max(len(log) + draw(st.integers(-2, 1)), 0)
        cut = draw(st.integers(0, len(records)))
        drain(tp, records[:cut], False, hw, lso)
        drain(tp, records[cut:], not odd(0.05), hw, lso)
    for _, _, done in due[len(due) - late:]:
        row(done["process"], done["type"], "send", done["value"])
    replicas = None
    if odd(0.5):
        replicas = []
        for tp, log in enumerate(logs):
            for node in range(1, 3 + (not odd(0.1))):
                end = max(len(log) + draw(st.integers(-1, 2)), 0)
                start = draw(st.sampled_from([0, 0, 1]))
                other = draw(st.sets(st.integers(0, max(end - 1, 0)), max_size=1)) if odd(0.2) else set()
                replicas.append({"topic": TOPIC, "partition": tp, "node": node,
                                 "log_start_offset": start, "log_end_offset": end, "hw_checkpoint": end,
                                 "batches": [[o, o, 0, 1000 + o + (o in other)] for o in range(start, end)]})
    return Wild(n, rows, replicas)


@settings(SETTINGS, max_examples=100)
@given(history=wild(), data=st.data())
def test_arbitrary_histories_are_held_to_the_definitions(history: Wild, data: st.DataObject) -> None:
    note("\n".join(orjson.dumps(r).decode() for r in history.rows))
    note(f"replicas: {history.replicas}")
    held_in_small_steps(spec_for(history.partitions), history.rows, data, history.replicas)
