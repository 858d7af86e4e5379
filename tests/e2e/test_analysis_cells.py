"""Faults of the Spark pipeline reviews found, on the session's Spark: each test fails
against the code before (those of the per-cell aggregates alone: tests/unit/analysis/test_cells.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.dataset as ds
import pytest

from faultline.analysis import aggregate, tables
from faultline.analysis.pipeline import analyze, partitions, replace_partitions
from tests.analysis_sweeps import CellRun, make_sweep


def _two_nights(tmp_path: Path) -> tuple[Path, Path]:
    """Two nights of one sweep: the first's one cell failed, the second's lost a write."""
    failed = make_sweep(tmp_path / "a", "night", "2026-11-22T02:00:00Z",
                        [CellRun("acks=1", {"producer.acks": "1"}, status="failed", error="no cluster")])
    lossy = make_sweep(tmp_path / "b", "night", "2026-11-23T02:00:00Z",
                       [CellRun("acks=1", {"producer.acks": "1"},
                                config={"producer.acks": "1", "producer.enable_idempotence": False})])
    return failed, lossy


def test_a_night_analyzed_into_an_out_that_holds_another_night(spark: Any, tmp_path: Path) -> None:
    """One OUT collects many nights, each analyzed when it ends. The runs table was read back
    with the schema of any night's partition: one whose cells all failed has no config
    columns (and strings where a column had no value: no fault, no loss), so the next
    night's analysis failed (an AnalysisException, or a Parquet type mismatch; nothing
    written after the runs table)."""
    failed, lossy = _two_nights(tmp_path)
    out = str(tmp_path / "out")
    analyze(spark, [failed], out)
    result = analyze(spark, [lossy], out)
    (cell,) = result.cells
    assert (cell["runs"], cell["runs_lost"]) == (1, 1) and cell["fault_to_first_loss_s"] is not None


def test_nights_analyzed_apart_read_as_one_table(spark: Any, tmp_path: Path) -> None:
    """Each table's columns were typed by the values of the night written: a column with no
    value that night (every cell failed: no throughput, no loss) was written as strings, so
    the tables of an OUT collecting many nights could not be read as one (Spark: a
    Parquet column cannot be converted) or read their numbers as text (pyarrow)."""
    import pyarrow as pa

    failed, lossy = _two_nights(tmp_path)
    out = str(tmp_path / "out")
    analyze(spark, [failed], out)
    analyze(spark, [lossy], out)
    for t in ("runs", "cells"):
        got = {r["sweep"]: r for r in spark.read.parquet(f"{out}/tables/{t}").collect()}
        assert got["night-20261122T020000Z"]["fault_to_first_loss_s"] is None
        assert isinstance(got["night-20261123T020000Z"]["fault_to_first_loss_s"], float)
        table = ds.dataset(f"{out}/tables/{t}", partitioning="hive").to_table()
        assert table.schema.field("fault_to_first_loss_s").type == pa.float64()
        if t == "runs":
            assert table.schema.field("seed").type == pa.int64()
    fault = {"sweep": "s", "run": "r", "fault": 0, "f": "kill", "start_ns": 1, "nodes": []}
    replace_partitions(str(tmp_path / "faults"), ["s"], ("sweep", "run"),
                       partitions([fault], ("sweep", "run"), tables.FAULTS_SCHEMA))
    faults = spark.read.parquet(str(tmp_path / "faults"))
    assert dict(faults.dtypes)["end_ns"] == "bigint", "a fault never healed: no end, still a time"


def test_the_latency_percentiles_are_those_spark_computes(spark: Any) -> None:
    """The pipeline computes p50 / p99 per run and per cell with numpy (Spark's ``percentile``
    costs microseconds a value): the figures must be Spark's, to the last bit."""
    from pyspark.sql import functions as F

    rng = np.random.default_rng(7)
    for values in (rng.integers(0, 10**9, 1001), rng.integers(0, 50, 1000), np.array([5, 5, 6]),
                   rng.integers(10**6, 3 * 10**7, 4099)):
        df = spark.createDataFrame([(int(v),) for v in values], "v long")
        want = df.agg(F.percentile("v", 0.5).alias("p50"), F.percentile("v", 0.99).alias("p99")).first()
        assert (aggregate.percentile(values, 0.5), aggregate.percentile(values, 0.99)) == (
            want["p50"], want["p99"])


def test_a_cells_latencies_are_over_every_ok_send_of_its_runs(spark: Any) -> None:
    """cell_latencies: the percentiles of a cells row over its runs' latencies taken together
    (not the mean of the runs' own), none for a row whose runs have none; the runs of
    another row do not count."""
    rng = np.random.default_rng(3)
    a, b, c = (rng.integers(10**6, 10**8, n) for n in (1000, 37, 500))
    groups: aggregate.Groups = {
        ("s", "k1", "x"): [{"sweep": "s", "run": "r1"}, {"sweep": "s", "run": "r2"}],
        ("s", "k2", "x"): [{"sweep": "s", "run": "r3"}],
        ("s", "k3", "x"): [{"sweep": "s", "run": "r4"}],
    }
    latencies = spark.createDataFrame(
        [("s", "r1", aggregate.pack(a)), ("s", "r2", aggregate.pack(b)), ("s", "r3", aggregate.pack(c)),
         ("s", "r4", b"")], "sweep string, run string, latency_ns binary")
    got = aggregate.cell_latencies(spark, latencies, groups)
    assert got == {("s", "k1", "x"): aggregate.latency_ms(np.concatenate([a, b])),
                   ("s", "k2", "x"): aggregate.latency_ms(c)}


def test_an_analysis_that_fails_leaves_the_last_ones_tables_whole(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: a sweep's runs, faults and anomalies were replaced before its cells
    were made, so an analysis that failed there left new runs beside the last one's cells
    (and, before, deleted both up front)."""
    _, lossy = _two_nights(tmp_path)
    out = str(tmp_path / "out")
    analyze(spark, [lossy], out)

    def files() -> dict[Path, int]:
        """Every file of the four driver-written tables, with when it was written."""
        return {f: f.stat().st_mtime_ns for t in ("runs", "faults", "anomalies", "cells")
                for f in Path(out, "tables", t).rglob("*") if f.is_file()}

    before = files()
    assert any("cells" in f.parts for f in before)

    def broken(*args: Any) -> None:
        raise RuntimeError("the latency query failed")

    monkeypatch.setattr(aggregate, "cell_latencies", broken)
    with pytest.raises(RuntimeError):
        analyze(spark, [lossy], out)
    assert files() == before
