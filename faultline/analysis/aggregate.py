"""Per-cell aggregates across seeds, their trend across nights, and what the guarantee table
expects of a cell.

A *cell* is a run's config without its seed (:attr:`faultline.analysis.sweepdir.Cell.key`);
one night's cell gathers that sweep's runs of the config, one per seed. :func:`cells`
computes, per sweep and cell (from a row a run, so on the driver; the latency percentiles,
over every ok send, on Spark: :func:`cell_latencies`): the runs, how many lost
acknowledged writes, the lost writes (sum, median, max), the probability of loss with its 95 % Wilson interval
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
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from faultline.analysis.tables import PER_RUN
from faultline.checkers.faults_seen import fences
from faultline.checkers.guarantees import GuaranteeConfig, forbidden, permitted
from faultline.checkers.partition_faults import PartitionFaults
from faultline.faults import FAMILIES
from faultline.spec import TestSpec
from faultline.targeted import fault_steps, parse_schedule

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: z for a 95 % interval.
Z95 = 1.959963984540054

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


#: A cells row's key: (sweep, cell key, config: JSON of the config columns; "" for runs whose
#: config is not known and not that of their key's other runs).
CellKey = tuple[str, str, str]
#: What :func:`cells` keeps of each run in ``run_list``.
RUN_LIST = ("run", "seed", "status", "valid", "n_lost_write", "violations", "report", "error")


#: The runs of each cells row.
Groups = Mapping[CellKey, Sequence[Mapping[str, Any]]]


def cell_runs(runs: Sequence[Mapping[str, Any]], config: Sequence[str]) -> Groups:
    """The ``runs`` rows of each cells row, in their order.

    The runs of one cell key in one sweep ran one config, unless the sweep was resumed
    after what its matrix expands to changed (a default of faultline's): runs of another
    config are another row, never merged. A run with no config of its own (no
    ``test.json``, whose ``name`` column only test.json fills: failed before it, or not
    run) counts under its key's config when the key has one in the sweep, else under none.
    ``config`` names the runs' config columns (those but :data:`PER_RUN` are compared)."""
    columns = [c for c in config if c not in PER_RUN]

    def own(r: Mapping[str, Any]) -> str | None:
        return None if r.get("name") is None else orjson.dumps([r.get(c) for c in columns]).decode()

    configs: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in runs:
        if (o := own(r)) is not None:
            configs[(r["sweep"], r["cell"])].add(o)
    out: dict[CellKey, list[Mapping[str, Any]]] = defaultdict(list)
    for r in runs:
        known = configs[(r["sweep"], r["cell"])]
        key = own(r) or (next(iter(known)) if len(known) == 1 else "")
        out[(r["sweep"], r["cell"], key)].append(r)
    return dict(out)


def cells(groups: Groups, latencies: Mapping[CellKey, tuple[float | None, float | None]],
          config: Sequence[str]) -> list[dict[str, Any]]:
    """One row per cells row of ``groups`` (:func:`cell_runs`), in the order of ``created``
    and cell: the aggregates the module doc lists, the cell's config columns (``config``
    but :data:`PER_RUN`), and its runs (:data:`RUN_LIST`) for the page; ``latencies`` its
    p50 and p99 (ms) over every ok send of its runs (:func:`cell_latencies`; absent: none).

    Only runs that were checked (``status`` done) count in the loss figures;
    ``runs_failed`` counts those that were not. The probability of loss is over the runs
    whose loss is decided: a run whose verdict is unknown and that lost no write
    (``runs_undecided``) may have lost one the check could not decide, so it is no
    evidence either way. A run is violating when its verdict is false, not when it lists
    violations: one whose broker state could not be read is unknown, whatever its history
    showed. Means, the minimum and the first config values are over the runs that have one.
    """
    columns = [c for c in config if c not in PER_RUN]
    out = []
    for key, runs in groups.items():
        done = [r for r in runs if r["status"] == "done"]
        lost = [r["n_lost_write"] for r in done if r.get("n_lost_write") is not None]
        false = [r for r in done if r.get("valid") == "false"]
        unknown = [r for r in done if r.get("valid") == "unknown"]
        undecided = sum(1 for r in unknown if r.get("n_lost_write") == 0)
        runs_lost = sum(1 for n in lost if n > 0)
        decided = len(done) - undecided
        low, high = wilson(runs_lost, decided) if decided else (None, None)
        p50, p99 = latencies.get(key, (None, None))
        out.append({
            "sweep": key[0], "night": runs[0]["night"], "created": runs[0]["created"], "cell": key[1],
            **{c: _first(runs, c) for c in columns},
            "runs_total": len(runs), "runs": len(done), "runs_failed": len(runs) - len(done),
            "runs_lost": runs_lost, "runs_unknown": len(unknown), "runs_undecided": undecided,
            "runs_violating": len(false),
            "violations": sorted({v for r in false for v in r.get("violations") or ()}),
            "lost_sum": sum(lost) if lost else None,
            "lost_median": percentile(np.array(lost), 0.5) if lost else None,
            "lost_max": max(lost, default=None),
            "p_loss": runs_lost / decided if decided else None,
            "p_loss_low": None if low is None else max(0.0, low),
            "p_loss_high": None if high is None else min(1.0, high),
            "acked_per_s": _mean(runs, "acked_per_s"), "unavailability": _mean(runs, "unavailability"),
            "p50_ms": p50, "p99_ms": p99,
            "fault_to_first_loss_s": min((r["fault_to_first_loss_s"] for r in runs
                                          if r.get("fault_to_first_loss_s") is not None), default=None),
            "expected_loss": _first(runs, "expected_loss"),
            "expected_reason": _first(runs, "expected_reason"),
            "run_list": sorted(({k: r.get(k) for k in RUN_LIST} for r in runs), key=lambda r: str(r["run"])),
        })
    return sorted(out, key=lambda c: (c["created"], c["cell"]))


def _first(runs: Sequence[Mapping[str, Any]], column: str) -> Any:
    return next((r[column] for r in runs if r.get(column) is not None), None)


def _mean(runs: Sequence[Mapping[str, Any]], column: str) -> float | None:
    values = [r[column] for r in runs if r.get(column) is not None]
    return sum(values) / len(values) if values else None


def cell_latencies(spark: SparkSession, latencies: DataFrame,
                   groups: Groups) -> dict[CellKey, tuple[float, float]]:
    """The p50 and p99 (ms) over every ok send of each cells row's runs that has any, on
    Spark: ``latencies`` has (sweep, run, latency_ns), the latter every ok send's latency
    in the run (:func:`pack`), and its rows are brought together a cells row at a time."""
    keys = list(groups)
    member = pa.table({"sweep": [r["sweep"] for rs in groups.values() for r in rs],
                       "run": [r["run"] for rs in groups.values() for r in rs],
                       "group": [i for i, rs in enumerate(groups.values()) for _ in rs]})
    if not member.num_rows:
        return {}
    rows = (latencies.join(spark.createDataFrame(member), ["sweep", "run"]).groupBy("group")
            .applyInArrow(_percentiles, "group long, p50_ms double, p99_ms double").collect())
    return {keys[r["group"]]: (r["p50_ms"], r["p99_ms"]) for r in rows if r["p50_ms"] is not None}


#: What :func:`_percentiles` gives per cells row.
_PERCENTILES = pa.schema([("group", pa.int64()), ("p50_ms", pa.float64()), ("p99_ms", pa.float64())])


def _percentiles(table: pa.Table) -> pa.Table:
    """applyInArrow: one cells row's runs' (group, latency_ns) -> the p50 and p99 (ms) of
    every latency of theirs (null without any)."""
    packed = [b for b in table.column("latency_ns").to_pylist() if b]
    p50, p99 = latency_ms(np.concatenate([unpack(b) for b in packed]) if packed else unpack(b""))
    return pa.Table.from_pylist([{"group": table.column("group")[0].as_py(), "p50_ms": p50, "p99_ms": p99}],
                                schema=_PERCENTILES)


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
