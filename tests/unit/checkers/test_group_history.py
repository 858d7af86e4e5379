"""The group checker's reader (faultline/checkers/group_history.py GroupReader): it reads a stored
run's history beside the queue checker, once, as the rows the check was given."""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import orjson
import pytest

from faultline.checkers import queue
from faultline.checkers.group_history import GroupReader, group
from faultline.checkers.stored import StoredRun, check_stored, check_stored_table, compose
from faultline.history import HistoryFile, ReadResult, reader
from tests.unit.checkers.test_groups import TOPIC, G, group_spec, handed_over, judged, stored


def history(first: int) -> G:
    """:func:`handed_over`, process 2 reading from ``first`` (below 5: a redelivery) after
    a kill; the drain."""
    h = handed_over(range(first, 8), "kill")
    h.drain(0, [(off, 100 + off) for off in range(8)])
    return h


def journal(path: Path, h: G, cut: bool = False) -> Path:
    """``h`` written as a run journals it (docs/history.md's field order, no spaces), its
    last line cut when ``cut``."""
    data = b"".join(orjson.dumps(o) + b"\n" for o in h.ops)
    path.write_bytes(data[:-9] if cut else data)
    return path


def test_the_reader_beside_another_reads_the_group_the_rows_hold(tmp_path: Path) -> None:
    """Tapped on a history file, read by the queue checker's engine or as rows, the reader
    finds the group the rows make; a cut last line is read as neither reader reads it."""
    h = history(2)
    path = journal(tmp_path / "history.jsonl", h)
    expected = group(h.ops, TOPIC, 1)
    for read in ("rows", "engine"):
        tap = GroupReader(TOPIC, 1)
        rows = tap.tap(HistoryFile(str(path), ReadResult()))
        if read == "rows":
            assert [*rows] == h.ops
        else:
            assert isinstance(rows, HistoryFile)
            queue.check_rows_table(group_spec(), rows)
        assert tap.done() == expected, read
    tap = GroupReader(TOPIC, 1)
    assert [*tap.tap(iter(h.ops))] == h.ops
    assert tap.done() == expected
    tap = GroupReader(TOPIC, 1)
    [*tap.tap(HistoryFile(str(journal(tmp_path / "cut.jsonl", h, cut=True)), ReadResult()))]
    assert tap.done() == group(h.ops[:-1], TOPIC, 1)


def test_a_stored_group_run_reads_its_history_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = stored(tmp_path / "g", group_spec(), history(2))
    journal(run_dir / "history.jsonl", history(2))
    reads: list[str] = []

    def counted(blocks: Callable[..., Generator[bytes, None, None]]) -> Callable[..., Any]:
        def read(path: Any, *args: Any) -> Generator[bytes, None, None]:
            reads.append(str(path))
            return blocks(path, *args)
        return read

    monkeypatch.setattr(queue, "history_blocks", counted(queue.history_blocks))
    monkeypatch.setattr(reader, "history_blocks", counted(reader.history_blocks))
    result = check_stored(run_dir)
    assert result.violations == ["redelivery-below-commit"] and len(reads) == 1


def test_the_group_checker_judges_the_rows_the_check_was_given(tmp_path: Path) -> None:
    """The Spark pipeline hands the check a run's rows read from its ops table: the group
    checker judges those, not the history file beside them."""
    run_dir = stored(tmp_path / "g", group_spec(), history(5))
    assert check_stored(run_dir).violations == []
    rows = [json.loads(json.dumps(o)) for o in history(2).ops]
    result, _ = check_stored_table(run_dir, rows)
    assert result.violations == ["redelivery-below-commit"]


def test_a_retired_producer_is_no_retired_member() -> None:
    """A producer's send ending info retires the producer, which commits nothing: with
    async commits, a commit-lost stays a violation; a retired member's unjournaled commits
    leave it unknown."""
    for retired, verdict in ((0, False), (2, "unknown")):
        h = G()
        h.rebalance(1, "assign", [0])
        h.poll(1, [(0, off, 100 + off) for off in range(3)])
        h.commit(1, [(0, 3)])
        h.poll(1, [(0, 3, 103), (0, 4, 104)])
        h.commit(1, [(0, 5)])  # requested after the poll that gave 4: after 3 ended
        h.rebalance(2, "assign", [])
        if retired == 0:
            h.op(0, "invoke", "send", {"topic": TOPIC, "partition": 0, "value": 7})
            h.op(0, "info", "send", {"topic": TOPIC, "partition": 0, "value": 7}, "_MSG_TIMED_OUT")
        else:
            h.commit(2, [], "info")
        assert judged(h, end={0: 3}, asynchronous=True)["valid"] == verdict


def test_the_group_checker_composed_for_a_workload_that_does_not_name_it_is_unknown(tmp_path: Path) -> None:
    """No reader read the history beside the first checker: the group checker says so, and
    judges nothing."""
    for name, spec in (("group", group_spec()), ("queue", group_spec("assign"))):
        run_dir = stored(tmp_path / name, spec, history(5))
        run = StoredRun(run_dir, spec, HistoryFile(str(run_dir / "history.jsonl"), ReadResult()),
                        ReadResult(), "history")
        unknown = compose(["queue", "group"], run).result.unknown
        errors = [u["why"] for u in unknown if u["kind"] == "checker-error"]
        assert len(errors) == (name == "queue") and all("checkers name it" in e for e in errors)
