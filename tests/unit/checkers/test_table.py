"""The history's sends as columns (faultline.checkers.table): what the checker's one pass
leaves for the report equals what a direct reading of the history says, and a stored
table is only used with the history it was made from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from faultline.checkers.queue import check_rows_table
from faultline.checkers.synthetic import Shape, generate
from faultline.checkers.table import HistoryDigest, Send, read_digest, write_digest
from faultline.history import NEMESIS
from faultline.spec import MAX_TIME_LIMIT_S, TestSpec


def reference(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[Any, Send], list[tuple[int, str, str]],
                                                          tuple[int | None, int, int, int]]:
    """The report's own pass over a history before the table existed (kept as the
    reference): every send by value, the errors, and (first_send, last_send, end_time, ops)."""
    sends: dict[Any, Send] = {}
    errors: list[tuple[int, str, str]] = []
    open_sends: dict[tuple[Any, Any], tuple[int, Any]] = {}
    first_send, last_send, n, t = None, 0, 0, 0
    for d in rows:
        n += 1
        t, process, typ, f = d["time"], d["process"], d["type"], d["f"]
        if process == NEMESIS:
            continue
        v = d.get("value")
        if f == "send" and isinstance(v, dict):
            key = (process, v.get("value"))
            last_send = t
            first_send = t if first_send is None else first_send
            if typ == "invoke":
                open_sends[key] = (t, v)
                continue
            invoked, _ = open_sends.pop(key)
            offset = v.get("offset")
            sends[key[1]] = Send(process, key[1], v["topic"], v["partition"], invoked, t, typ,
                                 offset if isinstance(offset, int) and offset >= 0 else None,
                                 d.get("error"))
        if typ in ("fail", "info"):
            errors.append((t, f, d.get("error") or f"{typ} (no error)"))
    for (process, value), (invoked, v) in open_sends.items():
        sends[value] = Send(process, value, v["topic"], v["partition"], invoked)
    return sends, errors, (first_send, last_send, t, n)


def table_of(rows: list[dict[str, Any]]) -> HistoryDigest:
    table = check_rows_table(TestSpec(time_limit_s=MAX_TIME_LIMIT_S), rows)[1]
    assert table is not None
    return table


def same(table: HistoryDigest, rows: list[dict[str, Any]]) -> None:
    sends, errors, (first, last, end, ops) = reference(rows)
    assert len(table.sends) == len(sends)
    assert {v: table.sends.get(v) for v in sends} == sends
    assert sorted(table.errors) == sorted(errors)
    assert [e[0] for e in table.errors] == sorted(e[0] for e in errors)
    assert (table.first_send, table.last_send, table.end_time, table.ops) == (first, last, end, ops)


def test_the_checkers_pass_gives_every_send_and_error() -> None:
    tp = {"topic": "fl-queue", "partition": 0}
    rows = [
        {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "send", "value": {**tp, "value": 1}},
        {"index": 1, "time": 5, "process": 0, "type": "invoke", "f": "send",
         "value": {"topic": "fl-queue", "partition": 1, "value": 2}},
        {"index": 2, "time": 10, "process": 0, "type": "ok", "f": "send",
         "value": {**tp, "value": 1, "offset": 7}},
        {"index": 3, "time": 20, "process": 0, "type": "info", "f": "send",
         "value": {"topic": "fl-queue", "partition": 1, "value": 2}, "error": "_MSG_TIMED_OUT"},
        {"index": 4, "time": 30, "process": 1, "type": "invoke", "f": "send",
         "value": {"topic": "fl-queue", "partition": 2, "value": 3}},
        {"index": 5, "time": 35, "process": 4, "type": "invoke", "f": "poll", "value": None},
        {"index": 6, "time": 36, "process": 4, "type": "fail", "f": "poll", "value": None},
        {"index": 7, "time": 40, "process": 9, "type": "invoke", "f": "drain", "value": tp},
        {"index": 8, "time": 50, "process": 9, "type": "ok", "f": "drain",
         "value": {**tp, "records": [[7, 1]], "high_watermark": 8, "log_start_offset": 0, "last": True}},
    ]
    table = table_of(rows)
    assert table.sends.get(1) == Send(0, 1, "fl-queue", 0, 0, 10, "ok", 7, None)
    assert table.sends.get(2) == Send(0, 2, "fl-queue", 1, 5, 20, "info", None, "_MSG_TIMED_OUT")
    assert table.sends.get(3) == Send(1, 3, "fl-queue", 2, 30) and table.sends.get(4) is None
    assert table.errors == [(20, "send", "_MSG_TIMED_OUT"), (36, "poll", "fail (no error)")]
    assert (table.first_send, table.last_send, table.end_time, table.ops) == (0, 30, 50, 9)
    same(table, rows)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), fail=st.sampled_from([0.0, 0.05, 0.3]),
       info=st.sampled_from([0.0, 0.05, 0.3]), producers=st.integers(1, 4),
       stretch=st.sampled_from([1, 10**6]))
def test_the_table_says_what_the_history_says(seed: int, fail: float, info: float, producers: int,
                                              stretch: int) -> None:
    """``stretch`` spreads the times out (within the longest test's): invokes seconds apart,
    whose differences the engine's int32 cells of invoke times cannot hold."""
    rows = list(generate(Shape(seed=seed, values=300, fail=fail, info=info, producers=producers)))
    for r in rows:
        r["time"] *= stretch
    same(table_of(rows), rows)


def test_a_stored_table_round_trips_and_is_only_used_with_its_history(tmp_path: Path) -> None:
    rows = list(generate(Shape(values=500, fail=0.1, info=0.1)))
    history = tmp_path / "history.jsonl"
    history.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    table = table_of(rows)
    path = write_digest(tmp_path / "history.sends.parquet", table, history)
    back = read_digest(path, history)
    assert back is not None
    for name in ("value", "part", "process", "invoke_time", "end_time", "outcome", "offset"):
        assert np.array_equal(getattr(back.sends, name), getattr(table.sends, name)), name
    assert back.sends.parts == table.sends.parts and back.errors == table.errors
    same(back, rows)
    with history.open("ab") as fh:  # the history changed since: the table is not its
        fh.write(b"\n")
    assert read_digest(path, history) is None
    assert read_digest(tmp_path / "nope.parquet", history) is None


def test_the_table_is_written_through_a_fresh_temporary_file_never_a_planted_one(tmp_path: Path) -> None:
    """A link planted where a fixed temporary name would be is left alone, and so is what
    it points at (``faultline check`` runs as root, the run directory may not be its own)."""
    rows = list(generate(Shape(values=50)))
    history = tmp_path / "history.jsonl"
    history.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / ".history.sends.parquet.tmp").symlink_to(victim)
    path = write_digest(tmp_path / "history.sends.parquet", table_of(rows), history)
    assert victim.read_bytes() == b"precious"
    assert read_digest(path, history) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".history.sends.parquet.tmp", "history.jsonl", "history.sends.parquet", "victim"]
