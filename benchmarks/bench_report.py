"""The run report of a big run: its size, the time to build it, the time to open it.

    .venv/bin/python benchmarks/bench_report.py                 # both runs below
    .venv/bin/python benchmarks/bench_report.py --lines 1000000 --examples 0

Two runs, each written as a run writes it (``bench_checker.py``'s synthetic history),
checked as ``faultline check`` does (which writes the sends' columns the report reads),
then reported: a run of ``--lines`` lines (10 M) with no anomaly, whose plots must be
downsampled; and a smaller one with eight anomaly types planted ``--examples`` times
each (:func:`plant_anomalies`), so that results.json holds its most examples of each
(1,000), every one of which the page must show. Prints each report's size and build
time, then opens it in headless Chromium (Debian's ``/usr/bin/chromium``, driven by
playwright) and times the load until Bokeh's documents are idle, ``--opens`` times; a
machine without Chromium gets the sizes only. Targets (issue 13): under 5 MB, opened
in under 2 s; figures, not assertions.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_checker import shape_for, write_run
from playwright.sync_api import sync_playwright

from faultline.checkers.result import MAX_ANOMALY_EXAMPLES
from faultline.checkers.results_file import check_run
from faultline.checkers.synthetic import Row, Shape, generate
from faultline.report.page import build_report

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def open_seconds(report: Path, opens: int) -> list[float]:
    """Seconds from navigation to idle Bokeh documents, once per fresh page."""
    times = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            for _ in range(opens):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                t = time.perf_counter()
                page.goto(report.as_uri(), wait_until="load")
                page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0"
                                       " && Bokeh.documents[0].is_idle", timeout=120_000)
                times.append(time.perf_counter() - t)
                page.close()
        finally:
            browser.close()
    return times


def plant_anomalies(rows: list[Row], n: int) -> list[Row]:
    """``rows`` (a synthetic history, edited in place) with ``n`` of each of eight anomaly
    types: acknowledged values of partition 0 no drain reads (lost writes, and phantom
    reads where a consumer had polled them), acks of partition 1 naming the next offset
    (inconsistent offsets), polls that skip their first record or read backwards, and
    records appended to partition 2's drain: values already there (duplicates), values
    never sent (unexpected), values of its failed sends (aborted reads). Needs about
    90 ``n`` values (5% failed sends) and 2 ``n`` polls of 4 records or more."""
    acked = [r["value"] for r in rows if r["f"] == "send" and r["type"] == "ok"]
    failed = [r["value"]["value"] for r in rows if r["f"] == "send" and r["type"] == "fail"
              and r["value"]["partition"] == 2]
    drains: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if r["f"] == "drain" and r["type"] == "ok":
            drains.setdefault(r["value"]["partition"], []).append(r["value"])
    zero = [v["value"] for v in acked if v["partition"] == 0]
    lost = set(zero[len(zero) // 4:][:n])
    for d in drains[0]:
        d["records"] = [x for x in d["records"] if x[1] not in lost]
    for v in [v for v in acked if v["partition"] == 1][:n]:
        v["offset"] += 1
    polls = [r["value"]["records"] for r in rows if r["f"] == "poll" and r["type"] == "ok"
             and r["value"] and len(r["value"]["records"]) >= 4]
    for records in polls[1:2 * n:2]:
        del records[0]
    for records in polls[2:2 * n + 1:2]:
        records.reverse()
    last = drains[2][-1]
    there = [x[1] for d in drains[2] for x in d["records"]][:n]
    extra = there + [10**12 + k for k in range(n)] + failed[:n]
    hw = last["high_watermark"]
    last["records"] += [[hw + i, v] for i, v in enumerate(extra)]
    for d in drains[2]:
        d["high_watermark"] = hw + len(extra)
    return rows


def measure(label: str, write: Callable[[Path], int], opens: int) -> None:
    """Write a run with ``write``, check it, build its report and print the figures."""
    with tempfile.TemporaryDirectory(prefix="fl-bench-report-") as tmp:
        run_dir = Path(tmp)
        t = time.perf_counter()
        lines = write(run_dir)
        print(f"{label}: generated {lines:,} lines in {time.perf_counter() - t:.0f} s", flush=True)
        t = time.perf_counter()
        result = check_run(run_dir)
        seen = ", ".join(f"{a} ×{n:,}" for a, n in result.anomaly_counts.items() if n) or "no anomaly"
        print(f"{label}: checked in {time.perf_counter() - t:.1f} s ({seen})", flush=True)
        t = time.perf_counter()
        report = build_report(run_dir)
        built = time.perf_counter() - t
        rows = sum(len(v) for v in result.anomalies.values())
        print(f"{label}: report {report.stat().st_size / 1e6:.2f} MB (target < 5 MB) with {rows:,} "
              f"example rows, built in {built:.1f} s", flush=True)
        if not CHROMIUM.exists():
            print(f"{label}: not opened: no Chromium at {CHROMIUM}")
            return
        times = open_seconds(report, opens)
        print(f"{label}: opened in Chromium in {statistics.median(times):.2f} s median of {len(times)} "
              f"({', '.join(f'{s:.2f}' for s in times)}; target < 2 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000_000, help="the run without anomalies (0: skip it)")
    ap.add_argument("--examples", type=int, default=MAX_ANOMALY_EXAMPLES,
                    help="examples of each anomaly type planted in the other run (0: skip it)")
    ap.add_argument("--opens", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.examples:
        shape = Shape(seed=args.seed, values=90 * args.examples, producers=4, fail=0.05, info=0.01,
                      faults=10, drain_batch=2000)
        measure("eight anomaly types", lambda d: write_run(
            d, plant_anomalies(list(generate(shape)), args.examples), compressed=True), args.opens)
    if args.lines:
        measure(f"{args.lines:,} lines", lambda d: write_run(
            d, generate(shape_for(args.lines, args.seed)), compressed=True), args.opens)


if __name__ == "__main__":
    main()
