"""A 100k-op run's report stays under 5 MB: plots are downsampled (buckets, a bounded
latency scatter), the anomaly tables never are."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from faultline.report.page import build_report
from tests.e2e.report_runs import Scenario, make_run

pytestmark = pytest.mark.e2e

LIMIT = 5 * 1024 * 1024


def test_100k_op_report_under_5_mb(tmp_path: Path) -> None:
    kills = tuple((20.0 + 30 * i, i % 3 + 1, 8.0) for i in range(10))
    run = make_run(tmp_path / "big", Scenario(duration_s=300, rate=83, kills=kills, lost_per_kill=40))
    assert run.lines >= 100_000
    started = time.perf_counter()
    report = build_report(run.path)
    elapsed = time.perf_counter() - started
    size = report.stat().st_size
    print(f"\n100k-op report: {run.lines} ops, {size / 1e6:.2f} MB, built in {elapsed:.1f} s")
    assert size < LIMIT, f"{size} bytes"
    html = report.read_text(encoding="utf-8")
    rows = re.findall(r'<tr class="example[^"]*" data-anomaly="lost-write" data-value="(\d+)"', html)
    assert sorted(map(int, rows)) == sorted(x["value"] for x in run.lost)  # every lost write, no sampling
    assert len(run.lost) == 400
