"""The run report of a big run: its size, the time to build it, the time to open it.

    .venv/bin/python benchmarks/bench_report.py                 # a 10 M-line run
    .venv/bin/python benchmarks/bench_report.py --lines 1000000

Writes a generated history as a run writes it (``history.jsonl.zst``, the shape of
``bench_checker.py``), checks it as ``faultline check`` does (which writes the sends'
columns the report reads), builds ``report.html``, then opens it in headless Chromium
(Debian's ``/usr/bin/chromium``, driven by playwright) and times the load until Bokeh's
documents are idle, ``--opens`` times. Targets (issue 13): under 5 MB, opened in
under 2 s.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench_checker import shape_for, write_run
from playwright.sync_api import sync_playwright

from faultline.checkers.cli import check_run
from faultline.report.page import build_report

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def open_seconds(report: Path, opens: int) -> list[float]:
    """Seconds from navigation to idle Bokeh documents, once per fresh page."""
    times = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000_000)
    ap.add_argument("--opens", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fl-bench-report-") as tmp:
        run_dir = Path(tmp)
        t = time.perf_counter()
        lines = write_run(run_dir, shape_for(args.lines, args.seed), compressed=True)
        print(f"generated {lines:,} lines in {time.perf_counter() - t:.0f} s", flush=True)
        t = time.perf_counter()
        check_run(run_dir)
        print(f"checked in {time.perf_counter() - t:.1f} s", flush=True)
        t = time.perf_counter()
        report = build_report(run_dir)
        built = time.perf_counter() - t
        size = report.stat().st_size
        opens = open_seconds(report, args.opens)
        print(f"report: {size / 1e6:.2f} MB (target < 5 MB), built in {built:.1f} s; opened in "
              f"Chromium in {statistics.median(opens):.2f} s median of {len(opens)} "
              f"({', '.join(f'{s:.2f}' for s in opens)}; target < 2 s)")


if __name__ == "__main__":
    main()
