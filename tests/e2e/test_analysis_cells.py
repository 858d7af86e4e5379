"""Two faults of the Spark pipeline a review found, on the session's Spark: each test fails
against the code before."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from faultline.analysis import aggregate
from faultline.analysis.comparison import grids
from faultline.analysis.pipeline import _write, forget_sweeps
from faultline.analysis.tables import config_columns
from faultline.spec import NemesisSpec, TestSpec


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
    _write(spark, rows, str(tmp_path / "runs"), ("sweep",))
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
    _write(spark, [{"sweep": "nightly-1", **row}, {"sweep": "nightly-2", **row}], out, ("sweep", "run"))
    forget_sweeps(out, ["nightly-1"])
    _write(spark, [], out, ("sweep", "run"))  # analyzed again: no anomaly now
    left = spark.read.parquet(out)
    assert [r["sweep"] for r in left.select("sweep").collect()] == ["nightly-2"]
