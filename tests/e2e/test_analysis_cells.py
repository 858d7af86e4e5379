"""Faults of the Spark pipeline reviews found, on the session's Spark: each test fails
against the code before."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from faultline.analysis import aggregate, tables
from faultline.analysis.comparison import config, grids, names, status
from faultline.analysis.pipeline import _write, analyze, forget_sweeps
from faultline.analysis.tables import config_columns
from faultline.spec import NemesisSpec, TestSpec
from tests.analysis_sweeps import CellRun, make_sweep


def run_row(run: str, status: str, spec: TestSpec | None, **kw: Any) -> dict[str, Any]:
    """A runs row as the pipeline writes it; a run that wrote no test.json has no config."""
    return {"sweep": "nightly-1", "run": run, "cell": "nemesis.faults=kill,producer.acks=all",
            "night": "2026-11-23", "created": "2026-11-23T02:00:00Z", "status": status,
            "run_dir": f"/x/{run}", "report": None,
            **(config_columns(spec) if spec is not None else {"seed": 1}),
            "valid": "unknown", "error": None, "violations": [], "permitted": [], "unknown": [],
            "n_lost_write": 0, "acked_per_s": None, "unavailability": None,
            "fault_to_first_loss_s": None, "expected_loss": None, "expected_reason": None, **kw}


def test_a_seed_without_test_json_does_not_move_its_cell_out_of_its_config(
        spark: Any, tmp_path: Path) -> None:
    """F.first took a config column from whichever run came first: a failed seed's nulls put
    a violating acks=all cell under "faults: none, acks=None, loss unknown"."""
    base = TestSpec()
    spec = dataclasses.replace(base, seed=2, nemesis=NemesisSpec(faults=("kill",)),
                               producer=dataclasses.replace(base.producer, acks="all"))
    rows = [run_row("seed=1", "failed", None, error="the cluster did not come up"),
            run_row("seed=2", "done", spec, valid="false", violations=["lost-write"],
                    n_lost_write=1, expected_loss="forbidden", expected_reason="acks=all")]
    _write(spark, rows, str(tmp_path / "runs"), ("sweep",), tables.RUNS_SCHEMA)
    runs = spark.read.parquet(str(tmp_path / "runs"))
    latencies = spark.createDataFrame([], "sweep string, run string, latency_ns long")
    config = sorted(k for k in rows[1] if k in config_columns(base))
    for order in (runs, runs.orderBy("run"), runs.orderBy(runs["run"].desc())):
        (cell,) = [r.asDict(recursive=True) for r in aggregate.cells(order, latencies, config).collect()]
        assert (cell["nemesis_faults"], cell["producer_acks"], cell["expected_loss"]) == (
            "kill", "all", "forbidden")
        assert [g["faults"] for g in grids([cell], tmp_path)] == ["kill"]


def test_analyzing_a_sweep_again_forgets_the_anomalies_it_no_longer_has(
        spark: Any, tmp_path: Path) -> None:
    """Writing overwrites only the (sweep, run) partitions it has rows for: after a checker
    fix, a run's old anomalies stayed in the table beside runs and cells that no longer
    counted them."""
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    out = str(tmp_path / "anomalies")
    row = {"run": "r1", "type": "lost-write", "example": 0, "violation": True}
    _write(spark, [{"sweep": "nightly-1", **row}, {"sweep": "nightly-2", **row}], out, ("sweep", "run"),
           tables.ANOMALIES_SCHEMA)
    forget_sweeps(out, ["nightly-1"])
    _write(spark, [], out, ("sweep", "run"), tables.ANOMALIES_SCHEMA)  # analyzed again: no anomaly now
    left = spark.read.parquet(out)
    assert [r["sweep"] for r in left.select("sweep").collect()] == ["nightly-2"]


def test_a_violation_the_broker_state_left_undecided_is_an_unknown_run(
        spark: Any, tmp_path: Path) -> None:
    """A run whose broker state could not be read is unknown whatever its history showed, and
    keeps the violations the history found: the cell counted it violating (the page said
    violation) where its results.json, its report and ``faultline sweep`` say unknown."""
    base = TestSpec()
    spec = dataclasses.replace(base, nemesis=NemesisSpec(faults=("kill",)),
                               producer=dataclasses.replace(base.producer, acks="all"))
    rows = [run_row("seed=1", "done", spec, valid="unknown", violations=["lost-write"], n_lost_write=1,
                    unknown=["broker-state-unreadable"]),
            run_row("seed=2", "done", spec, valid="true")]
    _write(spark, rows, str(tmp_path / "runs"), ("sweep",), tables.RUNS_SCHEMA)
    latencies = spark.createDataFrame([], "sweep string, run string, latency_ns long")
    config = sorted(k for k in rows[1] if k in config_columns(base))
    (cell,) = [r.asDict(recursive=True) for r in aggregate.cells(
        spark.read.parquet(str(tmp_path / "runs")), latencies, config).collect()]
    assert (cell["runs_violating"], cell["violations"], cell["runs_unknown"]) == (0, [], 1)
    assert status(cell) == "unknown"


def test_a_run_whose_loss_is_undecided_is_not_a_run_without_loss(spark: Any, tmp_path: Path) -> None:
    """An unknown run that lost no write (its drain incomplete, say) may have lost one: its
    report says "data loss undecided". The cell counted it a run without loss, so p_loss
    and its interval claimed evidence of safety the runs do not give."""
    base = TestSpec()
    rows = [run_row("seed=1", "done", base, valid="true"),
            run_row("seed=2", "done", base, valid="unknown", unknown=["incomplete-drain"]),
            run_row("seed=3", "done", base, valid="unknown", n_lost_write=2, unknown=["incomplete-drain"])]
    _write(spark, rows, str(tmp_path / "runs"), ("sweep",), tables.RUNS_SCHEMA)
    latencies = spark.createDataFrame([], "sweep string, run string, latency_ns long")
    config = sorted(k for k in rows[0] if k in config_columns(base))
    (cell,) = [r.asDict(recursive=True) for r in aggregate.cells(
        spark.read.parquet(str(tmp_path / "runs")), latencies, config).collect()]
    assert (cell["runs"], cell["runs_undecided"], cell["runs_lost"], cell["lost_sum"]) == (3, 1, 1, 2)
    lo, hi = aggregate.wilson(1, 2)
    assert cell["p_loss"] == 0.5 and cell["p_loss_low"] == pytest.approx(lo)
    assert cell["p_loss_high"] == pytest.approx(hi)


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


def test_runs_of_one_key_under_two_configs_are_two_cells(spark: Any, tmp_path: Path) -> None:
    """A sweep resumed after a default changed held runs of one cell key under two configs
    (here the workload's rate): they were one cells row, its loss figures mixing both and
    its config whichever run came first, so the page showed one config's loss as the other's."""
    base = dataclasses.replace(TestSpec(), nemesis=NemesisSpec(faults=("kill",)))
    slow = dataclasses.replace(base, workload=dataclasses.replace(base.workload, rate=100.0))
    rows = [run_row("seed=1", "done", dataclasses.replace(base, seed=1), valid="false",
                    violations=["lost-write"], n_lost_write=3),
            run_row("seed=2", "done", dataclasses.replace(slow, seed=2), valid="true"),
            run_row("seed=3", "done", dataclasses.replace(slow, seed=3), valid="true"),
            run_row("seed=4", "failed", None, error="the cluster did not come up")]
    _write(spark, rows, str(tmp_path / "runs"), ("sweep",), tables.RUNS_SCHEMA)
    latencies = spark.createDataFrame([], "sweep string, run string, latency_ns long")
    got = sorted((r.asDict(recursive=True) for r in aggregate.cells(
        spark.read.parquet(str(tmp_path / "runs")), latencies, sorted(config_columns(base))).collect()),
        key=lambda c: str(c["workload_rate"]))
    assert [(c["workload_rate"], c["runs_total"], c["runs_violating"], c["runs_lost"])
            for c in got] == [(0.0, 1, 1, 1), (100.0, 2, 0, 0), (None, 1, 0, 0)], \
        "a run without test.json belongs to neither config when its key has two"
    assert [sorted(r["run"] for r in c["run_list"]) for c in got] == [
        ["seed=1"], ["seed=2", "seed=3"], ["seed=4"]]
    named = names(got)  # as the page and junit.xml name them: by what tells them apart
    assert [named[config(c)] for c in got] == [
        f"nemesis.faults=kill,producer.acks=all (workload_rate={r})" for r in (0.0, 100.0, None)]


def test_nights_analyzed_apart_read_as_one_table(spark: Any, tmp_path: Path) -> None:
    """Each table's columns were typed by the values of the night written: a column with no
    value that night (every cell failed: no throughput, no loss) was written as strings, so
    the tables of an OUT collecting many nights could not be read as one (Spark: a
    Parquet column cannot be converted) or read their numbers as text (pyarrow)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

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
    _write(spark, [{"sweep": "s", "run": "r", "fault": 0, "f": "kill", "start_ns": 1, "nodes": []}],
           str(tmp_path / "faults"), ("sweep", "run"), tables.FAULTS_SCHEMA)
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
