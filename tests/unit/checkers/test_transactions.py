"""The txn checker: each anomaly by a pair of histories that differ in one fact, and the
guarantee rules per transaction protocol version."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from faultline.checkers.faults_seen import MetadataState, Timeline
from faultline.checkers.groups import OffsetsPartition
from faultline.checkers.guarantees import (
    CONCURRENT_WRITE_CYCLE,
    G0,
    G1C,
    PROCESSED_TWICE,
    TORN,
    GuaranteeConfig,
    TransactionConfig,
    transaction_forbidden,
    transaction_rules,
)
from faultline.checkers.transactions import check_transactions, txn_history
from faultline.checkers.txn_log import PartitionLog, final_stable_offsets, partition_logs
from faultline.errors import HistoryError
from faultline.history import Op
from faultline.spec import ConsumerSpec, KafkaSpec, TestSpec, TopicSpec, WorkloadSpec
from tests.schemas import validator

TOPIC = "fl-queue"
MS = 1_000_000


def spec(isolation: str = "read_committed", version: str = "4.3.1",
         transaction_version: int | None = None, client: str = "librdkafka",
         replication_factor: int = 3) -> TestSpec:
    """A spec of two partitions; the txn workload's unless ``client`` is java, which runs no
    txn workload (its transaction protocol is asked all the same)."""
    return dataclasses.replace(
        TestSpec(), topic=TopicSpec(name=TOPIC, partitions=2, replication_factor=replication_factor,
                                    min_insync_replicas=min(2, replication_factor)),
        kafka=KafkaSpec(version=version, transaction_version=transaction_version),
        consumer=ConsumerSpec(isolation_level=isolation),  # type: ignore[arg-type]
        workload=WorkloadSpec(name="txn" if client == "librdkafka" else "queue",
                              client=client))  # type: ignore[arg-type]


class H:
    """Appends ops with dense indexes and times 1 ms apart (and as far apart as :meth:`wait` says)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.waited = 0

    def op(self, process: Any, type: str, f: str, value: Any = None) -> None:
        self.rows.append(Op(len(self.rows), (len(self.rows) + 1) * MS + self.waited, process, type, f,
                            value).to_dict())

    def now(self) -> int:
        """The time of the next op."""
        return (len(self.rows) + 1) * MS + self.waited

    def wait(self, ns: int) -> None:
        self.waited += ns

    def begin(self, p: int, *sends: tuple[int, int], abort: bool = False) -> None:
        """A transaction's invoke: ``sends`` as (partition, value)."""
        self.op(p, "invoke", "txn", {"topic": TOPIC, "abort": abort,
                                     "sends": [{"partition": q, "value": v} for q, v in sends]})

    def end(self, p: int, outcome: str, *sends: tuple[int, int, int], abort: bool = False,
            committing: int | None = None) -> None:
        """Its completion: ``sends`` as (partition, value, offset), and ``committing`` where given."""
        self.op(p, outcome, "txn", {"topic": TOPIC, "abort": abort, "sends": [
            {"partition": q, "value": v, "offset": o} for q, v, o in sends],
            **({} if committing is None else {"committing": committing})})

    def txn(self, p: int, outcome: str, *sends: tuple[int, int, int], abort: bool = False) -> None:
        self.begin(p, *((q, v) for q, v, _ in sends), abort=abort)
        self.end(p, outcome, *sends, abort=abort)

    def poll(self, p: int, *records: tuple[int, int, int]) -> None:
        """A consumer's poll: ``records`` as (partition, offset, value)."""
        self.op(p, "invoke", "poll")
        self.op(p, "ok", "poll", {"records": [[TOPIC, q, o, v] for q, o, v in records]})

    def drain(self, p: int, partition: int, *records: tuple[int, int]) -> None:
        self.op(p, "invoke", "drain", {"topic": TOPIC, "partition": partition})
        self.op(p, "ok", "drain", {"topic": TOPIC, "partition": partition, "log_start_offset": 0,
                                   "high_watermark": 10, "records": [list(r) for r in records],
                                   "last": True})

    def fault(self, f: str, nodes: tuple[int, ...] = (1,), **completion: Any) -> None:
        """A nemesis action (a fault or a heal) on ``nodes``: its two ``info`` ops, the
        second with ``completion``'s fields too."""
        self.op("nemesis", "info", f, {"nodes": list(nodes)})
        self.op("nemesis", "info", f, {"nodes": list(nodes), "result": "done", **completion})


def verdict(h: H, s: TestSpec | None = None, protocol: int = 1,
            timeline: Timeline | None = None, logs: Mapping[int, PartitionLog] | None = None,
            stable: Mapping[int, tuple[int, int]] | None = None,
            offsets: tuple[int | None, frozenset[str] | None] = (None, None),
            offsets_isr: frozenset[int] | None = frozenset({1})) -> dict[str, Any]:
    """The txn checker's verdict; ``offsets``: the rpw group's __consumer_offsets partition
    and the nodes holding it (None: not known), which the metadata log gives that partition
    as its replicas (nodes 1 to 3 where not known), led by node 1, ``offsets_isr`` alone in
    its ISR from before any fault (None: every replica; min.insync.replicas=1 there)."""
    s = s or spec()
    partition, nodes = offsets
    replicas = frozenset(int(n) for n in nodes) if nodes else frozenset({1, 2, 3})
    states = [MetadataState(-10 * SECOND, 1, replicas, replicas),
              *([MetadataState(-SECOND, 1, offsets_isr, replicas)] if offsets_isr is not None else [])]
    config = GuaranteeConfig(acks="all", min_insync_replicas=1, replication_factor=len(replicas))
    return check_transactions(s, txn_history(s, h.rows), TransactionConfig(protocol=protocol),
                              timeline=timeline, logs=logs, stable=stable,
                              offsets=OffsetsPartition(partition, nodes, states, config)).to_json()


def committed_pair(h: H) -> None:
    """Transaction 0 commits values 1 (partition 0, offset 0) and 2 (partition 1, offset 0)."""
    h.txn(0, "ok", (0, 1, 0), (1, 2, 0))


def test_a_committed_transaction_read_whole_is_valid() -> None:
    h = H()
    committed_pair(h)
    h.poll(9, (0, 0, 1), (1, 0, 2))
    h.drain(10, 0, (0, 1))
    h.drain(11, 1, (0, 2))
    r = verdict(h)
    assert r["valid"] is True
    assert r["stats"]["txn"] == {"ok": 1, "fail": 0, "info": 0}


def test_a_read_committed_read_of_an_aborted_write_is_an_aborted_read() -> None:
    for outcome, abort, read, expected in (("fail", False, True, 1), ("fail", False, False, 0),
                                           ("info", True, True, 1), ("info", False, True, 0)):
        h = H()
        h.txn(0, outcome, (0, 1, 0), abort=abort)
        if read:
            h.poll(9, (0, 0, 1))
        h.drain(10, 0, *([(0, 1)] if read and not expected else []))  # a read commit is drained
        h.drain(11, 1)
        r = verdict(h)
        assert r["anomaly_counts"]["aborted-read"] == expected, (outcome, abort, read)
        assert r["valid"] is (expected == 0)


def test_read_uncommitted_reads_of_aborted_writes_leave_isolation_unchecked() -> None:
    """read_uncommitted readers may read aborted writes: no anomaly, but the isolation of
    transactions was not checked, so the verdict is unknown; with nothing such read it is true."""
    for read in (True, False):
        h = H()
        h.txn(0, "fail", (0, 1, 0))
        h.txn(1, "ok", (1, 2, 0))
        if read:
            h.poll(9, (0, 0, 1))
        h.drain(10, 0)
        h.drain(11, 1, (0, 2))
        r = verdict(h, spec(isolation="read_uncommitted"))
        assert r["anomaly_counts"]["aborted-read"] == 0
        assert r["valid"] == ("unknown" if read else True), read
        assert [u["kind"] for u in r["unknown"]] == (["isolation-unchecked"] if read else [])
        assert verdict(h)["anomaly_counts"]["aborted-read"] == (1 if read else 0)


def test_a_consumer_past_part_of_a_committed_transaction_tears_it() -> None:
    for later, expected in ((False, 0), (True, 1)):
        h = H()
        committed_pair(h)
        h.txn(1, "ok", (1, 3, 2))
        h.poll(9, (0, 0, 1))  # value 2 at partition 1, offset 0 unread ...
        if later:
            h.poll(9, (1, 2, 3))  # ... and passed
        h.drain(10, 0, (0, 1))
        h.drain(11, 1, (0, 2), (2, 3))
        r = verdict(h)
        assert r["anomaly_counts"][TORN] == expected, later
        if expected:
            assert r["violations"] == [TORN]
            assert r["anomalies"][TORN][0]["values"] == [2]


def test_a_drain_with_part_of_a_committed_transaction_tears_it_and_loses_the_rest() -> None:
    for drained, expected in (((0, 2),), 0), ((), 1):
        h = H()
        committed_pair(h)
        h.drain(10, 0, (0, 1))
        h.drain(11, 1, *drained)
        r = verdict(h)
        assert r["anomaly_counts"][TORN] == expected
        assert r["anomaly_counts"]["lost-write"] == expected
        assert r["valid"] is (expected == 0)


def test_an_incomplete_drain_decides_nothing_and_leaves_the_verdict_unknown() -> None:
    h = H()
    committed_pair(h)
    h.drain(10, 0, (0, 1))
    r = verdict(h)
    assert r["anomaly_counts"]["lost-write"] == 0
    assert r["valid"] == "unknown"
    assert [u["kind"] for u in r["unknown"]] == ["short-drain"]


def test_a_write_cycle_of_concurrent_transactions_is_permitted_and_of_sequential_ones_not() -> None:
    for concurrent in (True, False):
        h = H()
        if concurrent:  # both open at once
            h.begin(0, (0, 1), (1, 2))
            h.begin(1, (1, 3), (0, 4))
            h.end(0, "ok", (0, 1, 0), (1, 2, 1))
            h.end(1, "ok", (1, 3, 0), (0, 4, 1))
        else:  # the second began after the first committed, yet is first in partition 1
            h.txn(0, "ok", (0, 1, 0), (1, 2, 1))
            h.txn(1, "ok", (1, 3, 0), (0, 4, 1))
        h.drain(10, 0, (0, 1), (1, 4))
        h.drain(11, 1, (0, 3), (1, 2))
        r = verdict(h)
        assert r["anomaly_counts"][G0] == 1
        assert r["anomalies"][G0][0]["permitted"] is concurrent
        assert r["valid"] is concurrent
        # a type permitted says why, in the run's reasons too
        assert (G0 in r["permitted"]) is concurrent
        assert r["permitted_reasons"].get(G0) == (CONCURRENT_WRITE_CYCLE if concurrent else None)


@pytest.mark.parametrize("overlap", [True, False])
def test_a_write_cycle_goes_against_real_time_where_any_two_of_its_records_do(overlap: bool) -> None:
    """Found by review: only neighbouring records were compared. In partition 0, A's record
    comes before B's and B's before C's, and B runs throughout, so neither neighbour pair
    goes against real time; but C ended before A began, so A's record before C's says C's
    landed late (or took a lost record's offset), which no fault here permits. Partition 1
    closes the cycle (C before A)."""
    h = H()
    h.begin(0, (0, 10))  # B
    h.begin(1, (0, 30), (1, 31))  # C
    if overlap:
        h.begin(2, (0, 20), (1, 21))  # A
    h.end(1, "ok", (0, 30, 2), (1, 31, 0))
    if not overlap:
        h.begin(2, (0, 20), (1, 21))
    h.end(2, "ok", (0, 20, 0), (1, 21, 1))
    h.end(0, "ok", (0, 10, 1))
    h.drain(10, 0, (0, 20), (1, 10), (2, 30))
    h.drain(11, 1, (0, 31), (1, 21))
    r = verdict(h)
    (e,) = r["anomalies"][G0]
    assert len(e["txn_indexes"]) == 3
    assert e["permitted"] is overlap
    assert r["violations"] == ([] if overlap else [G0])


def test_no_cycle_where_two_transactions_keep_one_order_everywhere() -> None:
    h = H()
    h.txn(0, "ok", (0, 1, 0), (1, 2, 0))
    h.txn(1, "ok", (1, 3, 1), (0, 4, 1))
    h.drain(10, 0, (0, 1), (1, 4))
    h.drain(11, 1, (0, 2), (1, 3))
    assert verdict(h)["anomaly_counts"][G0] == 0


def test_protocol_version_1_under_a_delaying_fault_permits_what_version_2_forbids() -> None:
    h = H()
    h.fault("pause")
    committed_pair(h)
    h.drain(10, 0, (0, 1))
    h.drain(11, 1)
    v1 = verdict(h)
    assert v1["valid"] is True and "KAFKA-17754" in v1["permitted_reasons"]["lost-write"]
    v2 = verdict(h, protocol=2)
    assert v2["transaction_protocol"] == 2
    assert v2["violations"] == [TORN, "lost-write"]


def test_the_transaction_protocol_is_the_lower_of_the_cluster_and_the_client() -> None:
    assert TransactionConfig.from_spec(spec(client="java")).protocol == 2
    assert TransactionConfig.from_spec(spec(client="java", transaction_version=1)).protocol == 1
    assert TransactionConfig.from_spec(spec(client="java", version="3.9.1")).protocol == 1
    assert TransactionConfig.from_spec(spec()).protocol == 1


@pytest.mark.parametrize(("protocol", "families", "loss", "rewound", "permitted"), [
    (1, frozenset(), None, None, set()),
    (1, frozenset({"kill"}), None, None, set()),
    (1, frozenset({"pause"}), None, None, {"aborted-read", "precommitted-read", TORN, "lost-write", G0,
                                           "nonmonotonic-send", G1C, PROCESSED_TWICE}),
    (2, frozenset({"pause", "toxics"}), None, None, set()),
    # destroyed data permits a loss only where a partition's rule does, and processed-twice
    # only where the group's position may have gone back (rewound: the offsets partition's nodes)
    (2, frozenset({"wipe"}), None, None, set()),
    (2, frozenset(), "data was destroyed", None, {TORN, "lost-write", G0, "nonmonotonic-send", G1C}),
    # lost and taken again: a later transaction's record ahead (G0), a producer's later one (nonmonotonic)
    (2, frozenset(), None, "wipe destroyed data", {PROCESSED_TWICE}),
])
def test_transaction_rules(protocol: int, families: frozenset[str], loss: str | None,
                           rewound: str | None, permitted: set[str]) -> None:
    config = TransactionConfig(protocol=protocol)
    assert set(transaction_rules(config, families, loss, rewound)) == permitted
    assert set(transaction_forbidden(config, families, loss, rewound)).isdisjoint(permitted)


def test_a_txn_op_without_its_sends_is_refused_naming_its_line() -> None:
    h = H()
    h.op(0, "invoke", "txn", {"topic": TOPIC, "abort": False})
    with pytest.raises(HistoryError, match=r"history:1: .*lacks 'sends'"):
        txn_history(spec(), h.rows)


def test_the_cycle_search_finds_a_cycle_through_three_transactions_and_no_chain() -> None:
    for closed in (True, False):
        h = H()
        h.begin(0, (0, 1), *([(1, 5)] if closed else []))
        h.begin(1, (0, 2))
        h.begin(2, (0, 3), (1, 4))
        h.end(0, "ok", (0, 1, 0), *([(1, 5, 1)] if closed else []))
        h.end(1, "ok", (0, 2, 1))
        h.end(2, "ok", (0, 3, 2), (1, 4, 0))
        h.drain(10, 0, (0, 1), (1, 2), (2, 3))
        h.drain(11, 1, (0, 4), *([(1, 5)] if closed else []))
        r = verdict(h)
        assert r["anomaly_counts"][G0] == (1 if closed else 0), closed
        if closed:
            assert r["anomalies"][G0][0]["txn_indexes"] == [0, 1, 2]


def test_txn_lines_and_the_verdict_match_their_schemas() -> None:
    h = H()
    h.begin(0, (0, 1), (1, 2))
    h.begin(1, (1, 3), (0, 4))
    h.end(0, "ok", (0, 1, 0), (1, 2, 1))
    h.end(1, "fail", (1, 3, 0))
    h.poll(9, (0, 0, 1))
    h.drain(10, 0, (0, 1))
    history = validator("history.schema.json")
    for row in h.rows:
        history.validate(row)
    broken = {"topic": TOPIC, "abort": False, "sends": [{"value": 1}]}  # no partition
    assert not history.is_valid({**h.rows[0], "value": broken})
    validator("results.schema.json").validate(verdict(h))


def test_a_write_cycle_through_an_edge_in_real_time_order_is_permitted() -> None:
    """A before C in partition 0, and A ended before C began: that edge agrees with real
    time, and the cycle closes through B, concurrent with both (seen in a real run; the
    edge against real time is the sequential case above)."""
    h = H()
    h.begin(0, (0, 1))  # A
    h.begin(1, (0, 2), (1, 3))  # B
    h.end(0, "ok", (0, 1, 1))
    h.txn(2, "ok", (0, 4, 2), (1, 5, 0))  # C, after A
    h.end(1, "ok", (0, 2, 0), (1, 3, 1))
    h.drain(10, 0, (0, 2), (1, 1), (2, 4))
    h.drain(11, 1, (0, 5), (1, 3))
    r = verdict(h)
    assert r["anomalies"][G0][0]["txn_indexes"] == [0, 1, 3]
    assert r["valid"] is True


def lost_second(h: H) -> None:
    """Drains in which value 2 of :func:`committed_pair` is missing: torn and lost."""
    h.drain(10, 0, (0, 1))
    h.drain(11, 1)


def test_a_delaying_fault_excuses_only_a_transaction_whose_span_it_overlaps() -> None:
    """A pause held while the transaction ran may have let a request land late
    (KAFKA-17754); one begun and healed after it ended could not."""
    for during in (True, False):
        h = H()
        if during:
            h.fault("pause")
        committed_pair(h)
        if not during:
            h.fault("pause")
        h.fault("resume")
        lost_second(h)
        r = verdict(h)
        assert r["anomalies"]["lost-write"][0]["permitted"] is during, during
        assert r["valid"] is during


def test_a_delaying_fault_in_the_producers_previous_transaction_excuses_it() -> None:
    """A request of the producer's previous transaction, held by a pause, may land in the
    next one; a pause during another producer's transaction excuses nothing, unless that
    producer was retired (``info``), which the first transaction of a process may follow."""
    for process, outcome, permitted in ((0, "ok", True), (1, "ok", False), (1, "info", True)):
        h = H()
        h.begin(process, (0, 5))
        h.fault("pause")
        h.end(process, outcome, (0, 5, 2))
        h.fault("resume")
        committed_pair(h)
        h.drain(10, 0, (0, 1), (2, 5))
        h.drain(11, 1)
        r = verdict(h)
        assert r["anomalies"]["lost-write"][0]["permitted"] is permitted, (process, outcome)
        assert r["valid"] is permitted


def test_a_poll_that_ended_before_its_transaction_asked_to_commit_is_a_precommitted_read() -> None:
    """The same poll of transaction 0's record, ended before or after the workload asked
    to commit it; and before, under version 1 with a pause over the transaction (a late
    commit of the producer's previous one may have committed it early: permitted)."""
    for poll_first, paused, expected in ((True, False, False), (False, False, True), (True, True, True)):
        h = H()
        h.wait(SECOND)
        h.begin(0, (0, 1), (1, 2))
        if paused:
            h.fault("pause")
        ended = h.now() + MS  # the poll's end
        committing = ended + (MS // 2 if poll_first else -MS // 2)
        h.poll(9, (0, 0, 1))
        if paused:
            h.fault("resume")
        h.end(0, "ok", (0, 1, 0), (1, 2, 0), committing=committing)
        h.drain(10, 0, (0, 1))
        h.drain(11, 1, (0, 2))
        r = verdict(h)
        assert r["anomaly_counts"]["precommitted-read"] == poll_first, (poll_first, paused)
        assert r["valid"] is expected, (poll_first, paused)
        if poll_first:
            (e,) = r["anomalies"]["precommitted-read"]
            assert (e["value"], e["process"], e["committing"], e["permitted"]) == (1, 9, committing, paused)


def test_a_read_of_an_info_transaction_that_never_asked_to_commit_is_a_precommitted_read() -> None:
    """Transaction 1 ended info and a consumer and the drain read its record: with
    ``committing`` in its completion (asked before the reads), that proves its commit;
    without it, in a history that records the field (transaction 0's), nothing asked to
    commit it. In a history without the field anywhere, not judged."""
    for asked, recorded, expected in ((True, True, 0), (False, True, 2), (False, False, 0)):
        h = H()
        h.begin(0, (0, 1))
        h.end(0, "ok", (0, 1, 0), committing=h.now() - MS // 2 if recorded else None)
        h.begin(1, (1, 2))
        h.end(1, "info", (1, 2, 0), committing=h.now() - MS // 2 if asked else None)
        h.poll(9, (1, 0, 2))
        h.drain(10, 0, (0, 1))
        h.drain(11, 1, (0, 2))
        r = verdict(h)
        assert r["anomaly_counts"]["precommitted-read"] == expected, (asked, recorded)
        assert r["valid"] is (expected == 0), (asked, recorded)
        if expected:
            assert [e["process"] for e in r["anomalies"]["precommitted-read"]] == [9, None]


def test_a_producers_records_out_of_the_order_it_sent_them_are_nonmonotonic_sends() -> None:
    """Within a transaction, and from one of a producer's transactions to its next, the
    offsets of one partition's records must follow the sends; another producer's may
    interleave."""
    for first, second, reordered in ((3, 5, False), (5, 3, True)):
        h = H()
        h.txn(0, "ok", (0, 1, first), (0, 2, second))
        h.drain(10, 0, *sorted([(first, 1), (second, 2)]))
        h.drain(11, 1)
        r = verdict(h)
        assert r["anomaly_counts"]["nonmonotonic-send"] == reordered
        assert r["valid"] is (not reordered)
    for later, reordered in ((6, False), (2, True)):
        h = H()
        h.txn(0, "ok", (0, 1, 4))
        h.txn(1, "ok", (0, 3, 0 if reordered else 5))  # another producer: no order between them
        h.txn(0, "fail", (0, 2, later), abort=True)
        h.drain(10, 0, *sorted([(4, 1), (0 if reordered else 5, 3)]))
        h.drain(11, 1)
        r = verdict(h)
        assert r["anomaly_counts"]["nonmonotonic-send"] == reordered, later
        assert r["valid"] is (not reordered), r["unknown"]
        if reordered:
            (e,) = r["anomalies"]["nonmonotonic-send"]
            assert (e["values"], e["offsets"], e["txn_indexes"]) == ([1, 2], [4, 2], [0, 4])
            assert e["permitted"] is False
            assert "in the order it sent them" in r["forbidden_reasons"]["nonmonotonic-send"]


def test_a_loss_on_the_partition_permits_a_later_record_at_an_earlier_offset() -> None:
    """Partition 1's only replica wiped after the first transaction: its record may be lost
    and its offset taken by the producer's next one; a wipe of partition 0's replica
    permits nothing there."""
    for node, permitted in ((2, True), (1, False)):
        h = H()
        h.wait(SECOND)
        h.txn(0, "ok", (1, 1, 4))
        h.fault("wipe", (node,))
        h.fault("start", (node,))
        h.txn(0, "ok", (1, 2, 0))
        h.drain(10, 0)
        h.drain(11, 1, (0, 2))
        r = verdict(h, spec(replication_factor=1), protocol=2, timeline=lone_replicas())
        assert r["anomalies"]["nonmonotonic-send"][0]["permitted"] is permitted, node


SECOND = 1_000_000_000


def lone_replicas(whole_again: int | None = None) -> Timeline:
    """A metadata log of :func:`spec`'s two partitions at replication factor 1: partition p's
    one replica is node p + 1, leading from time 0; ``whole_again``: a later state of partition
    1 at that time, its replica in the ISR again."""
    return {(TOPIC, p): [MetadataState(0, p + 1, frozenset({p + 1}), frozenset({p + 1})),
                         *([MetadataState(whole_again, p + 1, frozenset({p + 1}), frozenset({p + 1}))]
                           if whole_again is not None and p == 1 else [])]
            for p in (0, 1)}


def test_destroyed_data_excuses_a_loss_only_of_a_write_before_its_partition_was_whole_again() -> None:
    """Partition 1's only replica (node 2) wiped: a loss there is permitted of a transaction
    begun before the wipe, not of one begun once the metadata log showed the partition whole
    again after it."""
    for after, permitted in ((False, False), (True, True)):
        h = H()
        h.wait(SECOND)
        whole_again = None
        if not after:
            h.fault("wipe", (2,))
            h.fault("start", (2,))
            whole_again = h.now() + SECOND
            h.wait(3 * SECOND)
        committed_pair(h)
        if after:
            h.fault("wipe", (2,))
            h.fault("start", (2,))
        lost_second(h)
        r = verdict(h, spec(replication_factor=1), protocol=2, timeline=lone_replicas(whole_again))
        assert r["anomalies"]["lost-write"][0]["permitted"] is permitted, after
        assert r["valid"] is permitted, r["unknown"]


def test_destroyed_data_excuses_a_loss_only_on_a_partition_whose_replica_it_destroyed() -> None:
    """A wipe during the transaction of node 2, partition 1's only replica, permits losing
    the transaction's record there; of node 1, partition 0's, it permits nothing on
    partition 1, nor the tear the loss makes."""
    for node, permitted in ((2, True), (1, False)):
        h = H()
        h.wait(SECOND)
        h.begin(0, (0, 1), (1, 2))
        h.fault("wipe", (node,))
        h.fault("start", (node,))
        h.end(0, "ok", (0, 1, 0), (1, 2, 0))
        lost_second(h)
        r = verdict(h, spec(replication_factor=1), protocol=2, timeline=lone_replicas())
        assert r["anomalies"]["lost-write"][0]["permitted"] is permitted, node
        assert r["anomalies"][TORN][0]["permitted"] is permitted, node
        assert r["valid"] is permitted, r["unknown"]
        assert r["permitted_reasons"]["lost-write"].startswith(
            f"committed records may be lost (on partition(s) {node - 1}, "), "the run's: the wiped one's"


def test_destroyed_data_no_witness_shows_leaves_the_loss_it_permits_unknown() -> None:
    """Without a metadata log, or a leaders snapshot, a wipe of partition 1's replica during
    the transaction permits the loss only by faults assumed (that node may have led): the
    verdict is unknown, saying where; the same wipe before the transaction began, healed,
    leaves it unknown too (the log would say whether the partition was whole again)."""
    for during in (True, False):
        h = H()
        if not during:
            h.fault("wipe", (2,))
            h.fault("start", (2,))
        h.begin(0, (0, 1), (1, 2))
        if during:
            h.fault("wipe", (2,))
            h.fault("start", (2,))
        h.end(0, "ok", (0, 1, 0), (1, 2, 0))
        lost_second(h)
        r = verdict(h, spec(replication_factor=1), protocol=2)
        assert r["anomalies"]["lost-write"][0]["permitted"] is True, during
        assert r["valid"] == "unknown"
        assert [(u["kind"], u.get("partition"), u.get("anomalies")) for u in r["unknown"]] == [
            ("permitted-on-assumption", 1, ["lost-write", TORN])]


def test_a_commit_acknowledged_after_the_drain_began_is_not_known_lost() -> None:
    """The reviewer's history: the transaction's commit came after both drains had
    begun, so what they did not read may be past them (after-drain), not lost or torn."""
    for late in (False, True):
        h = H()
        h.begin(0, (0, 1), (1, 2))
        if not late:
            h.end(0, "ok", (0, 1, 0), (1, 2, 0))
        lost_second(h)
        if late:
            h.end(0, "ok", (0, 1, 0), (1, 2, 0))
        r = verdict(h, protocol=2)
        assert r["anomaly_counts"]["lost-write"] == r["anomaly_counts"][TORN] == (0 if late else 1)
        assert r["valid"] == ("unknown" if late else False), late
        assert [(u["kind"], u["count"]) for u in r["unknown"]] == ([("after-drain", 1)] if late else [])


def test_a_record_at_or_above_the_drains_high_watermark_is_not_known_lost() -> None:
    for offset, expected in ((9, False), (10, "unknown")):  # H.drain reads to high watermark 10
        h = H()
        h.txn(0, "ok", (0, 1, 0), (1, 2, offset))
        lost_second(h)
        assert verdict(h, protocol=2)["valid"] == expected, offset


def test_an_info_transaction_a_read_committed_reader_read_is_committed() -> None:
    """The read proves the commit: its record the drain lacks is lost, and it is torn."""
    for read in (True, False):
        h = H()
        h.txn(0, "info", (0, 1, 0), (1, 2, 0))
        if read:
            h.poll(9, (0, 0, 1))
        h.drain(10, 0, *([(0, 1)] if read else []))
        h.drain(11, 1)
        r = verdict(h, protocol=2)
        assert r["anomaly_counts"]["lost-write"] == (1 if read else 0), read
        assert r["valid"] is not read


def test_a_delaying_fault_excuses_an_aborted_read_until_the_producers_next_transaction_ends() -> None:
    """An aborted transaction's held request may land in its producer's next transaction,
    not after that one ended."""
    for during in (True, False):
        h = H()
        h.txn(0, "fail", (0, 1, 0))
        if during:
            h.fault("pause")
            h.fault("resume")
        h.txn(0, "ok", (1, 2, 0))
        if not during:
            h.fault("pause")
            h.fault("resume")
        h.drain(10, 0, (0, 1))
        h.drain(11, 1, (0, 2))
        r = verdict(h)
        assert r["anomalies"]["aborted-read"][0]["permitted"] is during, during
        assert r["valid"] is during


def test_a_fault_window_ends_when_every_node_it_faulted_is_healed() -> None:
    """Pauses of nodes 1 and 2; a resume of node 1 alone leaves node 2's open over the
    transaction, a resume of both ends them before it."""
    for healed, permitted in (((1,), True), ((1, 2), False)):
        h = H()
        h.fault("pause", (1,))
        h.fault("pause", (2,))
        h.fault("resume", healed)
        committed_pair(h)
        lost_second(h)
        assert verdict(h)["anomalies"]["lost-write"][0]["permitted"] is permitted, healed


# -- the fault-window rule, pinned: each pair differs in where one fault lies ---------------


def torn_by_consumer(h: H) -> None:
    """A consumer tears :func:`committed_pair` (it reads value 1, then passes value 2 for
    value 3 of a later transaction), and the drains read everything: a tear, no loss."""
    h.txn(1, "ok", (1, 3, 2))
    h.poll(9, (0, 0, 1))
    h.poll(9, (1, 2, 3))
    h.drain(10, 0, (0, 1))
    h.drain(11, 1, (0, 2), (2, 3))


def begin_paused(h: H, during: bool) -> None:
    """The invoke of :func:`committed_pair`'s transaction, with a pause and its resume
    before it or (``during``) after it."""
    if not during:
        h.fault("pause")
        h.fault("resume")
    h.begin(0, (0, 1), (1, 2))
    if during:
        h.fault("pause")
        h.fault("resume")


def test_a_pause_healed_before_a_transaction_began_excuses_no_tear_of_it() -> None:
    """Judged on a tear alone (no loss beside it): a pause during the transaction may have
    held a request of it (KAFKA-17754), one healed before it began could not."""
    for during in (True, False):
        h = H()
        begin_paused(h, during)
        h.end(0, "ok", (0, 1, 0), (1, 2, 0))
        torn_by_consumer(h)
        r = verdict(h)
        assert r["anomaly_counts"] == {**r["anomaly_counts"], TORN: 1, "lost-write": 0}
        assert r["anomalies"][TORN][0]["permitted"] is during, during
        assert r["valid"] is during


def test_a_pause_healed_before_the_late_transaction_began_excuses_no_write_cycle() -> None:
    """The sequential write cycle: the first transaction's record in partition 1 landed
    after the second's, although it ended before the second began. A pause from its invoke
    on may have held that record; one healed before it began could not."""
    for during in (True, False):
        h = H()
        begin_paused(h, during)
        h.end(0, "ok", (0, 1, 0), (1, 2, 1))
        h.txn(1, "ok", (1, 3, 0), (0, 4, 1))
        h.drain(10, 0, (0, 1), (1, 4))
        h.drain(11, 1, (0, 3), (1, 2))
        r = verdict(h)
        assert r["anomalies"][G0][0]["permitted"] is during, during
        assert r["valid"] is during


def test_a_heal_before_a_fault_does_not_end_it() -> None:
    """A resume journaled before the pause leaves the pause in effect over the transaction;
    the same resume after it ends it first."""
    for heal_first, permitted in ((True, True), (False, False)):
        h = H()
        if heal_first:
            h.fault("resume")
        h.fault("pause")
        if not heal_first:
            h.fault("resume")
        committed_pair(h)
        lost_second(h)
        assert verdict(h)["anomalies"]["lost-write"][0]["permitted"] is permitted, heal_first


def test_only_a_faults_own_heal_ends_it() -> None:
    """A pause is ended by a resume, not by a start (a kill's heal): after a start it is
    still in effect over the transaction."""
    for heal, permitted in (("start", True), ("resume", False)):
        h = H()
        h.fault("pause")
        h.fault(heal)
        committed_pair(h)
        lost_second(h)
        assert verdict(h)["anomalies"]["lost-write"][0]["permitted"] is permitted, heal


def test_a_retired_transaction_still_open_when_a_process_began_is_not_its_predecessor() -> None:
    """A first transaction may follow a retired (``info``) one of another process only if
    that one had ended before it began: a pause over the retired one alone excuses the
    later transaction's loss only then."""
    for retired_first, permitted in ((True, True), (False, False)):
        h = H()
        h.begin(1, (0, 5))
        h.fault("pause")
        h.fault("resume")
        if retired_first:
            h.end(1, "info", (0, 5, 2))
        h.begin(0, (0, 1), (1, 2))
        if not retired_first:
            h.end(1, "info", (0, 5, 2))
        h.end(0, "ok", (0, 1, 0), (1, 2, 0))
        lost_second(h)
        r = verdict(h)
        assert r["anomalies"]["lost-write"][0]["permitted"] is permitted, retired_first
        assert r["valid"] is permitted


# -- against the replicas' logs (replicas.jsonl's batch kinds) ---------------------------------


def replica_logs(*partitions: list[tuple[int, int, str]]) -> dict[int, PartitionLog]:
    """The logs of partitions 0, 1, ...: each a list of batches (offset, producer id, kind)."""
    return partition_logs([
        {"topic": TOPIC, "partition": p, "node": 1, "log_start_offset": 0,
         "log_end_offset": batches[-1][0] + 1, "hw_checkpoint": None,
         "batches": [[o, o, 0, 1, pid, 0, 0, 0, kind] for o, pid, kind in batches]}
        for p, batches in enumerate(partitions)], TOPIC, 1)


def test_a_transaction_the_log_left_open_leaves_the_verdict_unknown() -> None:
    """The committed pair's records, with a commit marker after each (valid), or with none
    after partition 1's: the log left that transaction open after the heal."""
    for marked in (True, False):
        h = H()
        committed_pair(h)
        h.drain(10, 0, (0, 1))
        h.drain(11, 1, (0, 2))
        r = verdict(h, logs=replica_logs([(0, 7, "txn"), (1, 7, "commit")],
                                 [(0, 7, "txn"), *([(1, 7, "commit")] if marked else [])]))
        assert r["valid"] is (True if marked else "unknown"), marked
        assert [(u["kind"], u.get("partition"), u.get("count")) for u in r["unknown"]] == (
            [] if marked else [("open-transaction", 1, 1)])


def unknown_kinds(r: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [(u["kind"], u["partition"]) for u in r["unknown"]]


def test_the_brokers_last_stable_offset_must_agree_with_the_log() -> None:
    """The same run, its log closing every transaction, with partition 1's last stable
    offset answered at its HW (valid) or below it (the brokers' own records disagree:
    unknown); and with the log leaving it open, an LSO at the HW disagrees too."""
    h = H()
    committed_pair(h)
    h.drain(10, 0, (0, 1))
    h.drain(11, 1, (0, 2))
    closed = replica_logs([(0, 7, "txn"), (1, 7, "commit")], [(0, 7, "txn"), (1, 7, "commit")])
    opened = replica_logs([(0, 7, "txn"), (1, 7, "commit")], [(0, 7, "txn"), (1, 8, "txn")])
    assert verdict(h, logs=closed, stable={0: (2, 2), 1: (2, 2)})["valid"] is True
    r = verdict(h, logs=closed, stable={0: (2, 2), 1: (0, 2)})
    assert (r["valid"], unknown_kinds(r)) == ("unknown", [("lso-disagrees", 1)])
    r = verdict(h, logs=opened, stable={1: (2, 2)})
    assert unknown_kinds(r) == [("open-transaction", 1), ("lso-disagrees", 1)]
    assert unknown_kinds(verdict(h, logs=opened, stable={1: (0, 2)})) == [("open-transaction", 1)]


def test_without_a_log_an_lso_below_the_hw_is_a_transaction_left_open() -> None:
    h = H()
    committed_pair(h)
    h.drain(10, 0, (0, 1))
    h.drain(11, 1, (0, 2))
    assert verdict(h, stable={1: (2, 2)})["valid"] is True
    r = verdict(h, stable={1: (1, 2)})
    assert (r["valid"], unknown_kinds(r)) == ("unknown", [("open-transaction", 1)])


def test_the_last_stable_offsets_are_the_observers_last_answers() -> None:
    """Its last line of each partition, and none where that line lacks an answer (an
    earlier one may be stale)."""
    def line(p: int, hw: int | None, lso: int | None, topic: str = TOPIC) -> dict[str, Any]:
        return {"topic": topic, "partition": p, "hw": hw, "lso": lso}
    lines = [line(0, 5, 3), line(1, 5, 5), line(0, 9, 9), line(1, 9, None), line(2, 4, 4, "other")]
    assert final_stable_offsets(lines, TOPIC) == {0: (9, 9)}
    assert final_stable_offsets([{"topic": TOPIC, "partition": 0, "hw": 3}], TOPIC) == {}


def test_an_aborted_read_says_how_the_log_ended_its_transaction() -> None:
    """A read_committed read of an aborted transaction's record: the log's abort marker
    shows the broker served an aborted record; a commit marker, that the transaction
    committed although its abort was acknowledged."""
    for marker in ("abort", "commit"):
        h = H()
        h.txn(0, "fail", (0, 1, 0))
        h.poll(9, (0, 0, 1))
        h.drain(10, 0)
        h.drain(11, 1)
        r = verdict(h, logs=replica_logs([(0, 7, "txn"), (1, 7, marker)]))
        assert r["anomalies"]["aborted-read"][0]["log_marker"] == marker
        assert "log_marker" not in verdict(h)["anomalies"]["aborted-read"][0]


def test_a_torn_transaction_says_how_the_log_ended_each_of_its_records() -> None:
    h = H()
    committed_pair(h)
    lost_second(h)
    r = verdict(h, protocol=2, logs=replica_logs([(0, 7, "txn"), (1, 7, "commit")],
                                                 [(0, 7, "txn"), (1, 7, "abort")]))
    assert r["anomalies"][TORN][0]["log_markers"] == [[0, 0, "commit"], [1, 0, "abort"]]
    assert "log_markers" not in verdict(h, protocol=2)["anomalies"][TORN][0]
    validator("results.schema.json").validate(r)
