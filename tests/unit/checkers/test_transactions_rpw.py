"""The txn checker on read-process-write histories (``transactions.reads``): write-read
edges, G1c, processed-twice, and aborted reads by transactions; each rule by a pair of
histories that differ in one fact."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from faultline.checkers.guarantees import G1C, PROCESSED_TWICE
from faultline.errors import HistoryError
from tests.schemas import validator
from tests.unit.checkers.test_transactions import SECOND, TOPIC, H, lone_replicas, spec, verdict


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


def twice(fault: Callable[[H], None], when: str = "between") -> H:
    """Transactions 1 and 2 (processes 1 and 2) both read value 1 at partition 0's offset 0;
    ``fault`` acts ``when``: before the first, between the two or after both; the drains
    read all."""
    h = H()
    h.wait(SECOND)
    h.txn(0, "ok", (0, 1, 0))
    for step in ("before", lambda: rpw(h, 1, "ok", [(1, 2, 0)], [(0, 0, 1)]), "between",
                 lambda: rpw(h, 2, "ok", [(1, 3, 1)], [(0, 0, 1)]), "after"):
        if step == when:
            fault(h)
        elif callable(step):
            step()
    h.drain(10, 0, (0, 1))
    h.drain(11, 1, (0, 2), (1, 3))
    return h


def wipe(node: int) -> Callable[[H], None]:
    return lambda h: (h.fault("wipe", (node,)), h.fault("start", (node,)))[-1]


#: The rpw group's __consumer_offsets partition (3) and the nodes holding it, by the metadata log.
ON_1, OFF_1 = (3, frozenset({"1", "2"})), (3, frozenset({"2", "3"}))


@pytest.mark.parametrize(("fault", "when", "offsets", "expected"), [
    (wipe(1), "between", ON_1, True),  # a replica of the group's offsets partition wiped between the reads
    (wipe(1), "between", OFF_1, False),  # node 1 holds none: the group's commits are elsewhere
    (wipe(1), "before", ON_1, False),  # wiped before the first transaction began: its commit came later
    (wipe(1), "after", ON_1, False),  # wiped after both had read
    (wipe(1), "between", (3, None), "unknown"),  # which nodes hold it is not known: an assumption
    (lambda h: h.op("nemesis", "info", "wipe", {"nodes": [1]}), "between", ON_1, "unknown"),  # no end
])
def test_processed_twice_is_permitted_by_data_destroyed_on_the_groups_offsets_replica_in_its_window(
        fault: Callable[[H], None], when: str, offsets: tuple[int, frozenset[str] | None],
        expected: bool | str) -> None:
    """Found by review: any wipe anywhere in the run excused it. Only data destroyed, by a
    fault that completed, on a node holding the rpw group's __consumer_offsets partition
    (here its ISR alone, min.insync.replicas=1 there), after the first reader's invoke and
    before the later read, may lose the first one's commit of the group's offsets."""
    r = verdict(twice(fault, when), protocol=2, offsets=offsets)
    (e,) = r["anomalies"][PROCESSED_TWICE]
    assert r["valid"] == (False if expected is False else "unknown" if expected == "unknown" else True)
    assert e["permitted"] is (expected is not False)
    if expected is not False:
        assert "__consumer_offsets" in e["reason"]
    if expected == "unknown":
        assert [u["kind"] for u in r["unknown"]] == ["permitted-on-assumption"]


def test_processed_twice_is_permitted_by_a_wiped_offsets_replica_only_where_it_was_the_isr_alone() -> None:
    """The same wipe of node 1, a replica of the rpw group's offsets partition (nodes 1 and
    2) between the reads: permitted where the metadata log shows node 1 that partition's ISR
    alone; where node 2 stayed in the ISR it kept every commit the coordinator answered (once
    below the HW, so on every ISR member), and the new leader has the first one's: violation."""
    alone = verdict(twice(wipe(1)), protocol=2, offsets=ON_1)
    assert alone["valid"] is True and alone["anomalies"][PROCESSED_TWICE][0]["permitted"]
    in_sync = verdict(twice(wipe(1)), protocol=2, offsets=ON_1, offsets_isr=None)
    assert in_sync["violations"] == [PROCESSED_TWICE]


CUT = {"old_end": 9, "new_end": 6, "recovery_point": 6, "bytes_removed": 300}


@pytest.mark.parametrize(("truncated", "permitted"), [
    ({f"{TOPIC}/0": {**CUT, "new_end": 9}, "__consumer_offsets/3": CUT}, True),
    ({f"{TOPIC}/0": {**CUT, "new_end": 9}}, False),  # every other topic's partition that lost records: not 3
])
def test_a_lose_unflusheds_own_record_decides_whether_it_lost_the_groups_offsets(
        truncated: dict[str, Any], permitted: bool) -> None:
    def lose(h: H) -> None:
        h.fault("lose-unflushed", (1,), truncated=truncated)
        h.fault("start", (1,))

    r = verdict(twice(lose), protocol=2, offsets=ON_1)
    assert r["anomalies"][PROCESSED_TWICE][0]["permitted"] is permitted
    assert r["violations"] == ([] if permitted else [PROCESSED_TWICE])


@pytest.mark.parametrize(("node", "when", "permitted"), [(1, "between", True), (2, "between", False),
                                                        (1, "after", False)])
def test_processed_twice_is_permitted_by_a_truncation_of_the_records_partition_in_its_window(
        node: int, when: str, permitted: bool) -> None:
    """A truncation of the test topic below the group's committed position puts the next
    fetch out of range and auto.offset.reset=earliest rewinds the member: the same record
    (offset and value) is read again. Partition 0's only replica (node 1) wiped between the
    two reads permits it; partition 1's (node 2), or one after both, does not (neither node
    holds the group's offsets)."""
    r = verdict(twice(wipe(node), when), spec(replication_factor=1), protocol=2, timeline=lone_replicas(),
                offsets=(3, frozenset({"3"})))
    (e,) = r["anomalies"][PROCESSED_TWICE]
    assert e["permitted"] is permitted
    if permitted:
        assert "KAFKA-19902" in e["reason"]


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


@pytest.mark.parametrize("read", [False, True])
def test_a_g1c_set_is_permitted_only_where_each_of_its_cycles_has_an_excused_write(read: bool) -> None:
    """Found by review: a set of transactions joined by cycles was permitted whole where any
    ww edge in it was excused. Here transaction 1 read transaction 0's record of partition 1
    and wrote below it there, where node 2 (partition 1's only replica) was wiped while 0
    ran: that cycle is permitted. Transaction 2 writing below 0's record of partition 0 is a
    ww edge no fault excuses; reading 0's record closes a second cycle through it alone,
    forbidden, in the same set."""
    h = H()
    h.wait(SECOND)
    h.begin(0, (0, 1), (1, 2))
    h.fault("wipe", (2,))
    h.fault("start", (2,))
    h.end(0, "ok", (0, 1, 1), (1, 2, 1))
    rpw(h, 1, "ok", [(1, 3, 0)], [(1, 1, 2)])
    rpw(h, 2, "ok", [(0, 4, 0)], [(0, 1, 1)] if read else [])
    h.drain(10, 0, (0, 4), (1, 1))
    h.drain(11, 1, (0, 3), (1, 2))
    r = verdict(h, spec(replication_factor=1), protocol=2, timeline=lone_replicas())
    (e,) = r["anomalies"][G1C]
    assert len(e["txn_indexes"]) == (3 if read else 2)
    assert e["permitted"] is not read
    assert r["violations"] == ([G1C] if read else [])


@pytest.mark.parametrize("p0_first", [True, False])
def test_a_g1c_cycle_is_judged_by_each_partition_its_order_comes_from(p0_first: bool) -> None:
    """Found by review: a pair of transactions kept one write-write edge, of whichever
    partition came first, so an excused edge (partition 1, its one replica wiped while
    transaction 0 ran) hid an unexcused one (partition 0): the verdict hung on the order of
    transaction 0's sends. Transaction 1 read 0's record of partition 1 and wrote below 0's
    records in both partitions: forbidden either way."""
    h = H()
    h.wait(SECOND)
    sends = [(0, 1, 1), (1, 2, 1)] if p0_first else [(1, 2, 1), (0, 1, 1)]
    h.begin(0, *((q, v) for q, v, _ in sends))
    h.fault("wipe", (2,))
    h.fault("start", (2,))
    h.end(0, "ok", *sends)
    rpw(h, 1, "ok", [(1, 3, 0), (0, 4, 0)], [(1, 1, 2)])
    h.drain(10, 0, (0, 4), (1, 1))
    h.drain(11, 1, (0, 3), (1, 2))
    r = verdict(h, spec(replication_factor=1), protocol=2, timeline=lone_replicas())
    (e,) = r["anomalies"][G1C]
    assert (e["permitted"], r["violations"]) == (False, [G1C])


@pytest.mark.parametrize("between", [False, True])
def test_a_record_left_out_as_maybe_lost_keeps_the_order_of_those_around_it(between: bool) -> None:
    """Found by review: leaving out an excused write-write edge A -> B also left out A's
    order before C, the record after B, which does not depend on B's. Transaction B (begun
    before partition 1's one replica was wiped) may have lost its record there; C wrote
    after the partition was whole again, and A read C's record and wrote below it: a
    cycle no fault permits, with B between A and C or not."""
    h = H()
    h.wait(SECOND)
    if between:
        h.begin(0, (1, 1))
        h.fault("wipe", (2,))
        h.fault("start", (2,))
        h.end(0, "ok", (1, 1, 1))
    h.wait(SECOND)
    whole_again = h.now()
    h.wait(SECOND)
    h.txn(1, "ok", (1, 2, 2))
    rpw(h, 2, "ok", [(1, 3, 0)], [(1, 2, 2)])
    h.drain(10, 0)
    h.drain(11, 1, (0, 3), *([(1, 1)] if between else []), (2, 2))
    r = verdict(h, spec(replication_factor=1), protocol=2, timeline=lone_replicas(whole_again))
    (e,) = r["anomalies"][G1C]
    assert (e["permitted"], r["violations"]) == (False, [G1C])


def test_a_pair_of_transactions_joined_both_ways_keeps_both_edges() -> None:
    """Found by review: where one transaction read another's record and also wrote after it
    in that partition, the pair kept the ww edge alone, and the cycle it closes with the
    other partition's order read as G0 only."""
    h = H()
    h.txn(0, "ok", (0, 1, 0), (1, 5, 1))
    rpw(h, 1, "ok", [(0, 2, 1), (1, 6, 0)], [(0, 0, 1)])
    r = verdict(h)
    assert r["anomaly_counts"][G1C] == 1 and G1C in r["violations"]
    assert [0, 2, 0, "wr"] in r["anomalies"][G1C][0]["edges"]
