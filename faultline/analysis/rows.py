"""History rows <-> the typed rows of the ``ops`` table, both ways, exactly.

:func:`to_op_record` turns one history row (docs/history.md) into a record of
:data:`OPS_SCHEMA`: a send's, poll's and drain's fields become typed columns; a value
of any other shape (a nemesis op's, or one with keys the typed columns do not hold) is
kept whole as JSON in ``value_json``. :func:`to_history_row` is the inverse: the row it
returns equals the one read from the history. docs/analysis.md describes the table.

:func:`history_batches` reads a history's rows (:func:`faultline.history.iter_rows`)
into ``ops`` batches through :func:`to_op_record`, one row at a time; :func:`ops_batches`
gives the same batches for a history the check has read whole, with the lines the
journal writes most (sends, polls, drains, as :mod:`faultline.checkers.scan` recognises
them, with or without a plain error) read by compiled code (numba) straight into
columns, and every other line through :func:`to_op_record`.

Pure: pyarrow types, numpy and dicts, no Spark.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from faultline.checkers import scan
from faultline.checkers.columns import NONE
from faultline.compiled import compiled
from faultline.history import (
    CUT,
    F_DRAIN,
    F_POLL,
    F_SEND,
    INT64_MAX,
    NEMESIS,
    ReadResult,
    history_blocks,
    iter_rows,
    parse_line,
)

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
#: A run's ``ops`` rows as its partition's files hold them (``sweep`` and ``run`` are the path).
RUN_OPS_SCHEMA = pa.schema(OPS_FIELDS)

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


def history_batches(history: Path, batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """A run's history, read and checked by :func:`faultline.history.iter_rows` (its
    HistoryError when it is not one), as ``ops`` batches of :data:`RUN_OPS_SCHEMA`.

    Rows are held until the whole history is read, because ``history_truncated`` (was the
    last line cut?) is known only then.
    """
    read = ReadResult()
    rows = list(iter_rows(history, read))
    for i in range(0, max(len(rows), 1), batch_rows):
        chunk = [to_op_record(r, "", "", read.truncated) for r in rows[i:i + batch_rows]]
        yield pa.RecordBatch.from_pylist(chunk, schema=RUN_OPS_SCHEMA)


# A common line as the compiled reader (_read) gives it: an int64 in each of these rows
# of its table (one column a line), NONE for null. _LISTS: which record lists it has (0
# none, 1 a poll's four, 2 a drain's offsets and values); _R1 and _E1: the end of its
# records and of its error's bytes, each in its buffer (a line's start where the line
# before it ended); _ERR: it has an error.
(_INDEX, _TIME, _PROCESS, _TYPE, _F, _PARTITION, _VALUE, _OFFSET, _LSO, _HW, _LAST, _LISTS, _R1,
 _ERR, _E1) = range(15)
_FIELDS = 15
_POLL_LISTS, _DRAIN_LISTS = 1, 2
# what _read returns first: the block is read; a buffer is full; a line to read otherwise
_DONE, _FULL, _OTHER = 0, 1, 2
#: every partition a column of int32 holds (the compiled pieces take those below ``parts``)
_PARTS = 1 << 31
_NULL = scan.literal("null")
_NL, _RBRACE = 10, 125
_TYPE_NAMES = pa.array(["invoke", "ok", "fail", "info"])  # history.T_* order
_F_NAMES = pa.array(["send", "poll", "drain"])  # F_SEND, F_POLL, F_DRAIN
_ROWS = 1 << 16


@compiled(refcounted=False)
def _read(buf: Any, pos: int, topic: Any, rows: Any, n: int, recs: Any, nr: int, text: Any, nt: int,
          index: int, got: Any) -> tuple[int, int, int, int, int, int]:
    """Read lines of ``buf`` from ``pos`` into ``rows`` from row ``n``, their records into
    ``recs`` from ``nr`` and their errors' bytes into ``text`` from ``nt``, while each is a
    common line: one :func:`faultline.checkers.scan.head` reads (of index ``index``), with
    the value a send's or a drain's object of the test topic (the send's with its topic,
    partition and value, the drain's with its topic and partition), a poll's records or
    null, then nothing or an error of printable ASCII other than a quote or backslash.
    ``got`` (8 int64s) holds a value object's fields as it is read.

    Returns (what, pos, n, nr, nt, index): _DONE at the block's end, _FULL with ``pos``
    at a line that did not fit, or _OTHER with ``pos`` at a line to read otherwise.
    """
    end = len(buf)
    while pos < end:
        if n == rows.shape[1]:
            return _FULL, pos, n, nr, nt, index
        i, t, p, ty, f = scan.head(buf, pos, index, NONE, INT64_MAX)
        r0 = nr
        lists = 0
        got[:] = NONE
        if i >= 0 and f == F_POLL:
            j = scan.at(buf, i, _NULL)
            if j >= 0:
                i = j
            else:
                i, nr = scan.poll_records(buf, i, topic, _PARTS, recs, nr)
                lists = _POLL_LISTS
        elif i >= 0:
            i, nr = scan.value_object(buf, i, topic, _PARTS, got, recs, nr, 0)
            if i >= 0 and (got[scan.K_TOPIC] == NONE or got[scan.K_PARTITION] == NONE or (
                    f == F_SEND and (got[scan.K_VALUE] == NONE or got[scan.K_RECORDS] != NONE
                                     or got[scan.K_LSO] != NONE or got[scan.K_HW] != NONE
                                     or got[scan.K_LAST] != NONE)) or (
                    f == F_DRAIN and (got[scan.K_VALUE] != NONE or got[scan.K_OFFSET] != NONE))):
                i = -1
            if got[scan.K_RECORDS] != NONE:
                lists = _DRAIN_LISTS
        if i == -2:  # no room for its records
            return _FULL, pos, n, r0, nt, index
        t0 = nt
        err = 0
        if i >= 0 and i < end and buf[i] == _RBRACE:
            i += 1
        else:
            i, j = scan.error_text(buf, i)
            if i >= 0:
                if nt + j - i > len(text):
                    return _FULL, pos, n, r0, t0, index
                for q in range(j - i):
                    text[nt + q] = buf[i + q]
                nt += j - i
                err = 1
                i = j + 2
            else:
                i = -1
        if 0 <= i < end and buf[i] == _NL:
            rows[_INDEX, n] = index
            rows[_TIME, n] = t
            rows[_PROCESS, n] = p
            rows[_TYPE, n] = ty
            rows[_F, n] = f
            rows[_PARTITION, n] = got[scan.K_PARTITION]
            rows[_VALUE, n] = got[scan.K_VALUE]
            rows[_OFFSET, n] = got[scan.K_OFFSET]
            rows[_LSO, n] = got[scan.K_LSO]
            rows[_HW, n] = got[scan.K_HW]
            rows[_LAST, n] = got[scan.K_LAST]
            rows[_LISTS, n] = lists
            rows[_R1, n] = nr
            rows[_ERR, n] = err
            rows[_E1, n] = nt
            n += 1
            pos = i + 1
            index += 1
            continue
        return _OTHER, pos, n, r0, t0, index
    return _DONE, pos, n, nr, nt, index


def ops_batches(history: Path, topic: str, truncated: bool) -> Iterator[pa.RecordBatch]:
    """The ``ops`` batches (:data:`RUN_OPS_SCHEMA`) of a history the check read whole
    (which therefore holds what :func:`faultline.history.iter_rows` requires, unchecked
    here), of test topic ``topic``, cut short as ``truncated`` says: what
    :func:`history_batches` gives, the common lines read by compiled code (the module's
    docstring), in batches of up to :data:`_ROWS` rows."""
    name = str(history)
    word = np.frombuffer(topic.encode(), np.uint8)
    rows = np.empty((_FIELDS, _ROWS), np.int64)
    recs = np.empty((4 * _ROWS, 3), np.int64)
    text = np.empty(_ROWS, np.uint8)
    got = np.empty(8, np.int64)  # the value object _read reads
    n = nr = nt = index = 0
    others: list[dict[str, Any]] = []
    for block in history_blocks(name):
        buf = np.frombuffer(block, np.uint8)
        pos = 0
        while True:
            what, pos, n, nr, nt, index = _read(buf, pos, word, rows, n, recs, nr, text, nt, index, got)
            if others and (n or len(others) == _ROWS):  # the other lines came before these
                yield pa.RecordBatch.from_pylist(others, schema=RUN_OPS_SCHEMA)
                others = []
            if what == _DONE:
                break
            if n:  # a buffer is full, or another line is next: these first
                yield _common(rows[:, :n], recs[:nr], text[:nt], topic, truncated)
                n = nr = nt = 0
            elif what == _FULL:  # one line's records or error alone: more room
                recs = np.empty((2 * len(recs), 3), np.int64)
                text = np.empty(2 * len(text), np.uint8)
            if what == _FULL:
                continue
            end = scan.line_end(block, pos)
            d = parse_line(name, index + 1, block[pos:end])
            if d is CUT:
                break
            others.append(to_op_record(d, "", "", truncated))
            pos = end
            index += 1
    if n:
        yield _common(rows[:, :n], recs[:nr], text[:nt], topic, truncated)
    if others:
        yield pa.RecordBatch.from_pylist(others, schema=RUN_OPS_SCHEMA)


def _common(rows: Any, recs: Any, text: Any, topic: str, truncated: bool) -> pa.RecordBatch:
    """The ``ops`` batch of the common lines ``_read`` put in ``rows``, ``recs`` and ``text``."""
    n = rows.shape[1]

    def nullable(k: int, dtype: Any = np.int64) -> pa.Array:
        col = rows[k]
        null = col == NONE
        return pa.array(np.where(null, 0, col).astype(dtype), mask=null)

    def offsets(lengths: Any) -> pa.Array:
        return pa.array(np.concatenate(([0], np.cumsum(lengths))), pa.int32())

    f, lists = rows[_F], rows[_LISTS]
    ends = rows[_R1]
    lengths = ends - np.concatenate(([0], ends[:-1]))
    polls = lists == _POLL_LISTS
    polled = np.repeat(polls, lengths)  # which records are a poll's
    listed = pa.array(lists == 0)  # no lists: null
    unlisted = pa.array(~polls)
    words = pa.array([topic])
    rec_topic = words.take(pa.array(np.zeros(int(polled.sum()), np.int32)))
    err = rows[_ERR] == 1
    text_offsets = np.concatenate(([0], rows[_E1])).astype(np.int32)
    errors = pa.Array.from_buffers(pa.string(), n, [
        pa.py_buffer(np.packbits(err, bitorder="little")), pa.py_buffer(text_offsets),
        pa.py_buffer(text.tobytes())])
    columns = {
        # copies: the reader's buffers are filled again for the next batch
        "index": pa.array(rows[_INDEX].copy()), "time": pa.array(rows[_TIME].copy()),
        "process": pa.array(rows[_PROCESS].copy()),
        "type": _TYPE_NAMES.take(pa.array(rows[_TYPE])),
        "f": _F_NAMES.take(pa.array(f)),
        "topic": words.take(pa.array(np.zeros(n, np.int32), mask=f == F_POLL)),
        "partition": nullable(_PARTITION, np.int32), "value": nullable(_VALUE),
        "offset": nullable(_OFFSET),
        "rec_topic": pa.ListArray.from_arrays(offsets(np.where(polls, lengths, 0)), rec_topic,
                                              mask=unlisted),
        "rec_partition": pa.ListArray.from_arrays(offsets(np.where(polls, lengths, 0)),
                                                  pa.array(recs[polled, 0].astype(np.int32)),
                                                  mask=unlisted),
        "rec_offset": pa.ListArray.from_arrays(offsets(lengths), pa.array(recs[:, 1].copy()), mask=listed),
        "rec_value": pa.ListArray.from_arrays(offsets(lengths), pa.array(recs[:, 2].copy()), mask=listed),
        "log_start_offset": nullable(_LSO), "high_watermark": nullable(_HW),
        "last": pa.array(rows[_LAST] == 1, mask=rows[_LAST] == NONE),
        "error": errors,
        "value_json": pa.nulls(n, pa.string()),
        "history_truncated": pa.array(np.full(n, truncated)),
    }
    return pa.RecordBatch.from_pydict(columns, schema=RUN_OPS_SCHEMA)
