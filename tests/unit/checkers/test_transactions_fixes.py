"""The txn checker's loss rules, each by a verdict pair: a tear excused only where every
partition it skips may lose committed records, a write cycle a permitted loss explains,
a missing record every replica holds committed set aside."""

from __future__ import annotations

import dataclasses

from faultline.checkers.guarantees import G0, TORN
from faultline.checkers.txn_log import partition_logs
from faultline.spec import TopicSpec
from tests.unit.checkers.test_transactions import SECOND, TOPIC, H, committed_pair, spec, verdict


def wipe_led(h: H, node: int, leaders: dict[int, int]) -> None:
    """A wipe of ``node``, its leaders snapshot saying which node led each partition, and
    the restart of ``node``."""
    h.op("nemesis", "info", "wipe", {"nodes": [node],
                                     "leaders": {f"{TOPIC}/{p}": n for p, n in leaders.items()}})
    h.op("nemesis", "info", "wipe", {"nodes": [node], "result": "done"})
    h.fault("start", (node,))


def test_a_tear_is_excused_only_where_every_partition_it_skips_may_lose_data() -> None:
    """At replication factor 1, partition 1's only replica is wiped while a transaction
    writing partitions 0, 1 and 2 runs; a consumer skips its record on partition 1 (which
    the wipe may have lost) and, in one history, its record on partition 2 too, which no
    fault touched and the drain reads: that tear is forbidden."""
    s = dataclasses.replace(spec(replication_factor=1),
                            topic=TopicSpec(name=TOPIC, partitions=3, replication_factor=1,
                                            min_insync_replicas=1))
    for skips_two, permitted in ((False, True), (True, False)):
        h = H()
        h.wait(SECOND)
        h.begin(0, (0, 1), (1, 2), (2, 3))
        wipe_led(h, 2, {0: 1, 1: 2, 2: 3})
        h.end(0, "ok", (0, 1, 0), (1, 2, 0), (2, 3, 0))
        h.txn(1, "ok", (1, 4, 1), (2, 5, 1))
        h.poll(9, (0, 0, 1))
        h.poll(9, (1, 1, 4), *(() if skips_two else ((2, 0, 3),)), (2, 1, 5))
        h.drain(10, 0, (0, 1))
        h.drain(11, 1, (1, 4))
        h.drain(12, 2, (0, 3), (1, 5))
        r = verdict(h, s, protocol=2)
        consumer = next(e for e in r["anomalies"][TORN] if e["process"] == 9)
        assert consumer["permitted"] is permitted, skips_two
        assert r["valid"] is permitted, skips_two


def test_a_write_cycle_a_permitted_loss_explains_is_permitted() -> None:
    """T0 commits partition 0 offset 0 and partition 1 offset 3; partition 1's only replica
    is wiped after T0 ended, and T1, begun after, gets partition 1's offset 0, which the wipe
    freed: the cycle against real time is the loss's doing, permitted. The same wipe of
    partition 0's replica explains nothing on partition 1: G0 forbidden."""
    for node, permitted in ((2, True), (1, False)):
        h = H()
        h.wait(SECOND)
        h.txn(0, "ok", (0, 1, 0), (1, 2, 3))
        wipe_led(h, node, {0: 1, 1: 2})
        h.txn(1, "ok", (0, 3, 1), (1, 4, 0))
        h.drain(10, 0, *(((0, 1), (1, 3)) if node == 2 else ((1, 3),)))
        h.drain(11, 1, (0, 4), *(((3, 2),) if node == 1 else ()))
        r = verdict(h, spec(replication_factor=1), protocol=2)
        assert r["anomalies"][G0][0]["permitted"] is permitted, node
        assert (G0 in r["violations"]) is not permitted, node


def every_replica(*partitions: list[tuple[int, int, str]]) -> list[dict[str, object]]:
    """``replicas.jsonl`` lines of partitions 0, 1, ...: the same batches (offset,
    producer id, kind) on each of nodes 1 to 3."""
    return [{"topic": TOPIC, "partition": p, "node": node, "log_start_offset": 0,
             "log_end_offset": batches[-1][0] + 1, "hw_checkpoint": None,
             "batches": [[o, o, 0, 1, pid, 0, 0, 0, kind] for o, pid, kind in batches]}
            for p, batches in enumerate(partitions) for node in (1, 2, 3)]


def test_a_lost_write_every_replica_holds_committed_is_set_aside() -> None:
    """No fault; the drain of partition 1 misses value 2 at offset 0 while every replica
    holds a transaction's batch there: with a commit marker after it, the drain missed
    what the brokers hold (unknown, not counted); with an abort marker, the loss stands."""
    for marker, valid in (("commit", "unknown"), ("abort", False)):
        h = H()
        committed_pair(h)
        h.drain(10, 0, (0, 1))
        h.drain(11, 1)
        logs = partition_logs(every_replica([(0, 7, "txn"), (1, 7, "commit")],
                                            [(0, 7, "txn"), (1, 7, marker)]), TOPIC, 3)
        r = verdict(h, protocol=2, logs=logs)
        assert r["valid"] == valid, marker
        assert ("lost-write" in r["violations"]) is (marker == "abort"), marker
        assert [u["kind"] for u in r["unknown"]] == (["drain-missed-held"] if marker == "commit" else [])
        if marker == "abort":
            assert r["anomalies"]["lost-write"][0]["log_marker"] == "abort"
