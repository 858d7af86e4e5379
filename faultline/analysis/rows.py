"""History rows <-> the typed rows of the ``ops`` table, both ways, exactly.

:func:`to_op_record` turns one history row (docs/history.md) into a record of
:data:`OPS_SCHEMA`: a send's, poll's and drain's fields become typed columns; a value
of any other shape (a nemesis op's, or one with keys the typed columns do not hold) is
kept whole as JSON in ``value_json``. :func:`to_history_row` is the inverse: the row it
returns equals the one read from the history, so the checker on Spark's executors sees
what ``faultline check`` sees. docs/analysis.md describes the table.

Pure: pyarrow types and dicts, no Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from faultline.history import NEMESIS, ReadResult, iter_rows

#: Columns of ``ops`` besides ``sweep`` and ``run`` (which partition it).
OPS_FIELDS: list[pa.Field] = [
    pa.field("index", pa.int64(), nullable=False),
    pa.field("time", pa.int64(), nullable=False),
    pa.field("process", pa.int64()),  # null for the nemesis
    pa.field("type", pa.string(), nullable=False),
    pa.field("f", pa.string(), nullable=False),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("value", pa.int64()),
    pa.field("offset", pa.int64()),
    pa.field("rec_topic", pa.list_(pa.string())),
    pa.field("rec_partition", pa.list_(pa.int32())),
    pa.field("rec_offset", pa.list_(pa.int64())),
    pa.field("rec_value", pa.list_(pa.int64())),
    pa.field("log_start_offset", pa.int64()),
    pa.field("high_watermark", pa.int64()),
    pa.field("last", pa.bool_()),
    pa.field("error", pa.string()),
    pa.field("value_json", pa.string()),
    pa.field("history_truncated", pa.bool_(), nullable=False),
]
KEYS: list[pa.Field] = [pa.field("sweep", pa.string(), nullable=False),
                        pa.field("run", pa.string(), nullable=False)]
OPS_SCHEMA = pa.schema(KEYS + OPS_FIELDS)

#: ``value_json`` of a row that had no ``value`` at all (not valid JSON, so no value's text).
ABSENT = ""
_INT32 = 2**31
_INT64 = 2**63
_SEND_KEYS = frozenset(("topic", "partition", "value", "offset"))
_DRAIN_KEYS = frozenset(("topic", "partition", "records", "log_start_offset", "high_watermark", "last"))


def _int(x: Any, bound: int = _INT64) -> bool:
    return x.__class__ is int and -bound <= x < bound


def to_op_record(row: dict[str, Any], sweep: str, run: str, truncated: bool) -> dict[str, Any]:
    """One history row as an ``ops`` record (a dict of :data:`OPS_SCHEMA`'s columns)."""
    p = row["process"]
    rec: dict[str, Any] = {"sweep": sweep, "run": run, "index": row["index"], "time": row["time"],
                           "process": None if p == NEMESIS else p, "type": row["type"], "f": row["f"],
                           "error": row.get("error"), "history_truncated": truncated}
    if p == NEMESIS or not _typed(row, rec):
        rec["value_json"] = orjson.dumps(row["value"]).decode() if "value" in row else ABSENT
    return rec


def _typed(row: dict[str, Any], rec: dict[str, Any]) -> bool:
    """Fill ``rec``'s typed columns from a client op's value; False when they cannot hold it."""
    f = row["f"]
    if "value" not in row:
        return False
    v = row["value"]
    if v is None:
        return True
    if not isinstance(v, dict):
        return False
    if f == "send":
        if not (v.keys() <= _SEND_KEYS and isinstance(v.get("topic"), str)
                and _int(v.get("partition"), _INT32)
                and _int(v.get("value")) and ("offset" not in v or _int(v["offset"]))):
            return False
        rec.update(topic=v["topic"], partition=v["partition"], value=v["value"], offset=v.get("offset"))
        return True
    if f == "poll":
        records = v.get("records")
        if v.keys() != {"records"} or not isinstance(records, list) or not all(
                isinstance(r, list) and len(r) == 4 and isinstance(r[0], str) and _int(r[1], _INT32)
                and _int(r[2]) and _int(r[3]) for r in records):
            return False
        rec.update(rec_topic=[r[0] for r in records], rec_partition=[r[1] for r in records],
                   rec_offset=[r[2] for r in records], rec_value=[r[3] for r in records])
        return True
    if f == "drain":
        records = v.get("records", [])
        if not (v.keys() <= _DRAIN_KEYS and isinstance(v.get("topic"), str)
                and _int(v.get("partition"), _INT32) and isinstance(records, list)
                and all(isinstance(r, list) and len(r) == 2 and _int(r[0]) and _int(r[1]) for r in records)
                and all(_int(v[k]) for k in ("log_start_offset", "high_watermark") if k in v)
                and isinstance(v.get("last", False), bool)):
            return False
        rec.update(topic=v["topic"], partition=v["partition"],
                   log_start_offset=v.get("log_start_offset"), high_watermark=v.get("high_watermark"),
                   last=v.get("last"))
        if "records" in v:
            rec.update(rec_offset=[r[0] for r in records], rec_value=[r[1] for r in records])
        return True
    return False


def to_history_row(rec: dict[str, Any]) -> dict[str, Any]:
    """The history row an ``ops`` record came from (:func:`to_op_record`'s inverse)."""
    p = rec["process"]
    row: dict[str, Any] = {"index": rec["index"], "time": rec["time"],
                           "process": NEMESIS if p is None else p, "type": rec["type"], "f": rec["f"]}
    raw = rec["value_json"]
    if raw is not None:
        if raw != ABSENT:
            row["value"] = orjson.loads(raw)
    else:
        row["value"] = _value(rec)
    if rec["error"] is not None:
        row["error"] = rec["error"]
    return row


def _value(rec: dict[str, Any]) -> Any:
    f = rec["f"]
    if f == "send" and rec["topic"] is not None:
        v = {"topic": rec["topic"], "partition": rec["partition"], "value": rec["value"]}
        if rec["offset"] is not None:
            v["offset"] = rec["offset"]
        return v
    if f == "poll" and rec["rec_offset"] is not None:
        return {"records": [list(r) for r in zip(rec["rec_topic"], rec["rec_partition"], rec["rec_offset"],
                                                 rec["rec_value"], strict=True)]}
    if f == "drain" and rec["topic"] is not None:
        v = {"topic": rec["topic"], "partition": rec["partition"]}
        if rec["rec_offset"] is not None:
            v["records"] = [list(r) for r in zip(rec["rec_offset"], rec["rec_value"], strict=True)]
        for k in ("log_start_offset", "high_watermark", "last"):
            if rec[k] is not None:
                v[k] = rec[k]
        return v
    return None


def history_batches(run_dir: Path, history: Path, sweep: str, run: str,
                    batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """A run's history (read by :func:`faultline.history.iter_rows`) as ``ops`` record batches.

    Rows are held until the whole history is read, because ``history_truncated`` (was the
    last line cut?) is known only then; the check needs every row of a run in one place
    anyway (:mod:`faultline.analysis.check`).
    """
    read = ReadResult()
    rows = list(iter_rows(history, read))
    for i in range(0, max(len(rows), 1), batch_rows):
        chunk = [to_op_record(r, sweep, run, read.truncated) for r in rows[i:i + batch_rows]]
        yield pa.RecordBatch.from_pylist(chunk, schema=OPS_SCHEMA)


def records(table: pa.Table) -> Iterable[dict[str, Any]]:
    """An ``ops`` table's rows as records, in ``index`` order."""
    rows: list[dict[str, Any]] = table.sort_by("index").to_pylist()
    return rows
