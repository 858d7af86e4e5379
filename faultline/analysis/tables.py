"""The rows of the ``runs``, ``faults``, ``anomalies`` and ``observations`` tables.

Each is built from what the check on the executors returned (results.json's object and
a few per-run figures from its pass over the history: the span of the sends, latency
percentiles; :mod:`faultline.analysis.check`) and the run's ``test.json``. The run's
measures are read the way the run report reads them (:mod:`faultline.report.measures`),
so a figure here is the one its report shows. docs/analysis.md describes every column.

Pure: dicts in, dicts out; no Spark.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from faultline.analysis.rows import KEYS
from faultline.analysis.sweepdir import Cell
from faultline.checkers.result import ANOMALIES
from faultline.report import measures as m
from faultline.rundir import OBSERVATIONS_FILE, REPORT_FILE, read_jsonl_prefix
from faultline.spec import TestSpec


def column(name: str) -> str:
    """A column name for a dotted spec path or an anomaly name: ``producer.acks`` -> ``producer_acks``."""
    return name.replace(".", "_").replace("-", "_")


def config_columns(spec: TestSpec) -> dict[str, Any]:
    """Every field of ``test.json`` as a column (``topic.min_insync_replicas`` ->
    ``topic_min_insync_replicas``); a list becomes its items joined by ``+`` (``kill+partition``),
    a mapping its JSON."""
    out: dict[str, Any] = {}

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, dict) and prefix not in ("kafka.broker_config",):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else k, x)
        elif isinstance(v, list):
            out[column(prefix)] = "+".join(map(str, v))
        elif isinstance(v, dict):
            out[column(prefix)] = orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
        else:
            out[column(prefix)] = v

    walk("", spec.to_json())
    return out


def _arrow_type(hint: Any) -> pa.DataType:
    """The column type of a ``test.json`` field of type ``hint``, as :func:`config_columns`
    writes its value: a list or a mapping is a string."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):  # X | None
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return _arrow_type(inner)
    return {bool: pa.bool_(), int: pa.int64(), float: pa.float64()}.get(hint, pa.string())


def _config_fields(cls: type, prefix: str = "") -> list[pa.Field]:
    hints = typing.get_type_hints(cls)
    out: list[pa.Field] = []
    for f in dataclasses.fields(cls):
        hint, path = hints[f.name], f"{prefix}{f.name}"
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            out += _config_fields(hint, f"{path}.")
        else:
            out.append(pa.field(column(path), _arrow_type(hint)))
    return out


#: The config columns of a ``runs`` row, typed by the fields of ``test.json`` they hold.
CONFIG_FIELDS: list[pa.Field] = _config_fields(TestSpec)
CONFIG_COLUMNS: list[str] = [f.name for f in CONFIG_FIELDS]
#: Config columns that differ between the seeds of one cell, so are not the cell's.
PER_RUN = frozenset(("seed", "name", "start_wall_ms"))


def axes_columns(axes: Mapping[str, Any]) -> dict[str, Any]:
    """The config columns a run without ``test.json`` (not run, or failed before it) has: its
    swept axes (``sweep.json``), as :func:`config_columns` gives them, and ``seed``."""
    return {"seed": None} | {column(k): "+".join(map(str, v)) if isinstance(v, list) else v
                             for k, v in axes.items()}


@dataclass(frozen=True, slots=True)
class SendFigures:
    """Per run, from the check's pass over its history: the first send invoke and last send
    op (ns), and the p50 / p99 of invoke-to-ok latency (ms; None without an ok send)."""

    first_send: int = 0
    last_send: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None


def run_row(cell: Cell, spec: TestSpec | None, valid: str, result: Mapping[str, Any] | None,
            error: str | None, sends: SendFigures) -> dict[str, Any]:
    """The ``runs`` row of one cell: its config, verdict, anomaly counts, throughput, latency,
    unavailability, and when its first lost write came after the first fault."""
    r = result or {}
    counts = r.get("anomaly_counts") or {}
    stats = (r.get("stats") or {}).get("send") or {}
    raw = r.get("measures")
    ms: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    span_s = max(sends.last_send - sends.first_send, 0) / 1e9
    ok = int(stats.get("ok", 0))
    partitions = [x for x in r.get("partitions") or () if isinstance(x, dict)]
    acked = {(str(x.get("topic", "")), int(x["partition"])): int((x.get("sends") or {}).get("ok", 0))
             for x in partitions if isinstance(x.get("partition"), int)}
    avail = m.availability(ms, acked, sends.first_send, sends.last_send) if acked else {}
    outages = [b - a for v in avail.values() for a, b in v.windows]
    first_fault = min((w.start for w in m.fault_windows(ms)), default=None)
    first_loss = r.get("first_loss_ns") if isinstance(r.get("first_loss_ns"), int) else None
    report = cell.run_dir / REPORT_FILE
    row: dict[str, Any] = {
        "sweep": cell.sweep, "run": cell.id, "cell": cell.key, "night": cell.night, "created": cell.created,
        "status": cell.status, "run_dir": str(cell.run_dir), "recipe": cell.recipe,
        "predicts": list(cell.predicts),
        "report": str(report) if report.exists() else None,
        **(config_columns(spec) if spec is not None else axes_columns(cell.axes)),
        "valid": valid, "error": error or cell.error,
        "violations": list(r.get("violations") or ()), "permitted": list(r.get("permitted") or ()),
        "unknown": [str(u.get("kind")) for u in r.get("unknown") or () if isinstance(u, dict)
                    and u.get("affects_verdict")],
        **{f"n_{column(a)}": int(counts.get(a, 0)) for a in ANOMALIES},
        "sends_ok": ok, "sends_fail": int(stats.get("fail", 0)), "sends_info": int(stats.get("info", 0)),
        "acked_per_s": ok / span_s if span_s > 0 else None,
        "p50_ms": sends.p50_ms, "p99_ms": sends.p99_ms,
        "unavailability": (sum(1 - v.fraction for v in avail.values()) / len(avail)) if avail else None,
        "longest_outage_s": max(outages) / 1e9 if outages else 0.0,
        "first_fault_ns": first_fault, "first_loss_ns": first_loss,
        "fault_to_first_loss_s": (first_loss - first_fault) / 1e9
        if first_loss is not None and first_fault is not None else None,
    }
    return row


def _fields(spec: str) -> list[pa.Field]:
    """Fields from ``name:type`` words (``s`` string, ``l`` int64, ``i`` int32, ``d`` double,
    ``b`` bool, ``S`` list of strings)."""
    kinds = {"s": pa.string(), "l": pa.int64(), "i": pa.int32(), "d": pa.float64(), "b": pa.bool_(),
             "S": pa.list_(pa.string())}
    return [pa.field(name, kinds[kind]) for name, kind in (w.split(":") for w in spec.split())]


#: The ``runs`` table's columns, as :func:`run_row` and the pipeline fill them. Explicit, so
#: that a column with no value in a night (every cell failed: no throughput) has the type
#: it has in the others, and the nights of one ``OUT`` read as one table.
RUNS_SCHEMA = pa.schema([
    *KEYS, *_fields("cell:s night:s created:s status:s run_dir:s recipe:s predicts:S report:s"),
    *CONFIG_FIELDS,
    *_fields("valid:s error:s violations:S permitted:S unknown:S"),
    *[pa.field(f"n_{column(a)}", pa.int64()) for a in ANOMALIES],
    *_fields("sends_ok:l sends_fail:l sends_info:l acked_per_s:d p50_ms:d p99_ms:d unavailability:d "
             "longest_outage_s:d first_fault_ns:l first_loss_ns:l fault_to_first_loss_s:d "
             "expected_loss:s expected_reason:s results_json:s"),
])
#: The ``cells`` table's columns (:func:`faultline.analysis.aggregate.cells`), in the order,
#: and with the nullability, Spark gave them when it computed the table.
CELLS_SCHEMA = pa.schema([
    KEYS[0], *_fields("cell:s night:s created:s"),
    pa.field("runs_total", pa.int64(), nullable=False),
    *_fields("runs:l runs_failed:l runs_lost:l runs_unknown:l runs_undecided:l runs_violating:l"),
    pa.field("violations", pa.list_(pa.string()), nullable=False),
    *_fields("lost_sum:l lost_median:d lost_max:l acked_per_s:d unavailability:d fault_to_first_loss_s:d "
             "expected_loss:s expected_reason:s"),
    *[f for f in CONFIG_FIELDS if f.name not in PER_RUN],
    pa.field("run_list", pa.list_(pa.field("element", pa.struct(_fields(
        "run:s seed:l status:s valid:s n_lost_write:l violations:S report:s error:s")), nullable=False)),
        nullable=False),
    *_fields("p50_ms:d p99_ms:d p_loss:d p_loss_low:d p_loss_high:d"),
])
#: The ``faults`` table's columns (:func:`fault_rows`).
FAULTS_SCHEMA = pa.schema([*KEYS, *_fields("fault:l f:s kind:s start_ns:l end_ns:l nodes:S detail:s")])
#: The ``anomalies`` table's columns (:func:`anomaly_rows`).
ANOMALIES_SCHEMA = pa.schema([*KEYS, *_fields("type:s example:l topic:s partition:i value:l offset:l "
                                              "time_ns:l violation:b json:s")])


def fault_rows(cell: Cell, result: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The ``faults`` rows of one run: its measures' fault windows, with their target nodes."""
    ms = (result or {}).get("measures")
    raw = ms.get("faults") if isinstance(ms, dict) else None
    out = []
    for i, w in enumerate(raw if isinstance(raw, list) else ()):
        if isinstance(w, dict) and isinstance(w.get("start"), int):
            out.append({"sweep": cell.sweep, "run": cell.id, "fault": i, "f": str(w.get("f", "")),
                        "kind": w.get("kind"), "start_ns": w["start"],
                        "end_ns": w.get("end") if isinstance(w.get("end"), int) else None,
                        "nodes": [str(n) for n in w.get("nodes") or ()], "detail": w.get("detail")})
    return out


def anomaly_rows(cell: Cell, result: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The ``anomalies`` rows of one run: every example results.json holds, its common fields as
    columns and the whole example as JSON; ``violation`` null for an example its checker
    left undecided (a group example's ``unknown``), else as the example's own ``permitted``
    says when it says (the checker judges each inconsistent-offsets instance by itself),
    else when its type is a violation on its partition (``partitions[].violations``)."""
    r = result or {}
    bad = {(x.get("topic"), x.get("partition"), v) for x in r.get("partitions") or ()
           if isinstance(x, dict) for v in x.get("violations") or ()}
    out = []
    for kind, examples in (r.get("anomalies") or {}).items():
        for i, x in enumerate(examples or ()):
            if not isinstance(x, dict):
                continue
            out.append({"sweep": cell.sweep, "run": cell.id, "type": kind, "example": i,
                        "topic": x.get("topic") if isinstance(x.get("topic"), str) else None,
                        "partition": x.get("partition") if isinstance(x.get("partition"), int) else None,
                        "value": x.get("value") if isinstance(x.get("value"), int) else None,
                        "offset": x.get("offset") if isinstance(x.get("offset"), int) else None,
                        "time_ns": x.get("time") if isinstance(x.get("time"), int) else None,
                        "violation": None if x.get("unknown") is not None else (
                            x["permitted"] is False if isinstance(x.get("permitted"), bool)
                            else (x.get("topic"), x.get("partition"), kind) in bad),
                        "json": orjson.dumps(x).decode()})
    return out


#: A run's ``observations`` rows as its partition's file holds them (``sweep`` and ``run``
#: are the path).
RUN_OBSERVATIONS_SCHEMA = pa.schema([
    pa.field("time", pa.int64()), pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
    pa.field("leader", pa.int64()), pa.field("isr", pa.list_(pa.int64())),
    pa.field("replicas", pa.list_(pa.int64())), pa.field("hw", pa.int64()), pa.field("json", pa.string()),
])


def observation_batches(run_dir: Path) -> Iterator[pa.RecordBatch]:
    """A run's ``observations.jsonl`` (none when it has none; up to a cut last line) as
    batches of :data:`RUN_OBSERVATIONS_SCHEMA`: the common fields typed, each whole sample
    as JSON."""
    path = Path(run_dir) / OBSERVATIONS_FILE
    if not path.exists():
        return

    def num(x: Any, bits: int = 64) -> int | None:
        """``x`` if it is an integer (not a boolean) its column's type holds, else None."""
        return x if x.__class__ is int and -(1 << bits - 1) <= x < 1 << bits - 1 else None

    def nums(x: Any) -> list[int] | None:
        return [i for i in x if num(i) is not None] if isinstance(x, list) else None

    rows = [{"time": num(o.get("time")),
             "topic": o.get("topic") if isinstance(o.get("topic"), str) else None,
             "partition": num(o.get("partition"), 32), "leader": num(o.get("leader")),
             "isr": nums(o.get("isr")), "replicas": nums(o.get("replicas")), "hw": num(o.get("hw")),
             "json": orjson.dumps(o).decode()} for o in read_jsonl_prefix(path).objects]
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=RUN_OBSERVATIONS_SCHEMA)
