"""The pipeline: sweep directories -> Parquet tables -> the check on executors -> per-cell aggregates.

:func:`analyze` runs it on a SparkSession (:mod:`faultline.analysis.spark`):

1. ``ops``: every done cell's history, read on the executors by
   :func:`faultline.history.iter_rows` (``mapInArrow``, one run per task), written as
   Parquet partitioned by sweep and run;
2. the check: ``ops`` read back, grouped by run, each group checked on an executor by
   :func:`faultline.checkers.stored.check_stored` (:mod:`faultline.analysis.check`);
3. per run, from ``ops``: the span of the sends and the latency of every ok send;
4. ``runs``, ``faults``, ``anomalies`` from the verdicts (:mod:`faultline.analysis.tables`),
   ``observations`` from the runs' files, and ``cells``, the per-cell aggregates
   (:func:`faultline.analysis.aggregate.cells`), all Parquet.

Tables go to ``<out>/tables/<name>/`` on any path Spark writes (a local directory by
default); each is partitioned by ``sweep`` (and ``run`` where a run has many rows), and
partitions are overwritten one by one, so analyzing tonight's sweep into last night's
``out`` keeps last night's rows. The run directories must be readable by the executors
at the paths ``sweep.json`` gives (a local or shared filesystem).
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import orjson
import pyarrow as pa

from faultline.analysis import aggregate, tables
from faultline.analysis.check import CHECK_DDL, check_group, valid_text
from faultline.analysis.rows import OPS_SCHEMA, history_batches
from faultline.analysis.sweepdir import Cell, Sweep, read_sweeps
from faultline.checkers.stored import check_stored
from faultline.errors import FaultlineError, HistoryError
from faultline.rundir import TEST_FILE, find_history
from faultline.spec import TestSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from faultline.analysis.spark import Progress

TABLES = ("runs", "ops", "faults", "anomalies", "observations", "cells")


@dataclass(slots=True)
class Analysis:
    """What :func:`analyze` made: the sweeps read, where each table is, the ``runs`` and
    ``cells`` rows (small: one per run, one per cell and night) for the page and JUnit, each
    run's results.json object as the check on the executors gave it (by (sweep, run); absent
    for a run not checked) and how many history lines were read."""

    sweeps: list[Sweep]
    tables: dict[str, str]
    runs: list[dict[str, Any]] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)
    results: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    history_lines: int = 0


def analyze(spark: SparkSession, sweep_dirs: Sequence[Path], out: str,
            progress: Progress | None = None) -> Analysis:
    """Run the pipeline over ``sweep_dirs`` into ``out`` (see the module doc); HistoryError for a
    directory that is not a sweep directory."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    sweeps = read_sweeps(sweep_dirs)
    every = [c for s in sweeps for c in s.cells]
    if not every:
        raise HistoryError(", ".join(map(str, sweep_dirs)), None, "no cells to analyze in sweep.json")
    done = [c for c in every if c.status == "done"]
    run_dirs = {(c.sweep, c.id): str(c.run_dir) for c in done}
    where = {t: f"{out.rstrip('/')}/tables/{t}" for t in TABLES}
    ids = [s.id for s in sweeps]
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    for t in ("ops", "observations", "faults", "anomalies"):
        forget_sweeps(where[t], ids)

    def step(what: str) -> Any:
        return progress.step(what) if progress is not None else nullcontext()

    listing = spark.createDataFrame([(c.sweep, c.id, str(c.run_dir)) for c in done] or [],
                                    "sweep string, run string, run_dir string")
    listing = listing.repartition(max(1, min(len(done), 256)))
    with step(f"ingest: {len(done)} runs' histories -> ops"):
        ops_schema = from_arrow_schema(OPS_SCHEMA)
        (listing.mapInArrow(_ingest_ops, ops_schema)
         .write.partitionBy("sweep", "run").mode("overwrite").parquet(where["ops"]))
        (listing.mapInArrow(_ingest_observations, from_arrow_schema(tables.OBSERVATIONS_SCHEMA))
         .write.partitionBy("sweep", "run").mode("overwrite").parquet(where["observations"]))
    ops = spark.read.schema(ops_schema).parquet(where["ops"]).where(F.col("sweep").isin(ids))
    with step("check: each run on an executor"):
        checked = {(r["sweep"], r["run"]): r for r in ops.groupBy("sweep", "run").applyInArrow(
            check_group(run_dirs), CHECK_DDL).collect()}
    with step("latency and send spans from ops"):
        lat = aggregate.latencies(ops).cache()
        spans = {(r["sweep"], r["run"]): r for r in aggregate.send_spans(ops, lat).collect()}
        lines = ops.count()
    with step("runs, faults, anomalies"):
        runs, faults, anomalies = [], [], []
        results: dict[tuple[str, str], dict[str, Any]] = {}
        for c in every:
            row, result = _run(c, checked.get((c.sweep, c.id)), spans.get((c.sweep, c.id)))
            runs.append(row)
            if result is not None:
                results[(c.sweep, c.id)] = result
            faults += tables.fault_rows(c, result)
            anomalies += tables.anomaly_rows(c, result)
        _write(spark, runs, where["runs"], ("sweep",), tables.RUNS_SCHEMA)
        _write(spark, faults, where["faults"], ("sweep", "run"), tables.FAULTS_SCHEMA)
        _write(spark, anomalies, where["anomalies"], ("sweep", "run"), tables.ANOMALIES_SCHEMA)
    with step("per-cell aggregates"):
        # read back with the schema written: another night's partitions, written by an
        # older faultline, may lack a column or hold it as another type
        runs_df = (spark.read.schema(from_arrow_schema(tables.RUNS_SCHEMA)).parquet(where["runs"])
                   .where(F.col("sweep").isin(ids)))
        # the random-seed runs: a targeted run is judged beside its cell (analysis.evidence)
        cells_df = aggregate.cells(runs_df.where(F.col("recipe").isNull()), lat, tables.CONFIG_COLUMNS)
        cells_df.write.partitionBy("sweep").mode("overwrite").parquet(where["cells"])
        cell_rows = [r.asDict(recursive=True) for r in spark.read.schema(cells_df.schema).parquet(
            where["cells"]).where(F.col("sweep").isin(ids)).orderBy("created", "cell").collect()]
    lat.unpersist()
    return Analysis(sweeps, where, runs, cell_rows, results, lines)


def _run(cell: Cell, checked: Any, span: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A cell's ``runs`` row and its results object (None when it has none)."""
    spec: TestSpec | None = None
    error: str | None = None
    if (cell.run_dir / TEST_FILE).exists():
        try:
            spec = TestSpec.load(cell.run_dir / TEST_FILE)
        except FaultlineError as e:
            error = str(e)
    result: dict[str, Any] | None = None
    valid = "unknown"
    if checked is not None:
        valid, error = checked["valid"], checked["error"] or error
        result = orjson.loads(checked["result_json"]) if checked["result_json"] else None
    elif cell.status == "done":
        # No ops: the history could not be read. The same check names why.
        try:
            r = check_stored(cell.run_dir)
            result, valid = r.to_json(), valid_text(r.valid)
        except FaultlineError as e:
            error = str(e)
    figures = tables.SendFigures(
        first_send=int(span["first_send"] or 0), last_send=int(span["last_send"] or 0),
        p50_ms=span["p50_ms"], p99_ms=span["p99_ms"]) if span is not None else tables.SendFigures()
    row = tables.run_row(cell, spec, valid, result, error, figures)
    permitted, why = aggregate.expected_loss(spec) if spec is not None else (None, None)
    row["expected_loss"] = None if permitted is None else "permitted" if permitted else "forbidden"
    row["expected_reason"] = why
    row["results_json"] = orjson.dumps(result).decode() if result is not None else None
    return row, result


def _ingest_ops(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow: (sweep, run, run_dir) rows -> each run's ``ops`` rows; a history that cannot be
    read gives none (the driver's check names why)."""
    for batch in batches:
        for r in batch.to_pylist():
            try:
                yield from history_batches(Path(r["run_dir"]), find_history(Path(r["run_dir"])),
                                           r["sweep"], r["run"])
            except FaultlineError:
                continue


def _ingest_observations(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow: (sweep, run, run_dir) rows -> each run's ``observations`` rows (an unreadable
    file gives none)."""
    for batch in batches:
        for r in batch.to_pylist():
            try:
                yield from tables.observation_batches(Path(r["run_dir"]), r["sweep"], r["run"])
            except FaultlineError:
                continue


def forget_sweeps(path: str, ids: Collection[str]) -> None:
    """Delete the ``sweep=`` partitions of ``ids`` from the table at ``path`` (a local
    directory), before they are written again. Writing overwrites only the (sweep, run)
    partitions it has rows for: a run whose anomalies (faults, ops) are gone since the
    last analysis would otherwise keep its old ones."""
    table = Path(path)
    if not table.is_dir():
        return
    for part in table.iterdir():
        key, _, value = part.name.partition("=")
        if key == "sweep" and unquote(value) in ids:
            shutil.rmtree(part)


def _write(spark: SparkSession, rows: list[dict[str, Any]], path: str,
           partition_by: Sequence[str], schema: pa.Schema) -> None:
    """Write ``rows`` (dicts) as Parquet of ``schema`` (a key it lacks is null; a key it does
    not name is left out), partitioned by ``partition_by``. Nothing is written for no rows."""
    if not rows:
        return
    df: DataFrame = spark.createDataFrame(pa.Table.from_pylist(rows, schema=schema))
    df.write.partitionBy(*partition_by).mode("overwrite").parquet(path)
