"""The pipeline: sweep directories -> the check on executors -> Parquet tables -> per-cell aggregates.

:func:`analyze` runs it on a SparkSession (:mod:`faultline.analysis.spark`), a task per
run where the work is per run (``mapInArrow``):

1. the check, ``ops`` and ``observations``, in one task a run: every done cell's run
   checked on an executor by :func:`faultline.checkers.stored.check_stored_table`
   (:mod:`faultline.analysis.check`), which also gives its history's lines, the span of
   its sends and the latency of every ok send; then its history read again on that
   executor, by :func:`faultline.analysis.rows.ops_batches` when the check read it whole,
   else by :func:`faultline.analysis.rows.history_batches` (which gives nothing for a
   history :func:`faultline.history.iter_rows` refuses), and written by that executor
   (pyarrow) as its run's ``ops`` partition: no history line's row passes through the
   JVM; then its ``observations.jsonl`` (none for a file that cannot be read), written so
   too;
2. ``runs``, ``faults``, ``anomalies`` from the verdicts (:mod:`faultline.analysis.tables`),
   and ``cells``, the per-cell aggregates (:func:`faultline.analysis.aggregate.cells`), on
   the driver (:func:`partitions`, :func:`replace_partitions`), but for each cell's latency
   percentiles, all Parquet.

Tables go to ``<out>/tables/<name>/`` (``out`` a directory every executor writes at that
path: a local or shared filesystem); each is partitioned by ``sweep`` (and ``run`` where a
run has many rows), and partitions are overwritten one by one, so analyzing tonight's
sweep into last night's ``out`` keeps last night's rows. The run directories must be
readable by the executors at the paths ``sweep.json`` gives (a local or shared filesystem).
"""

from __future__ import annotations

import itertools
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from faultline.analysis import aggregate, tables
from faultline.analysis.check import CHECK_DDL, CHECK_SCHEMA, check_run
from faultline.analysis.rows import RUN_OPS_SCHEMA, history_batches, ops_batches
from faultline.analysis.sweepdir import Cell, Sweep, read_sweeps
from faultline.errors import FaultlineError, HistoryError
from faultline.rundir import TEST_FILE, atomic_file, find_history
from faultline.spec import TestSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from faultline.analysis.spark import Progress

TABLES = ("runs", "ops", "faults", "anomalies", "observations", "cells")
#: Rows of a table's partition file written at once: a Parquet row group.
ROW_GROUP = 1 << 18


@dataclass(slots=True)
class Analysis:
    """What :func:`analyze` made: the sweeps read, where each table is, the ``runs`` and
    ``cells`` rows (small: one per run, one per cell and night) for the page and JUnit, each
    run's results.json object as the check on the executors gave it (by (sweep, run); absent
    for a run not checked), how many history lines were read, and the CPU seconds the
    executors spent in the check itself (the rest of a run's task reads and writes its ops
    and observations)."""

    sweeps: list[Sweep]
    tables: dict[str, str]
    runs: list[dict[str, Any]] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)
    results: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    history_lines: int = 0
    check_cpu_s: float = 0.0


def analyze(spark: SparkSession, sweep_dirs: Sequence[Path], out: str,
            progress: Progress | None = None) -> Analysis:
    """Run the pipeline over ``sweep_dirs`` into ``out`` (see the module doc); HistoryError for a
    directory that is not a sweep directory."""
    sweeps = read_sweeps(sweep_dirs)
    every = [c for s in sweeps for c in s.cells]
    if not every:
        raise HistoryError(", ".join(map(str, sweep_dirs)), None, "no cells to analyze in sweep.json")
    done = sorted((c for c in every if c.status == "done"), key=_history_size, reverse=True)
    where = {t: f"{out.rstrip('/')}/tables/{t}" for t in TABLES}
    ids = [s.id for s in sweeps]
    for t in ("ops", "observations"):  # the run's task writes them; the others once made
        forget_sweeps(where[t], ids)

    def step(what: str) -> Any:
        return progress.step(what) if progress is not None else nullcontext()

    runs_done = [{"sweep": c.sweep, "run": c.id, "run_dir": str(c.run_dir)} for c in done]
    with step(f"check: {len(done)} runs on the executors, their histories -> ops, observations"):
        # cached for the aggregates; recomputing it (a cache lost) writes the same partitions again
        checked_df = _each_run(spark, runs_done, _check_and_ingest(where), _CHECKED_DDL).persist()
        checked = {(r["sweep"], r["run"]): r for r in checked_df.drop("latency_ns").collect()}
    with step("runs, faults, anomalies"):
        runs, faults, anomalies = [], [], []
        results: dict[tuple[str, str], dict[str, Any]] = {}
        for c in every:
            row, result = _run(c, checked.get((c.sweep, c.id)))
            runs.append(row)
            if result is not None:
                results[(c.sweep, c.id)] = result
            faults += tables.fault_rows(c, result)
            anomalies += tables.anomaly_rows(c, result)
    with step("per-cell aggregates"):
        # the random-seed runs: a targeted run is judged beside its cell (analysis.evidence)
        groups = aggregate.cell_runs([r for r in runs if r.get("recipe") is None], tables.CONFIG_COLUMNS)
        latencies = aggregate.cell_latencies(spark, checked_df.select("sweep", "run", "latency_ns"), groups)
        # typed as the table holds them (a config's rate of 2000 is 2000.0 there)
        cell_rows = pa.Table.from_pylist(aggregate.cells(groups, latencies, tables.CONFIG_COLUMNS),
                                         schema=tables.CELLS_SCHEMA).to_pylist()
        # written once every row of them is made: an analysis that fails before then leaves
        # the last one's tables whole
        made = [(table, keys, partitions(rows, keys, schema)) for rows, table, keys, schema in (
            (runs, "runs", ("sweep",), tables.RUNS_SCHEMA),
            (faults, "faults", ("sweep", "run"), tables.FAULTS_SCHEMA),
            (anomalies, "anomalies", ("sweep", "run"), tables.ANOMALIES_SCHEMA),
            (cell_rows, "cells", ("sweep",), tables.CELLS_SCHEMA))]
        for table, keys, batches in made:
            replace_partitions(where[table], ids, keys, batches)
    checked_df.unpersist()
    return Analysis(sweeps, where, runs, cell_rows, results, sum(r["ops_rows"] for r in checked.values()),
                    sum(r["check_cpu_s"] for r in checked.values()))


def _history_size(cell: Cell) -> int:
    """The size of a cell's history file (0 when it has none): the biggest are checked first."""
    try:
        return find_history(cell.run_dir).stat().st_size
    except (FaultlineError, OSError):
        return 0


def _each_run(spark: SparkSession, runs: list[dict[str, Any]],
              work: Callable[[dict[str, Any]], Iterator[pa.RecordBatch]], schema: Any) -> DataFrame:
    """``work`` of each of ``runs`` on an executor, a task each, in their order, as a
    DataFrame of ``schema``."""

    def tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column("id").to_pylist():
                yield from work(runs[i])

    return spark.range(len(runs), numPartitions=max(1, len(runs))).mapInArrow(tasks, schema)


def _run(cell: Cell, checked: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
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
    figures = tables.SendFigures()
    if checked is not None:
        valid, error = checked["valid"], checked["error"] or error
        result = orjson.loads(checked["result_json"]) if checked["result_json"] else None
        if checked["first_send"] is not None:
            figures = tables.SendFigures(first_send=checked["first_send"], last_send=checked["last_send"],
                                         p50_ms=checked["p50_ms"], p99_ms=checked["p99_ms"])
    row = tables.run_row(cell, spec, valid, result, error, figures)
    permitted, why = aggregate.expected_loss(spec) if spec is not None else (None, None)
    row["expected_loss"] = None if permitted is None else "permitted" if permitted else "forbidden"
    row["expected_reason"] = why
    row["results_json"] = orjson.dumps(result).decode() if result is not None else None
    return row, result


#: What :func:`_check_and_ingest` returns per run: the check's row, the ``ops`` rows written
#: and the CPU seconds of the check.
_CHECKED = pa.schema([*CHECK_SCHEMA, pa.field("ops_rows", pa.int64()), pa.field("check_cpu_s", pa.float64())])
_CHECKED_DDL = f"{CHECK_DDL}, ops_rows long, check_cpu_s double"


def _check_and_ingest(where: Mapping[str, str]) -> Callable[[dict[str, Any]], Iterator[pa.RecordBatch]]:
    """A run's (sweep, run, run_dir) -> its check's row (:func:`check_run`) with the ``ops``
    rows written, its ``ops`` and ``observations`` partitions written to the tables
    ``where`` says: one task, so that no piece of a run's work waits for every other run's
    piece before it."""

    def work(r: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        cpu = time.process_time()
        row = check_run(r)
        cpu = time.process_time() - cpu
        rows = _ingest_ops(where["ops"], r, row.get("truncated"))  # null unless the check read it whole
        _ingest_observations(where["observations"], r)
        yield pa.RecordBatch.from_pylist([{**row, "ops_rows": rows, "check_cpu_s": cpu}], schema=_CHECKED)

    return work


def _ingest_ops(table: str, r: dict[str, Any], truncated: bool | None) -> int:
    """Write a run's (sweep, run, run_dir) ``ops`` partition of the table at ``table`` from its
    history (``truncated``: the check's, None when it did not read the history whole); the
    rows written. A history :func:`faultline.history.iter_rows` refuses gives none."""
    run_dir = Path(r["run_dir"])
    try:
        history = find_history(run_dir)
        batches = (history_batches(history) if truncated is None else
                   ops_batches(history, TestSpec.load(run_dir / TEST_FILE).topic.name, truncated))
        return write_partition(Path(table), {"sweep": r["sweep"], "run": r["run"]}, batches, RUN_OPS_SCHEMA)
    except FaultlineError:
        return 0


def _ingest_observations(table: str, r: dict[str, Any]) -> None:
    """Write a run's (sweep, run, run_dir) ``observations`` partition of the table at
    ``table`` (none for a file that cannot be read)."""
    try:
        write_partition(Path(table), {"sweep": r["sweep"], "run": r["run"]},
                        tables.observation_batches(Path(r["run_dir"])), tables.RUN_OBSERVATIONS_SCHEMA)
    except FaultlineError:
        return


#: What Spark escapes in a partition directory's name (``%`` and two hex digits).
_ESCAPED = frozenset([*map(chr, range(0x20)), *"\"#%'*/:=?[\\]^{\x7f"])


def partition_dir(table: Path, keys: Mapping[str, str]) -> Path:
    """The directory of the partition ``keys`` (column -> value, outermost first) of the
    table at ``table``, named as Spark names it (``sweep=a%3Db``)."""
    return table.joinpath(*(f"{k}={''.join(f'%{ord(c):02X}' if c in _ESCAPED else c for c in v)}"
                            for k, v in keys.items()))


def write_partition(table: Path, keys: Mapping[str, str], batches: Iterable[pa.RecordBatch],
                    schema: pa.Schema) -> int:
    """Write ``batches`` (of ``schema``) as the one file of the partition ``keys`` of the
    table at ``table`` (:func:`partition_dir`), replacing it whole; nothing for no rows.
    Returns the rows written."""
    pending = (b for b in batches if b.num_rows)
    first = next(pending, None)
    if first is None:
        return 0
    directory = partition_dir(table, keys)
    directory.mkdir(parents=True, exist_ok=True)
    rows = 0
    # dictionaries only for strings: most other columns hold a distinct value a row;
    # scalar integers delta-coded: most rise (index, time) or stay near the row before's, which
    # leaves zstd less to compress; statistics (a row group's min and max, for a reader's
    # filter) only for scalars
    strings = [f.name for f in schema if pa.types.is_string(f.type) or (
        pa.types.is_list(f.type) and pa.types.is_string(f.type.value_type))]
    ints = [f.name for f in schema if pa.types.is_integer(f.type)]
    scalars = [*ints, *(f.name for f in schema if pa.types.is_boolean(f.type))]
    with (atomic_file(directory / "part-00000.parquet") as fh,
          pq.ParquetWriter(fh, schema, use_dictionary=strings, compression="zstd", write_statistics=scalars,
                           column_encoding=dict.fromkeys(ints, "DELTA_BINARY_PACKED")) as w):
        held, size = [first], first.num_rows
        for batch in itertools.chain(pending, [None]):
            if batch is None or size >= ROW_GROUP:
                w.write_table(pa.Table.from_batches(held, schema), row_group_size=ROW_GROUP)
                rows += size
                held, size = [], 0
            if batch is not None:
                held.append(batch)
                size += batch.num_rows
    return rows


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


def partitions(rows: Iterable[Mapping[str, Any]], partition_by: Sequence[str],
               schema: pa.Schema) -> dict[tuple[str, ...], pa.RecordBatch]:
    """``rows`` (dicts) as Parquet rows of ``schema`` (a key it lacks is null; a key it does
    not name is left out), a batch per value of ``partition_by``: columns of ``schema``
    every row has (non-empty strings: sweep and cell ids), which are the partitions' paths,
    not their files' columns, as Spark writes them."""
    parts: dict[tuple[str, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        parts[tuple(r[k] for k in partition_by)].append(r)
    columns = pa.schema([f for f in schema if f.name not in partition_by])
    return {values: pa.RecordBatch.from_pylist(part, schema=columns) for values, part in parts.items()}


def replace_partitions(path: str, sweeps: Collection[str], partition_by: Sequence[str],
                       batches: Mapping[tuple[str, ...], pa.RecordBatch]) -> None:
    """Replace the partitions of ``sweeps`` of the table at ``path`` with ``batches``
    (:func:`partitions`), a file each (:func:`write_partition`). Small tables, so on the
    driver: Spark's own write planned and ran a job per table."""
    forget_sweeps(path, sweeps)
    for values, batch in batches.items():
        write_partition(Path(path), dict(zip(partition_by, values, strict=True)), [batch], batch.schema)
