"""The report's measures: the checker's read into buckets, and what only the history
gives (per-partition throughput, latency downsampling, errors by kind), from the sends
as columns (the checker's table: tests/unit/checkers/test_table.py).

Fault windows themselves are the checker's: tests/unit/checkers/test_measures.py."""

from __future__ import annotations

from faultline.checkers.table import Send, SendTable
from faultline.report import measures as m
from faultline.report import plots

S = 1_000_000_000


def test_fault_windows_read_from_measures() -> None:
    ms = {"faults": [{"f": "kill", "kind": "kill", "start": S, "end": 5 * S, "nodes": [2],
                      "detail": "killed"},
                     {"f": "pause", "kind": "pause", "start": 2 * S, "end": None, "nodes": [3],
                      "detail": "x" * 300},
                     {"f": "junk"}]}
    windows = m.fault_windows(ms)
    assert windows[0] == m.FaultWindow("kill", S, 5 * S, (2,), "killed")
    assert windows[1].end is None and len(windows[1].detail) == 160 and len(windows) == 2
    assert m.fault_windows({}) == []


def test_buckets_are_the_checkers() -> None:
    b = m.Buckets.over(30 * S, {"bucket_ns": S // 5})
    assert b.width == S // 5 and len(b.starts) == 151
    assert b.index(-5) == 0 and b.index(10 * S) == 50 and b.index(10**15) == len(b.starts) - 1
    assert m.Buckets.over(10 * S, {}).starts == [i * S for i in range(11)]  # the checker's default


def _sends(n: int) -> SendTable:
    out = [Send(0, i, "t", i % 3, i * 1_000_000, i * 1_000_000 + 2_000_000, "ok", i) for i in range(n)]
    if n > 700:
        out[500] = out[500]._replace(outcome="fail", error="NOT_ENOUGH_REPLICAS")
        out[700] = out[700]._replace(end_time=out[700].invoke_time + 9 * S)
    return SendTable.of(out)


def test_latency_points_downsample_keeps_failures_and_the_slowest() -> None:
    pts = m.latency_points(_sends(20_000), max_points=1000)
    assert pts.total == 20_000 and pts.shown <= 1100
    assert "fail" in pts.outcome
    assert max(pts.latency_ms) == 9000
    assert pts.invoke_s == sorted(pts.invoke_s)
    small = m.latency_points(_sends(100), max_points=1000)
    assert small.shown == small.total == 100


def test_latency_points_bound_many_failures() -> None:
    # half of 20k sends failed: they get half the budget, spread evenly over the run
    sends = SendTable.of([Send(0, i, "t", 0, i * 1_000_000, i * 1_000_000 + 2_000_000,
                               "fail" if i % 2 else "ok", None if i % 2 else i)
                          for i in range(20_000)])
    pts = m.latency_points(sends, max_points=1000)
    fails = [t for t, o in zip(pts.invoke_s, pts.outcome, strict=True) if o == "fail"]
    assert pts.total == 20_000 and pts.shown <= 1100
    assert len(fails) >= 500 and fails[0] < 0.1 and fails[-1] > 19.9
    assert "ok" in pts.outcome


def test_throughput_percentiles_errors() -> None:
    sends = _sends(1000)
    b = m.Buckets.over(S, {"bucket_ns": S})
    thr = m.throughput(sends, b)
    # 1000 sends, less one failed, one slow and two completing at or after 1 s
    assert sum(v[0] for v in thr.values()) == 996 and set(thr) == {"t/0", "t/1", "t/2"}
    ms = {"throughput": [{"start": 0, "ok": 996, "fail": 1, "info": 0, "faults": []},
                         {"start": S, "ok": 3, "fail": 0, "info": 0, "faults": []}],
          "latency": [{"start": 0, "count": 996, "p50_ms": 2.0, "p95_ms": 2.0, "p99_ms": 2.0,
                       "max_ms": 9000.0}]}
    assert m.total_throughput(ms, b) == [996.0, 3.0]
    pct = m.percentiles(ms, b)
    assert pct["p50"][0] == 2.0 and pct["max"][0] == 9000.0 and pct["p50"][1] is None
    errs = [(i, "send", f"E{i % 12}") for i in range(120)]
    kinds = m.errors_by_kind(errs, m.Buckets.over(200, {"bucket_ns": 100}), max_kinds=9)
    assert len(kinds) == 10 and "other" in kinds and sum(map(sum, kinds.values())) == 120


def test_availability_windows() -> None:
    ms = {"unavailable": [{"topic": "t", "partition": 0, "windows": [
        {"start": S // 2 + 1, "end": 3 * S + 1}, {"start": 3 * S + 2, "end": 5 * S}]},
        {"topic": "t", "partition": 1, "windows": [{"start": 0, "end": 5 * S}]}]}
    a = m.availability(ms, {("t", 0): 4, ("t", 1): 0, ("t", 2): 7}, 0, 5 * S)
    assert a[("t", 0)].windows == [(S // 2 + 1, 3 * S + 1), (3 * S + 2, 5 * S)] and a[("t", 0)].acked == 4
    assert a[("t", 1)].windows == [(0, 5 * S)] and a[("t", 1)].fraction == 0 and a[("t", 1)].acked == 0
    assert round(a[("t", 0)].fraction, 3) == round(1 - (2.5 * S + 2 * S - 1) / (5 * S), 3)
    assert a[("t", 2)] == m.Availability([], 1.0, 7)


def test_the_latency_plot_says_its_percentiles_are_by_acknowledgement_time() -> None:
    """The scatter draws a send at its invoke time, the checker's percentiles are per
    bucket of completion time: a 30 s send is a point at 1 s and a max of 30 s at 31 s.
    The plot must say which clock each uses, or the max line sits where no point is."""
    d = plots.PlotData(duration=40, bucket_width=1, bucket_starts=[float(i) for i in range(41)], bands=[],
                       throughput={}, scatter_t=[1.0], scatter_ms=[30_000.0], scatter_outcome=["ok"],
                       scatter_total=1, percentiles={"max": [None] * 31 + [30_000.0] + [None] * 9},
                       errors={}, unavailable={})
    script = plots.render(d).script
    assert "each send at its invoke time" in script
    assert "percentiles of the ok sends acknowledged in each 1 s bucket" in script
