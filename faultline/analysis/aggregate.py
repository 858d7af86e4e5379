"""Per-cell aggregates across seeds, their trend across nights, and what the guarantee table
expects of a cell.

A *cell* is a run's config without its seed (:attr:`faultline.analysis.sweepdir.Cell.key`);
one night's cell gathers that sweep's runs of the config, one per seed. :func:`cells`
computes, per sweep and cell, on Spark: the runs, how many lost acknowledged writes,
the lost writes (sum, median, max), the probability of loss with its 95 % Wilson interval
(:func:`wilson`), the runs with a violation and which, acknowledged throughput, p50 / p99
latency over every ok send of the cell's runs, unavailability, and how long after the
first fault the first lost write was acknowledged. The trend is the same rows ordered by
night (``night`` is the sweep's night: :attr:`faultline.analysis.sweepdir.Sweep.night`).

:func:`expected_loss` is the guarantee table's answer for a cell: may this config lose an
acknowledged write under these faults, in the worst case they allow (a fault on the
partition's leader, every replica faulted, as many destroyed at once as the nemesis may
hit)? The checker judges each run by the faults each partition actually saw; a cell
whose loss the table forbids and that lost writes anyway shows a violation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from faultline.checkers.faults_seen import fences
from faultline.checkers.guarantees import GuaranteeConfig, forbidden, permitted
from faultline.checkers.partition_faults import PartitionFaults
from faultline.faults import FAMILIES
from faultline.spec import TestSpec
from faultline.targeted import fault_steps, parse_schedule

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: z for a 95 % interval.
Z95 = 1.959963984540054
#: Config columns that differ between the seeds of one cell, so are not the cell's.
PER_RUN = frozenset(("seed", "name", "start_wall_ms"))

N = TypeVar("N")


def wilson(k: N, n: N, sqrt: Callable[[Any], Any] = math.sqrt, z: float = Z95) -> tuple[Any, Any]:
    """The Wilson score interval (low, high) of a proportion ``k`` of ``n`` (n > 0).

    Written with arithmetic only, so ``k`` and ``n`` may be numbers or Spark columns
    (pass ``pyspark.sql.functions.sqrt``)."""
    p = k / n  # type: ignore[operator]
    z2n = z * z / n  # type: ignore[operator]
    centre = (p + z2n / 2) / (1 + z2n)
    half = z * sqrt(p * (1 - p) / n + z2n / (4 * n)) / (1 + z2n)  # type: ignore[operator]
    return centre - half, centre + half


def worst_case_faults(spec: TestSpec) -> PartitionFaults:
    """The faults (:mod:`faultline.checkers.faults_seen`) a partition may see in a run of
    ``spec``: its families (a targeted schedule's steps', :func:`faultline.targeted.fault_steps`);
    for node faults, a fault on its leader and every replica faulted, and for those that
    may fence, every replica fenced (over a run, one after another); for faults that
    destroy data, as many replicas at once as the nemesis may hit (a schedule: the nodes
    its destroying steps may touch, together)."""
    rf = spec.topic.replication_factor
    if spec.nemesis.schedule:
        steps = fault_steps(parse_schedule(spec.nemesis.schedule), rf)
        fams = [FAMILIES[f] for f in sorted({s.family for s in steps})]
        fence = any(fences(s.family, {"kind": s.step.verb}) for s in steps)
        destroyed = min(rf, sum(s.nodes for s in steps if FAMILIES[s.family].destroys_data))
    else:
        fams = [FAMILIES[f] for f in spec.nemesis.faults]
        fence = any(fences(f.name, {}) for f in fams)
        destroyed = min(spec.nemesis.max_concurrent, rf) if any(f.destroys_data for f in fams) else 0
    on_nodes = any(f.on_nodes for f in fams)
    return PartitionFaults(frozenset(f.name for f in fams), leader_fault=on_nodes,
                           faulted=rf if on_nodes else 0, fenced=rf if fence else 0, data_loss=destroyed)


def expected_loss(spec: TestSpec) -> tuple[bool, str]:
    """(loss permitted?, why) by the guarantee table, for ``spec``'s config and faults in the
    worst case they allow (:func:`worst_case_faults`)."""
    config, faults = GuaranteeConfig.from_spec(spec), worst_case_faults(spec)
    allowed = permitted(config, faults)
    if "lost-write" in allowed:
        return True, allowed["lost-write"]
    return False, forbidden(config, faults)["lost-write"]


def cells(runs: DataFrame, latencies: DataFrame, config: Sequence[str]) -> DataFrame:
    """One row per (sweep, cell, config): the aggregates the module doc lists, the cell's
    config columns, and its runs (id, verdict, report) for the page.

    The runs of one cell key in one sweep ran one config, unless the sweep was resumed
    after what its matrix expands to changed (a default of faultline's): runs of another
    config are another row, never merged. A run with no config of its own (no
    ``test.json``, whose ``name`` column only test.json fills: failed before it, or not
    run) counts under its key's config when the key has one in the sweep, else under none.

    ``runs`` is the ``runs`` table; ``latencies`` has (sweep, run, latency_ns), the latter
    every ok send's latency in the run (:func:`pack`); ``config`` names the runs' config
    columns (those but :data:`PER_RUN` are kept).
    Only runs that were checked (``status`` done) count in the loss figures;
    ``runs_failed`` counts those that were not. The probability of loss is over the runs
    whose loss is decided: a run whose verdict is unknown and that lost no write
    (``runs_undecided``) may have lost one the check could not decide, so it is no
    evidence either way. A run is violating when its verdict is false, not when it lists
    violations: one whose broker state could not be read is unknown, whatever its history
    showed.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    config = [c for c in config if c not in PER_RUN]
    own = F.when(F.col("name").isNotNull(), F.to_json(F.struct(*config)))
    confs = F.collect_set(own).over(Window.partitionBy("sweep", "cell"))
    # "" (no JSON object): a run whose config is not known, and not that of its key's other runs
    runs = runs.withColumn(_CONFIG, F.coalesce(own, F.when(F.size(confs) == 1, confs[0]), F.lit("")))
    done = F.col("status") == "done"
    false = done & (F.col("valid") == "false")
    lost = F.col("n_lost_write")
    grouped = runs.groupBy("sweep", "night", "created", "cell", _CONFIG).agg(
        F.count("*").alias("runs_total"),
        F.sum(F.when(done, 1).otherwise(0)).alias("runs"),
        F.sum(F.when(~done, 1).otherwise(0)).alias("runs_failed"),
        F.sum(F.when(done & (lost > 0), 1).otherwise(0)).alias("runs_lost"),
        F.sum(F.when(done & (F.col("valid") == "unknown"), 1).otherwise(0)).alias("runs_unknown"),
        # as the run's report says: an unknown run with no lost write has its loss undecided
        F.sum(F.when(done & (F.col("valid") == "unknown") & (lost == 0), 1).otherwise(0))
        .alias("runs_undecided"),
        # a run made unknown by its broker state keeps the violations its history showed
        F.sum(F.when(false, 1).otherwise(0)).alias("runs_violating"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list(F.when(false, F.col("violations"))))))
        .alias("violations"),
        F.sum(F.when(done, lost)).alias("lost_sum"),
        F.median(F.when(done, lost)).alias("lost_median"),
        F.max(F.when(done, lost)).alias("lost_max"),
        F.avg("acked_per_s").alias("acked_per_s"),
        F.avg("unavailability").alias("unavailability"),
        F.min("fault_to_first_loss_s").alias("fault_to_first_loss_s"),
        # a run that never wrote test.json (failed, pending) has none of these
        F.first("expected_loss", ignorenulls=True).alias("expected_loss"),
        F.first("expected_reason", ignorenulls=True).alias("expected_reason"),
        *[F.first(c, ignorenulls=True).alias(c) for c in config],
        F.sort_array(F.collect_list(F.struct("run", "seed", "status", "valid", "n_lost_write",
                                             "violations", "report", "error"))).alias("run_list"),
    )
    lat = latencies.join(runs.select("sweep", "run", "cell", _CONFIG), ["sweep", "run"]).groupBy(
        "sweep", "cell", _CONFIG).applyInArrow(_percentiles, _PERCENTILES_DDL)
    n = F.col("runs") - F.col("runs_undecided")
    lo, hi = wilson(F.col("runs_lost"), n, F.sqrt)
    return (grouped.join(lat, ["sweep", "cell", _CONFIG], "left").drop(_CONFIG)
            .withColumn("p_loss", F.when(n > 0, F.col("runs_lost") / n))
            .withColumn("p_loss_low", F.when(n > 0, F.greatest(F.lit(0.0), lo)))
            .withColumn("p_loss_high", F.when(n > 0, F.least(F.lit(1.0), hi))))


#: The column :func:`cells` groups a cell's runs by config with (JSON of its config columns).
_CONFIG = "_config"


#: What :func:`_percentiles` gives per (sweep, cell, config).
_PERCENTILES = pa.schema([("sweep", pa.string()), ("cell", pa.string()), (_CONFIG, pa.string()),
                          ("p50_ms", pa.float64()), ("p99_ms", pa.float64())])
_PERCENTILES_DDL = f"sweep string, cell string, {_CONFIG} string, p50_ms double, p99_ms double"


def _percentiles(table: pa.Table) -> pa.Table:
    """applyInArrow: one cell's runs' (sweep, cell, config, latency_ns) -> the p50 and p99 (ms)
    of every latency of theirs (null without any)."""
    packed = [b for b in table.column("latency_ns").to_pylist() if b]
    p50, p99 = latency_ms(np.concatenate([unpack(b) for b in packed]) if packed else unpack(b""))
    row = {"sweep": table.column("sweep")[0].as_py(), "cell": table.column("cell")[0].as_py(),
           _CONFIG: table.column(_CONFIG)[0].as_py(), "p50_ms": p50, "p99_ms": p99}
    return pa.Table.from_pylist([row], schema=_PERCENTILES)


def latency_ms(latencies: npt.NDArray[np.int64]) -> tuple[float | None, float | None]:
    """The p50 and p99 (ms) of ``latencies`` (ns), as :func:`percentile` gives them; None
    without any."""
    if not len(latencies):
        return None, None
    return percentile(latencies, 0.5) / 1e6, percentile(latencies, 0.99) / 1e6


def pack(latencies: npt.NDArray[np.int64]) -> bytes:
    """Latencies as one binary column holds them (their int64s' little-endian bytes): a
    JVM moves a list's elements one by one, a binary value at once."""
    return latencies.astype("<i8").tobytes()


def unpack(packed: bytes) -> npt.NDArray[np.int64]:
    """The latencies :func:`pack` packed."""
    return np.frombuffer(packed, "<i8").astype(np.int64)


def percentile(values: npt.NDArray[np.int64], p: float) -> float:
    """The exact percentile ``p`` (0 to 1) of ``values`` (not empty) as Spark's ``percentile``
    gives it: at position ``(n - 1) * p`` of the sorted values, linear between the two
    around it."""
    position = (len(values) - 1) * p
    lower, higher = math.floor(position), math.ceil(position)
    low, high = (float(v) for v in np.partition(values, (lower, higher))[[lower, higher]])
    if lower == higher or low == high:
        return low
    return (higher - position) * low + (position - lower) * high
