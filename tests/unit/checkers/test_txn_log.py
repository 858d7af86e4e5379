"""What the replicas' logs say of transactions (replicas.jsonl's batch kinds): how each
transaction's records ended, and the transactions left open."""

from __future__ import annotations

from typing import Any

from faultline.checkers.txn_log import OPEN, partition_logs

TOPIC = "fl-queue"


def line(node: int, *batches: tuple[int, int, int, str], partition: int = 0) -> dict[str, Any]:
    """A replicas.jsonl line of ``batches`` given as (base, last, producer id, kind)."""
    return {"topic": TOPIC, "partition": partition, "node": node, "log_start_offset": 0,
            "log_end_offset": batches[-1][1] + 1 if batches else None, "hw_checkpoint": None,
            "batches": [[b, last, 0, 1, pid, 0, 0, last - b, kind] for b, last, pid, kind in batches]}


def test_each_transactions_records_end_as_its_producers_next_marker_says() -> None:
    """Producer 7 commits offsets 0-1 and aborts 3; producer 8's records at 2 and 5 have no
    marker after them: open from 2, the last stable offset."""
    [(p, log)] = partition_logs([line(1, (0, 1, 7, "txn"), (2, 2, 8, "txn"), (3, 3, 7, "commit"),
                                      (4, 4, 7, "txn"), (5, 5, 8, "txn"), (6, 6, 7, "abort"),
                                      (7, 9, -1, "data"))], TOPIC, 3).items()
    assert p == 0
    assert [log.marker_at(o) for o in range(11)] == [
        "commit", "commit", OPEN, None, "abort", OPEN, None, None, None, None, None]
    assert dict(log.open) == {8: 2}
    assert (log.last_stable_offset, log.end) == (2, 10)


def test_a_partition_is_judged_by_its_longest_replica_and_old_lines_say_nothing() -> None:
    """Node 2 lacks the commit node 1 holds; node 3 is longest but written before batches
    carried their kind (eight items), so it is not read."""
    old = line(3, (0, 0, 7, "txn"), (1, 1, 7, "commit"), (2, 5, -1, "data"))
    old["batches"] = [b[:8] for b in old["batches"]]
    logs = partition_logs([line(2, (0, 0, 7, "txn")), line(1, (0, 0, 7, "txn"), (1, 1, 7, "commit")),
                           old, line(1, (0, 0, 9, "txn"), partition=1)], TOPIC, 3)
    assert (logs[0].node, logs[0].open, logs[0].marker_at(0)) == (1, {}, "commit")
    assert logs[1].open == {9: 0}
    assert partition_logs([old], TOPIC, 3) == {}


def test_a_partition_is_judged_by_the_replica_whose_high_watermark_is_highest() -> None:
    """Node 1 fell out of the ISR with a diverged tail (a transaction no marker follows),
    longer than the leader's log (node 2, its commit written): where node 2's checkpointed
    high watermark is the higher, its log is read and nothing is open; where node 1's were,
    node 1's tail would be."""
    for leader_hw, node, open_ in ((2, 2, {}), (0, 1, {9: 1})):
        diverged = {**line(1, (0, 0, 7, "txn"), (1, 2, 9, "txn"), (3, 3, 7, "commit")), "hw_checkpoint": 1}
        leader = {**line(2, (0, 0, 7, "txn"), (1, 1, 7, "commit")), "hw_checkpoint": leader_hw}
        [log] = partition_logs([diverged, leader], TOPIC, 2).values()
        assert (log.node, dict(log.open)) == (node, open_), leader_hw
