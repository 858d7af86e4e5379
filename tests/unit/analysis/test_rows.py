"""History rows survive the ``ops`` table both ways, exactly (faultline/analysis/rows.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultline.analysis.rows import OPS_SCHEMA, history_batches, records, to_history_row, to_op_record
from faultline.checkers.synthetic import Shape, generate
from faultline.history import iter_rows

REAL_HISTORY = Path(__file__).resolve().parents[2] / "e2e" / "data" / "kill-partition" / "history.jsonl"


def round_trip(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows -> ops records -> an Arrow table of OPS_SCHEMA -> rows, as the pipeline does."""
    table = pa.Table.from_pylist([to_op_record(r, "s", "r", False) for r in rows], schema=OPS_SCHEMA)
    return [to_history_row(rec) for rec in records(table)]


def test_a_generated_history_round_trips() -> None:
    rows = list(generate(Shape(seed=7, values=400, fail=0.05, info=0.05, faults=3)))
    assert round_trip(rows) == rows


def test_the_real_run_round_trips_through_its_file(tmp_path: Path) -> None:
    batches = list(history_batches(REAL_HISTORY.parent, REAL_HISTORY, "s", "r", batch_rows=500))
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
