"""The compiled scanner of the history's common lines (:mod:`faultline.checkers.scan`):
it reads the lines the journal writes most, and hands every other line back to the
reader; a history file checked through it gives what reading its rows gives, for any
damage to its text: the same results.json object, or the same HistoryError."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from faultline.checkers import kernel, queue, scan
from faultline.checkers.synthetic import Shape, generate
from faultline.errors import HistoryError
from faultline.history import HistoryFile, ReadResult, iter_rows
from faultline.history.writer import _lines
from tests.unit.checkers.queue_hist import make_spec

Rows = list[dict[str, Any]]


def journal(rows: Rows) -> bytes:
    """``rows`` as the run's journal writes them (history.writer._lines, one op a call)."""
    return b"".join(_lines(r["index"], r["time"], [(r["process"], r["type"], r["f"], r["value"],
                                                     r.get("error"))]) for r in rows)


def scanned(data: bytes, parts: int, errors: tuple[str, ...] = ()) -> tuple[list[int], int]:
    """The lines the scanner reads itself (their indexes), and how many ops it made, the
    error names ``errors`` numbered (0, 1, ...)."""
    return scanned_ops(data, parts, errors)[:2]


def scanned_ops(data: bytes, parts: int, errors: tuple[str, ...] = ()) -> tuple[list[int], int, Any]:
    """:func:`scanned`, and the op table."""
    names, name_ends = queue._names(dict.fromkeys(errors, 0))
    buf = np.frombuffer(data, np.uint8)
    ops = np.zeros((len(data) // 20 + 1, kernel.FIELDS), np.int64)
    recs = np.zeros((len(data) // 4 + 1, 3), np.int64)
    pos = n = nr = index = last = 0
    read: list[int] = []
    while True:
        before = n
        what, pos, n, nr, index, last = scan.scan(buf, pos, np.frombuffer(b"fl-queue", np.uint8),
                                                  parts, ops, n, recs, nr, index, last, 1 << 62,
                                                  np.empty(8, np.int64), names, name_ends)
        read += [int(ops[k, kernel.F_LINE]) - 1 for k in range(before, n)]
        if what == scan.BLOCK_DONE:
            return read, n, ops
        assert what == scan.OTHER_LINE
        end = scan.line_end(data, pos)
        if index == 0 and end == len(data):  # one line: the scanner left it
            return read, n, ops
        last = orjson.loads(data[pos:end])["time"]  # what the reader tells the scanner
        pos = end
        index += 1


def other_line(r: dict[str, Any]) -> bool:
    """Whether the scanner leaves line ``r`` to the reader: the nemesis's, one with an
    error, a poll that did not end ok, a drain's invoke, an op of another f."""
    return (r["process"] == "nemesis" or r.get("error") is not None or r["f"] not in ("send", "poll", "drain")
            or (r["f"] == "poll" and r["type"] in ("fail", "info"))
            or (r["f"] == "drain" and r["type"] != "ok"))


@pytest.mark.parametrize("seed", [1, 2])
def test_the_journals_common_lines_are_read_by_the_scanner(seed: int) -> None:
    rows = list(generate(Shape(seed=seed, values=400, partitions=3, faults=4)))
    read, _ = scanned(journal(rows), 3)
    expected = [r["index"] for r in rows if not other_line(r)]
    assert read == expected and len(expected) > 0.9 * len(rows)


@pytest.mark.parametrize("line", [
    b'{"index":0,"time":5,"process":1,"type":"invoke","f":"send","value":{"topic":"fl-queue","partition":0,"value":7}}\n',
    b'{"index":0,"time":5,"process":1,"type":"ok","f":"poll","value":{"records":[["fl-queue",2,0,7]]}}\n',
    b'{"index":0,"time":5,"process":1,"type":"ok","f":"drain","value":{"topic":"fl-queue","partition":1,'
    b'"log_start_offset":0,"high_watermark":1,"records":[[0,7]],"last":true}}\n',
])
def test_a_line_is_read_only_exactly_as_the_journal_writes_it(line: bytes) -> None:
    """Each common line is read; any change the reader would read differently or
    refuse is left to it: another topic, a partition the topic lacks, a space, a number
    of 19 digits or with a leading zero, a key twice, a cut line, another index."""
    assert scanned(line, 3)[0] == [0]
    for damaged in (line.replace(b"fl-queue", b"fl-queuf"), line.replace(b"fl-queue\",2", b"fl-queue\",3")
                    .replace(b'"partition":1', b'"partition":3').replace(b'"partition":0', b'"partition":3'),
                    line.replace(b'"time":5', b'"time": 5'), line.replace(b"7", b"7000000000000000000"),
                    line.replace(b'"time":5', b'"time":05'), line.replace(b'"index":0', b'"index":1'),
                    line[:-2] + b"\n", line[:-1], line.replace(b'{"topic"', b'{"value":1,"topic"')):
        if damaged != line:  # a key twice: only in an object
            assert scanned(damaged, 3)[0] == [], damaged


def test_a_sends_error_is_read_when_the_engine_has_numbered_its_name() -> None:
    """A failed or unknown send's error the engine has seen is read, as its number; a name
    it has not seen (which the reader numbers), an escape, an ok send's error are left to
    the reader."""
    line = (b'{"index":0,"time":5,"process":1,"type":"fail","f":"send","value":{"topic":"fl-queue",'
            b'"partition":0,"value":7},"error":"NOT_ENOUGH_REPLICAS"}\n')
    known = ("_MSG_TIMED_OUT", "NOT_ENOUGH_REPLICAS")
    read, _, ops = scanned_ops(line, 3, known)
    assert read == [0] and ops[0, kernel.F_ERR] == 1
    assert scanned(line.replace(b'"fail"', b'"info"'), 3, known)[0] == [0]
    for damaged, errors in ((line, ()), (line, ("NOT_ENOUGH_REPLICA",)), (line, ("NOT_ENOUGH_REPLICASX",)),
                            (line.replace(b"NOT_", b"NOT\\u005f"), known),
                            (line.replace(b'"fail"', b'"ok"'), known),
                            (line.replace(b'S"}', b'S" }'), known)):
        assert scanned(damaged, 3, errors)[0] == [], (damaged, errors)


def check_file(path: Path, spec: Any) -> Any:
    """The check of the history file at ``path`` through the engine's own reader, and
    through iter_rows' rows: a results.json object or a HistoryError's text each, and
    what the reader learnt (lines, a cut last one)."""
    out = []
    for read in (ReadResult(), ReadResult()):
        rows = HistoryFile(str(path), read) if not out else iter_rows(path, read)
        try:
            out.append((queue.check_rows(spec, rows, source=str(path), truncated=read).to_json(),
                        read.lines, read.truncated))
        except HistoryError as e:
            out.append((str(e), None, None))
    return out


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 1000), data=st.data())
def test_a_damaged_history_checks_the_same_through_the_scanner(seed: int, data: st.DataObject) -> None:
    rows = copy.deepcopy(list(generate(Shape(seed=seed, values=30, partitions=2, faults=2))))
    text = bytearray(journal(rows))
    for _ in range(data.draw(st.integers(1, 3), "edits")):
        at = data.draw(st.integers(0, len(text) - 1), "at")
        edit = data.draw(st.sampled_from(["byte", "delete", "digit", "cut"]), "edit")
        if edit == "byte":
            text[at] = data.draw(st.sampled_from(b'0123456789-,:[]{}" \nabtu'), "byte")
        elif edit == "delete":
            del text[at]
        elif edit == "digit" and chr(text[at]).isdigit():
            text[at:at + 1] = str(data.draw(st.integers(0, 10**19), "number")).encode()
        elif edit == "cut":
            del text[at:]
            break
    note(bytes(text).decode(errors="replace")[:4000])
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
        path = Path(tmp) / "history.jsonl"
        path.write_bytes(bytes(text))
        ours, theirs = check_file(path, make_spec(partitions=2))
    assert ours == theirs


def test_a_process_past_64_bits_is_refused_in_the_same_words_on_both_paths(tmp_path: Path) -> None:
    """Found by the damaged-history test above: the engine's feed said "a time or
    process that does not fit 64 bits", history.pairing "process N does not fit 64 bits"."""
    rows = copy.deepcopy(list(generate(Shape(seed=0, values=30, partitions=2, faults=2))))
    path = tmp_path / "history.jsonl"
    path.write_bytes(journal(rows).replace(b'"process":0', b'"process":9223372036854775808', 1))
    ours, theirs = check_file(path, make_spec(partitions=2))
    assert ours == theirs
    assert ours[0].endswith("process 9223372036854775808 does not fit 64 bits")


def test_lines_of_more_records_than_a_batch_holds_check_the_same(tmp_path: Path) -> None:
    """A poll and a drain of more records each than the compiled feed's batch has room
    for at first (queue.BATCH): the batch grows, and the check is the rows' check."""
    n = 3 * queue.BATCH
    rows: Rows = []
    for v in range(n):
        send = {"topic": "fl-queue", "partition": 0, "value": v}
        rows += [{"process": 0, "type": "invoke", "f": "send", "value": send},
                 {"process": 0, "type": "ok", "f": "send", "value": {**send, "offset": v}}]
    drained = {"topic": "fl-queue", "partition": 0, "log_start_offset": 0, "high_watermark": n,
               "records": [[v, v] for v in range(n)], "last": True}
    rows += [{"process": 1, "type": "invoke", "f": "poll", "value": None},
             {"process": 1, "type": "ok", "f": "poll",
              "value": {"records": [["fl-queue", 0, v, v] for v in range(n)]}},
             {"process": 2, "type": "invoke", "f": "drain", "value": {"topic": "fl-queue", "partition": 0}},
             {"process": 2, "type": "ok", "f": "drain", "value": drained}]
    rows = [{"index": i, "time": i, **r} for i, r in enumerate(rows)]
    path = tmp_path / "history.jsonl"
    path.write_bytes(journal(rows))
    ours, theirs = check_file(path, make_spec(partitions=1))
    assert ours == theirs and ours[0]["stats"]["records_drained"] == n
