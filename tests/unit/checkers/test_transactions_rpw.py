"""The txn checker on read-process-write histories (``transactions.reads``): write-read
edges, G1c, processed-twice, and aborted reads by transactions; each rule by a pair of
histories that differ in one fact."""

from __future__ import annotations

from typing import Any

import pytest

from faultline.checkers.guarantees import G1C, PROCESSED_TWICE
from faultline.errors import HistoryError
from tests.schemas import validator
from tests.unit.checkers.test_transactions import TOPIC, H, spec, verdict


def rpw_end(h: H, p: int, outcome: str, sends: list[tuple[int, int, int]],
            reads: list[tuple[int, int, int]], abort: bool = False) -> None:
    """A read-process-write transaction's completion: ``sends`` as (partition, value,
    offset), ``reads`` as (partition, offset, value)."""
    last: dict[int, int] = {}
    for q, o, _ in reads:
        last[q] = max(last.get(q, -1), o)
    h.op(p, outcome, "txn", {"topic": TOPIC, "abort": abort,
                             "sends": [{"partition": q, "value": v, "offset": o} for q, v, o in sends],
                             "reads": [list(r) for r in reads],
                             "group_offsets": [[q, o + 1] for q, o in sorted(last.items())]})


def rpw(h: H, p: int, outcome: str, sends: list[tuple[int, int, int]],
        reads: list[tuple[int, int, int]], abort: bool = False) -> None:
    h.begin(p, *((q, v) for q, v, _ in sends), abort=abort)
    rpw_end(h, p, outcome, sends, reads, abort)


def test_a_transaction_that_read_anothers_write_makes_a_wr_edge_and_its_history_validates() -> None:
    h = H()
    h.txn(0, "ok", (0, 1, 0))
    rpw(h, 1, "ok", [(1, 2, 0)], [(0, 0, 1)])
    check = validator("history.schema.json")
    for row in h.rows:
        check.validate(row)
    r = verdict(h)
    assert (r["violations"], r["stats"]["wr_edges"], r["stats"]["records_processed"]) == ([], 1, 1)
    validator("results.schema.json").validate(r)


@pytest.mark.parametrize("read", [True, False])
def test_a_read_that_closes_a_cycle_against_real_time_is_g1c(read: bool) -> None:
    # transaction 0 (value 1, offset 1 of partition 0) ends before transaction 1 begins,
    # whose value 2 sits below it at offset 0: a write-write edge 1 -> 0 against real time;
    # transaction 1 reading value 1 adds the write-read edge 0 -> 1 and closes a cycle
    h = H()
    h.txn(0, "ok", (0, 1, 1))
    rpw(h, 1, "ok", [(0, 2, 0)], [(0, 1, 1)] if read else [])
    r = verdict(h)
    assert r["anomaly_counts"][G1C] == int(read)
    assert r["violations"] == ([G1C] if read else [])
    if read:
        assert r["anomalies"][G1C][0]["edges"] == [[0, 2, 0, "wr"], [2, 0, 0, "ww"]]


@pytest.mark.parametrize("paused", [False, True])
def test_a_g1c_cycle_of_concurrent_transactions_needs_a_late_write(paused: bool) -> None:
    """Found by review: a reader appends its records after its read, and what it read was
    committed before it, so even concurrent transactions make no cycle with a wr edge:
    forbidden; under protocol 1, a pause while the writer ran may have held its request
    until it landed late (KAFKA-17754), which permits it."""
    h = H()
    h.begin(0, (0, 1))
    if paused:
        h.fault("pause")
    h.begin(1, (0, 2))
    h.end(0, "ok", (0, 1, 1))
    rpw_end(h, 1, "ok", [(0, 2, 0)], [(0, 1, 1)])
    r = verdict(h)
    assert r["anomaly_counts"][G1C] == 1
    assert r["violations"] == ([] if paused else [G1C])
    assert ("KAFKA-17754" in r["anomalies"][G1C][0]["reason"]) is paused


@pytest.mark.parametrize("outcome", ["ok", "fail"])
def test_a_record_two_committed_transactions_read_is_processed_twice(outcome: str) -> None:
    h = H()
    h.txn(0, "ok", (0, 1, 0))
    rpw(h, 1, "ok", [(1, 2, 0)], [(0, 0, 1)])
    # an aborted transaction's reads count for nothing
    rpw(h, 2, outcome, [(1, 3, 2)], [(0, 0, 1)], abort=outcome == "fail")
    r = verdict(h)
    assert r["anomaly_counts"][PROCESSED_TWICE] == (outcome == "ok")
    assert r["violations"] == ([PROCESSED_TWICE] if outcome == "ok" else [])


def test_processed_twice_after_a_wipe_is_permitted() -> None:
    h = H()
    h.fault("wipe")
    h.txn(0, "ok", (0, 1, 0))
    rpw(h, 1, "ok", [(1, 2, 0)], [(0, 0, 1)])
    rpw(h, 2, "ok", [(1, 3, 2)], [(0, 0, 1)])
    r = verdict(h, protocol=2)
    assert r["anomaly_counts"][PROCESSED_TWICE] == 1
    assert PROCESSED_TWICE not in r["violations"]
    assert "__consumer_offsets" in r["anomalies"][PROCESSED_TWICE][0]["reason"]


@pytest.mark.parametrize("writer", ["ok", "fail"])
def test_a_transaction_that_read_an_aborted_write_is_an_aborted_read_whatever_consumers_read(
        writer: str) -> None:
    h = H()
    h.txn(0, writer, (0, 1, 0), abort=writer == "fail")
    rpw(h, 1, "ok", [(1, 2, 0)], [(0, 0, 1)])
    r = verdict(h, spec(isolation="read_uncommitted"))
    assert r["anomaly_counts"]["aborted-read"] == (writer == "fail")
    assert r["violations"] == (["aborted-read"] if writer == "fail" else [])


@pytest.mark.parametrize("reads", [[[0, 0]], "x", [[0, "a", 1]]])
def test_a_txn_op_with_malformed_reads_is_refused_naming_its_line(reads: Any) -> None:
    h = H()
    h.begin(0, (0, 1))
    h.op(0, "ok", "txn", {"topic": TOPIC, "abort": False, "sends": [{"partition": 0, "value": 1}],
                          "reads": reads})
    with pytest.raises(HistoryError, match=r"history:2: a txn op's reads are not as docs/history.md says"):
        verdict(h)
