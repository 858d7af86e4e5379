"""History rows survive the ``ops`` table both ways, exactly, and the compiled reader of a
history's lines gives the rows the row reader gives (faultline/analysis/rows.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultline.analysis import rows as ops_rows
from faultline.analysis.rows import (
    OPS_SCHEMA,
    RUN_OPS_SCHEMA,
    history_batches,
    ops_batches,
    to_history_row,
    to_op_record,
)
from faultline.checkers.synthetic import Shape, generate
from faultline.errors import HistoryError
from faultline.history import ReadResult, iter_rows
from faultline.history.writer import _lines

REAL_HISTORY = Path(__file__).resolve().parents[2] / "e2e" / "data" / "kill-partition" / "history.jsonl"


def records(table: pa.Table) -> list[dict[str, Any]]:
    """An ``ops`` table's rows as records, in ``index`` order."""
    rows: list[dict[str, Any]] = table.sort_by("index").to_pylist()
    return rows


def round_trip(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows -> ops records -> an Arrow table of OPS_SCHEMA -> rows, as the pipeline does."""
    table = pa.Table.from_pylist([to_op_record(r, "s", "r", False) for r in rows], schema=OPS_SCHEMA)
    return [to_history_row(rec) for rec in records(table)]


def test_a_generated_history_round_trips() -> None:
    rows = list(generate(Shape(seed=7, values=400, fail=0.05, info=0.05, faults=3)))
    assert round_trip(rows) == rows


def test_the_real_run_round_trips_through_its_file(tmp_path: Path) -> None:
    batches = list(history_batches(REAL_HISTORY, batch_rows=500))
    assert len(batches) > 1
    back = [to_history_row(rec) for rec in records(pa.Table.from_batches(batches))]
    assert back == list(iter_rows(REAL_HISTORY))


ODD = [
    {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "poll"},  # no value at all
    {"index": 1, "time": 2, "process": 0, "type": "ok", "f": "poll", "value": {"records": []}},
    {"index": 2, "time": 3, "process": 1, "type": "invoke", "f": "send",
     "value": {"topic": "t", "partition": 0, "value": 2**62}},
    {"index": 3, "time": 4, "process": 1, "type": "ok", "f": "send",
     "value": {"topic": "t", "partition": 0, "value": 2**62, "offset": -1}},
    {"index": 4, "time": 5, "process": 1, "type": "ok", "f": "send",
     "value": {"topic": "t", "partition": 0, "value": 5, "extra": [1]}},  # a key ops has no column for
    {"index": 5, "time": 6, "process": "nemesis", "type": "info", "f": "kill", "value": None},
    {"index": 6, "time": 7, "process": "nemesis", "type": "info", "f": "partition",
     "value": {"grudge": {"1": [2, 3]}}, "error": "boom"},
    {"index": 7, "time": 8, "process": 2, "type": "ok", "f": "drain",
     "value": {"topic": "t", "partition": 1, "records": [[0, 3]], "high_watermark": 1, "last": False}},
    {"index": 8, "time": 9, "process": 2, "type": "ok", "f": "drain",
     "value": {"topic": "t", "partition": 1}},
    {"index": 9, "time": 10, "process": 3, "type": "ok", "f": "send", "value": "not an object"},
    {"index": 10, "time": 11, "process": 3, "type": "ok", "f": "poll",
     "value": {"records": [["t", 0, 1, 1.5]]}},  # not an int: kept whole
]


@pytest.mark.parametrize("row", ODD, ids=[f"{r['f']}-{r['index']}" for r in ODD])
def test_odd_rows_round_trip(row: dict[str, Any]) -> None:
    assert round_trip([row]) == [row]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=8)


@given(f=st.sampled_from(["send", "poll", "drain", "kill"]), typ=st.sampled_from(["invoke", "ok", "info"]),
       process=st.integers(0, 9) | st.just("nemesis"), value=json_values)
def test_any_value_round_trips(f: str, typ: str, process: Any, value: Any) -> None:
    row = {"index": 0, "time": 0, "process": process, "type": typ, "f": f, "value": value}
    assert round_trip([row]) == [row]


def journal(rows: list[dict[str, Any]]) -> bytes:
    """``rows`` as a run's journal writes them (history.writer._lines, one op a call)."""
    return b"".join(_lines(r["index"], r["time"], [(r["process"], r["type"], r["f"], r.get("value"),
                                                     r.get("error"))]) for r in rows)


def read_both(path: Path, topic: str = "fl-queue") -> tuple[pa.Table, pa.Table]:
    """The history at ``path`` as the row reader's ``ops`` rows (its rows, unchecked, through
    to_op_record) and as the compiled reader's."""
    read = ReadResult()
    plain = [to_op_record(r, "", "", False) for r in iter_rows(path, read, validate=False)]
    for rec in plain:
        rec["history_truncated"] = read.truncated
    fast = pa.Table.from_batches(list(ops_batches(path, topic, read.truncated)), RUN_OPS_SCHEMA)
    return pa.Table.from_pylist(plain, schema=RUN_OPS_SCHEMA), fast


def assert_same(path: Path, topic: str = "fl-queue") -> pa.Table:
    plain, fast = read_both(path, topic)
    assert fast.to_pylist() == plain.to_pylist()
    assert fast.equals(plain)
    return fast


def numbered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"index": i, "time": i * 10, **r} for i, r in enumerate(rows)]


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "zstd"])
def test_the_compiled_reader_reads_a_journal_as_the_row_reader(tmp_path: Path, compress: bool) -> None:
    """Sends ending in each way, with errors, polls, a drain in chunks and the nemesis's ops."""
    data = journal(list(generate(Shape(seed=5, values=3000, fail=0.1, info=0.1, faults=4, drain_batch=700))))
    path = tmp_path / ("history.jsonl.zst" if compress else "history.jsonl")
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if compress else data)
    table = assert_same(path)
    assert table.num_rows == data.count(b"\n")
    assert table.column("error").null_count < table.num_rows


def test_the_real_run_is_read_as_the_row_reader_reads_it() -> None:
    assert_same(REAL_HISTORY)


def test_full_buffers_and_long_lines_are_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Buffers of 4 lines (16 records, 4 error bytes) refill and grow: a poll of 40 records,
    a drain of 30, errors longer than the buffer; 9 other lines in a row come in batches of 4."""
    monkeypatch.setattr(ops_rows, "_ROWS", 4)
    rows = numbered(
        [{"process": 0, "type": "invoke", "f": "send",
          "value": {"topic": "fl-queue", "partition": 1, "value": v}} for v in range(9)]
        + [{"process": 0, "type": "fail", "f": "send", "value": {"topic": "fl-queue", "partition": 1,
                                                                  "value": v}, "error": "E" * (v + 3)}
           for v in range(9)]
        + [{"process": 1, "type": "ok", "f": "poll",
            "value": {"records": [["fl-queue", 0, k, k] for k in range(40)]}},
           {"process": 2, "type": "ok", "f": "drain",
            "value": {"topic": "fl-queue", "partition": 0, "records": [[k, k] for k in range(30)],
                      "log_start_offset": 0, "high_watermark": 30, "last": True}}]
        + [{"process": "nemesis", "type": "info", "f": "kill", "value": {"nodes": [k]}} for k in range(9)])
    (tmp_path / "history.jsonl").write_bytes(journal(rows))
    assert [to_history_row(r) for r in records(assert_same(tmp_path / "history.jsonl"))] == rows
    assert max(b.num_rows for b in ops_batches(tmp_path / "history.jsonl", "fl-queue", False)) == 4


def line(typ: str, f: str, value: bytes, rest: bytes = b"", process: bytes = b"0") -> bytes:
    """A history line of index 0, ``value`` and ``rest`` (more fields) as given."""
    return (b'{"index":0,"time":1,"process":%s,"type":"%s","f":"%s","value":%s%s}'
            % (process, typ.encode(), f.encode(), value, rest))


SENT = b'{"topic":"fl-queue","partition":1,"value":3}'
UNUSUAL = [  # lines the compiled reader leaves to the row reader, or reads only as it does
    line("invoke", "send", b'{"value":3,"partition":1,"topic":"fl-queue"}'),
    line("ok", "send", b'{"topic":"fl-queue","partition":1,"value":3,"offset":-1}'),
    line("ok", "send", SENT),
    line("ok", "send", b'{"partition":1,"value":3}'),
    line("ok", "send", b'{"topic":"other","partition":1,"value":3}'),
    line("ok", "send", b'{"topic":"fl-queue","partition":-1,"value":3}'),
    line("ok", "send", b'{"topic":"fl-queue","partition":2147483648,"value":3}'),
    line("ok", "send", b'{"topic":"fl-queue","partition":1,"value":9223372036854775807}'),
    line("ok", "send", b'{"topic":"fl-queue","partition":1,"value":3,"last":true}'),
    line("fail", "send", SENT, b',"error":"a \\"quoted\\" one"'),
    line("fail", "send", SENT, b',"error":"a backslash\\\\"'),
    line("fail", "send", SENT, b',"error":"\xc3\xa9t\xc3\xa9"'),
    line("fail", "send", SENT, b',"error":null'),
    line("fail", "send", SENT, b',"error":""'),
    line("info", "poll", b"null", b',"error":"_TRANSPORT"'),
    line("ok", "poll", b'{"records":[]}'),
    line("ok", "poll", b'{"records":[["fl-queue",0,1,"text"]]}'),
    line("ok", "poll", b'{"records":[["fl-queue",0,1,2],["x",0,2,3]]}'),
    b'{"index":0,"time":1,"process":0,"type":"invoke","f":"poll"}',
    line("invoke", "drain", b'{"topic":"fl-queue","partition":2}'),
    line("ok", "drain", b'{"topic":"fl-queue","partition":2,"records":[],"last":false}'),
    line("ok", "drain", b'{"topic":"fl-queue","partition":2,"records":[[0,1]],"high_watermark":1,'
                        b'"log_start_offset":0,"last":true}'),
    line("ok", "drain", b'{"topic":"fl-queue","partition":2,"records":[[0,null]]}'),
    line("info", "kill", b'{"nodes":[1]}', process=b'"nemesis"'),
    line("invoke", "send", SENT).replace(b',"time"', b', "time"'),
    line("invoke", "sends", SENT),
    line("invoke", "send", SENT)[:-1],
]


def json_line(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


@pytest.mark.parametrize("text", UNUSUAL, ids=range(len(UNUSUAL)))
@pytest.mark.parametrize("end", [True, False], ids=["whole", "last"])
def test_an_unusual_line_is_read_as_the_row_reader_reads_it(tmp_path: Path, text: bytes, end: bool) -> None:
    """Each between two common lines, or last (no newline: a cut line when not JSON)."""
    def send(index: int, value: int) -> bytes:
        return line("invoke", "send", b'{"topic":"fl-queue","partition":1,"value":%d}' % value).replace(
            b'"index":0', b'"index":%d' % index) + b"\n"

    middle = text.replace(b'"index":0', b'"index":1')
    data = send(0, 100) + middle + (b"\n" + send(2, 101) if end else b"")
    (tmp_path / "history.jsonl").write_bytes(data)
    if not end or json_line(text):
        assert_same(tmp_path / "history.jsonl")
    else:  # not JSON, and not the last line: neither reads it
        with pytest.raises(HistoryError) as plain:
            read_both(tmp_path / "history.jsonl")
        with pytest.raises(HistoryError) as fast:
            list(ops_batches(tmp_path / "history.jsonl", "fl-queue", False))
        assert str(fast.value) == str(plain.value)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(
    st.sampled_from(["send", "poll", "drain", "kill"]), st.sampled_from(["invoke", "ok", "fail", "info"]),
    st.integers(-2, 9) | st.just("nemesis"), json_values | st.fixed_dictionaries(
        {"topic": st.sampled_from(["fl-queue", "t"]), "partition": st.integers(-1, 3),
         "value": st.integers(-2**63, 2**63 - 1)},
        optional={"offset": st.integers(-1, 10**19),
                  "records": st.lists(st.lists(st.integers(0, 9), min_size=2, max_size=2), max_size=3),
                  "last": st.booleans() | st.none(), "high_watermark": st.integers(0, 9)}),
    st.none() | st.text(max_size=4)), max_size=12))
def test_any_history_is_read_as_the_row_reader_reads_it(
        tmp_path: Path, ops: list[tuple[str, str, Any, Any, str | None]]) -> None:
    rows = numbered([{"process": p, "type": typ, "f": f, "value": v, **({} if e is None else {"error": e})}
                     for f, typ, p, v, e in ops])
    (tmp_path / "history.jsonl").write_bytes(journal(rows))
    assert_same(tmp_path / "history.jsonl")
