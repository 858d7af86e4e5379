"""The consumer-group anomalies (faultline/checkers/groups.py): for each, two histories that
differ in one fact and get different verdicts; and the group checker composed after the
queue checker on a stored run of the group workload."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from faultline.analysis.sweepdir import Cell
from faultline.analysis.tables import anomaly_rows
from faultline.checkers import groups
from faultline.checkers.faults_seen import MetadataState, Timeline
from faultline.checkers.group_end import CommitLogs
from faultline.checkers.group_history import Group, group
from faultline.checkers.guarantees import (
    OVERLAP_AFTER_FENCED,
    OVERLAP_AFTER_LOST,
    OVERLAP_AFTER_PAUSE,
    GuaranteeConfig,
)
from faultline.checkers.result import MAX_ANOMALY_EXAMPLES
from faultline.checkers.results_file import check_run
from faultline.checkers.stored import check_stored
from faultline.checkers.table import Send, SendTable
from faultline.commands.check import summary
from faultline.report.page import anomaly_sections, expectations, load_run, verdict
from faultline.spec import ConsumerSpec, ProducerSpec, TestSpec, TopicSpec, WorkloadSpec
from tests.schemas import validator

TOPIC = "fl-queue"
S = 10**9  # one second, in ns


class G:
    """A group history, op by op; ``t`` moves on 1 ms per op unless set."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.t = 0

    def op(self, process: int | str, type: str, f: str, value: Any, error: str | None = None) -> None:
        self.t += 1_000_000
        op = {"index": len(self.ops), "time": self.t, "process": process, "type": type, "f": f,
              "value": value}
        if error is not None:
            op["error"] = error
        self.ops.append(op)

    def at(self, seconds: float) -> G:
        self.t = max(self.t, int(seconds * S))
        return self

    def send(self, process: int, value: int, partition: int, offset: int) -> None:
        v = {"topic": TOPIC, "partition": partition, "value": value}
        self.op(process, "invoke", "send", v)
        self.op(process, "ok", "send", {**v, "offset": offset})

    def poll(self, process: int, records: list[tuple[int, int, int]]) -> None:
        self.op(process, "invoke", "poll", None)
        self.op(process, "ok", "poll", {"records": [[TOPIC, p, off, v] for p, off, v in records]})

    def commit(self, process: int, offsets: list[tuple[int, int]], outcome: str = "ok") -> None:
        v = {"offsets": [[TOPIC, p, off, 0] for p, off in offsets]}
        self.op(process, "invoke", "commit", v)
        self.op(process, outcome, "commit", v)

    def rebalance(self, process: int, kind: str, partitions: list[int], generation: int = 1) -> None:
        v = {"partitions": [[TOPIC, p] for p in partitions], "member": f"m{process}",
             "generation": generation}
        self.op(process, "invoke", kind, v)
        self.op(process, "ok", kind, v)

    def fault(self, f: str) -> None:
        self.op("nemesis", "info", f, {"nodes": [1]})

    def kill(self, f: str = "kill", at: float | None = None, truncated: dict[str, Any] | None = None) -> None:
        """A node fault on node 1, partition 0's leader, begun and completed (at ``at`` s),
        its completion with lose-unflushed's ``truncated`` where given."""
        if at is not None:
            self.at(at)
        self.op("nemesis", "info", f, {"nodes": [1], "leaders": {f"{TOPIC}/0": 1}})
        self.op("nemesis", "info", f, {"nodes": [1], "leaders": {f"{TOPIC}/0": 1},
                                       **({} if truncated is None else {"truncated": truncated})})

    def drain(self, partition: int, records: list[tuple[int, int]]) -> None:
        v = {"topic": TOPIC, "partition": partition}
        self.op(99, "invoke", "drain", v)
        self.op(99, "ok", "drain", {**v, "records": [list(r) for r in records], "log_start_offset": 0,
                                    "high_watermark": len(records), "last": True})

    def group(self, partitions: int = 1) -> Group:
        return group(self.ops, TOPIC, partitions)


def sends(h: G) -> SendTable:
    """``h``'s sends, each invoke with the next completion of its process."""
    found: list[Send] = []
    open_: dict[Any, dict[str, Any]] = {}
    for op in h.ops:
        if op["f"] != "send":
            continue
        if op["type"] == "invoke":
            open_[op["process"]] = op
            continue
        first = open_.pop(op["process"])
        v = op["value"]
        found.append(Send(op["process"], v["value"], v["topic"], v["partition"], first["time"], op["time"],
                          op["type"], v.get("offset")))
    return SendTable.of(found)


def offsets_log(*isr: int, replicas: int = 1) -> list[MetadataState]:
    """The metadata log's states of the group's __consumer_offsets partition, on nodes 1 to
    ``replicas``, led by node 1 from before any fault: all in the ISR, then ``isr`` alone
    (from 1 s before the run's start) where given."""
    every = frozenset(range(1, replicas + 1))
    return [MetadataState(-10 * S, 1, every, every),
            *([MetadataState(-S, 1, frozenset(isr), every)] if isr else [])]


#: The group's offsets partition with one replica, node 1: data destroyed there loses commits.
ONE_REPLICA = GuaranteeConfig(acks="all", min_insync_replicas=1, replication_factor=1)


def judged(h: G, partitions: int = 1, acks: str = "all", asynchronous: bool = False,
           end: dict[int, int] | str | None = None, static: bool = False,
           offsets: frozenset[str] | None = frozenset({"1"}), timeline: Timeline | None = None,
           commits: CommitLogs | None = None, offsets_partition: int | None = None,
           offsets_states: list[MetadataState] | None = None,
           offsets_config: GuaranteeConfig = ONE_REPLICA) -> dict[str, Any]:
    """The group checker's verdict on ``h``; ``end``: the coordinator's committed offsets
    after the drain (None: each partition's last ok commit, as a coordinator that lost none);
    ``offsets``: the nodes holding the group's __consumer_offsets partition (node 1, which
    :meth:`G.kill` hits; None: not known); ``timeline``: the metadata log's; ``commits``:
    the commit records in those replicas' logs; ``offsets_partition``: which partition of
    __consumer_offsets that is (None: not known); ``offsets_states``: its states in the
    metadata log (default: :func:`offsets_log` of its replicas) and ``offsets_config`` its
    guarantees (default: one replica)."""
    if offsets_states is None:
        offsets_states = offsets_log(replicas=offsets_config.replication_factor)
    config = GuaranteeConfig(acks=acks, enable_idempotence=acks == "all")  # type: ignore[arg-type]
    g = h.group(partitions)
    if end is None:
        end = {p: c.offset for p in range(partitions) if (c := groups.last_committed(g, p)) is not None}
    windows = groups.FaultWindows(g.actions, TOPIC, timeline, groups.OffsetsPartition(
        offsets_partition, offsets, offsets_states, offsets_config))
    result = groups.judge(g, config, windows, asynchronous, end=end, static=static, sends=sends(h),
                          commits=commits)
    out: dict[str, Any] = {**result.to_json(), **result.extra["group"]}
    assert out["valid"] == result.valid
    out["unknown"] = [u["kind"] for u in result.unknown if u["affects_verdict"]]
    return out


def five(h: G, process: int = 1, skip: int | None = None) -> None:
    """``process`` assigned partition 0, polling offsets 0 to 4 (but ``skip``)."""
    h.rebalance(process, "assign", [0])
    h.poll(process, [(0, off, 100 + off) for off in range(5) if off != skip])


# -- commit-backwards ------------------------------------------------------------------------


def backwards(second: int, fault_at: float | None = None, fault: str = "kill",
              truncated: dict[str, Any] | None = None) -> G:
    """Process 1 commits 5, then process 2, which took over at 5, commits ``second``; a
    ``fault`` of partition 0's leader between the two (``fault_at`` 0) or after both, at
    ``fault_at`` s (its ``truncated``, :meth:`G.kill`)."""
    h = G()
    five(h)
    h.commit(1, [(0, 5)])
    if fault_at == 0:
        h.kill(fault, truncated=truncated)
    h.rebalance(1, "revoke", [0])
    h.rebalance(2, "assign", [0])
    h.poll(2, [(0, off, 100 + off) for off in range(5, 5 + second)])
    h.commit(2, [(0, second)])
    if fault_at:
        h.kill(fault, at=fault_at, truncated=truncated)
    return h


def test_a_commit_below_an_earlier_ended_commit_goes_backwards() -> None:
    assert judged(backwards(5))["anomaly_counts"]["commit-backwards"] == 0
    out = judged(backwards(3))
    assert out["violations"] == ["commit-backwards"]
    (ex,) = out["anomalies"]["commit-backwards"]
    assert (ex["offset"], ex["earlier_offset"], ex["process"], ex["earlier_process"]) == (3, 5, 2, 1)


def test_a_truncation_permits_a_commit_backwards_with_acks_1() -> None:
    """acks=1 with the leader faulted: acknowledged writes may go, and with them the
    committed position (KAFKA-19902)."""
    assert judged(backwards(3, fault_at=0), acks="1")["permitted"] == ["commit-backwards"]
    assert judged(backwards(3, fault_at=0), acks="all")["violations"] == ["commit-backwards"]


def test_a_commit_while_a_higher_one_was_in_flight_is_not_backwards() -> None:
    h = G()
    five(h)
    h.op(1, "invoke", "commit", {"offsets": [[TOPIC, 0, 5, 0]]})
    h.rebalance(2, "assign", [0])  # (overlapping too: not this test's point)
    h.op(2, "invoke", "commit", {"offsets": [[TOPIC, 0, 0, 0]]})
    h.op(1, "ok", "commit", {"offsets": [[TOPIC, 0, 5, 0]]})
    h.op(2, "ok", "commit", {"offsets": [[TOPIC, 0, 0, 0]]})
    assert groups.commits_backwards(h.group()) == ([], [])


def test_only_a_fault_between_the_two_commits_permits_a_commit_backwards() -> None:
    """KAFKA-19902's truncation must come after the higher commit and before the lower one's
    invoke: a leader fault long after both (at 100 s) excuses nothing."""
    assert judged(backwards(3, fault_at=0), acks="1")["permitted"] == ["commit-backwards"]
    assert judged(backwards(3, fault_at=100), acks="1")["violations"] == ["commit-backwards"]


def test_a_data_destroying_fault_between_the_commits_permits_a_commit_backwards() -> None:
    """__consumer_offsets has min.insync.replicas=1: a lose-unflushed after the higher commit
    may have lost it, whatever the test topic (acks=all) forbids; one after the lower commit
    could not have."""
    out = judged(backwards(3, fault_at=0, fault="lose-unflushed"))
    assert out["valid"] is True and "__consumer_offsets" in out["permitted_reasons"]["commit-backwards"]
    assert judged(backwards(3, fault_at=100, fault="lose-unflushed"))["violations"] == ["commit-backwards"]


def late_async(polled_at: float) -> G:
    """Process 1 polls offset 99 at ``polled_at`` s; process 2 polls 100 to 120 at 2 s and
    commits 121 (3 to 4 s); process 1's async commit of 100 is journaled at 5 s."""
    h = G()
    for at, step in sorted([(polled_at, lambda: h.poll(1, [(0, 99, 5)])),
                            (2, lambda: h.poll(2, [(0, 100, 6), (0, 120, 7)])),
                            (3, lambda: h.commit(2, [(0, 121)])),
                            (5, lambda: h.commit(1, [(0, 100)]))], key=lambda s: s[0]):
        h.at(at)
        step()
    return h


def test_an_async_commit_is_judged_from_the_poll_that_gave_its_record() -> None:
    """An async or auto commit's journaled invoke is only an upper bound on its request: it
    goes back only where the poll that gave it its record began after the higher commit ended."""
    assert judged(late_async(1), asynchronous=True)["anomaly_counts"]["commit-backwards"] == 0
    assert judged(late_async(4.5), asynchronous=True)["violations"] == ["commit-backwards"]
    assert judged(late_async(1))["violations"] == ["commit-backwards"]  # sync: invoke is the request


def test_an_async_commit_without_the_poll_of_its_record_is_unknown() -> None:
    assert judged(late_async(1), asynchronous=True)["valid"] is True
    h = late_async(1)
    h.ops[1]["value"]["records"] = [[TOPIC, 0, 98, 5], [TOPIC, 0, 101, 8]]  # not 99
    out = judged(h, asynchronous=True)
    assert out["valid"] == "unknown" and out["unknown"] == ["commit-request-unknown"]


# -- commit-beyond-polled ----------------------------------------------------------------------


def test_a_commit_past_what_its_member_polled_is_beyond() -> None:
    for offset, count in ((5, 0), (6, 1)):
        h = G()
        five(h)
        h.commit(1, [(0, offset)])
        assert judged(h)["anomaly_counts"]["commit-beyond-polled"] == count


def test_what_another_member_polled_does_not_count() -> None:
    for poller, count in ((1, 0), (2, 1)):
        h = G()
        h.rebalance(1, "assign", [0])
        h.poll(poller, [(0, 0, 100)])
        h.commit(1, [(0, 1)])
        assert judged(h)["anomaly_counts"]["commit-beyond-polled"] == count


# -- overlapping-owners --------------------------------------------------------------------------


def handover(second_assigned_before_revoke: bool, how: str = "revoke") -> G:
    h = G()
    h.rebalance(1, "assign", [0])
    h.poll(1, [(0, 0, 100)])
    h.commit(1, [(0, 1)])
    if second_assigned_before_revoke:
        h.rebalance(2, "assign", [0])
    h.rebalance(1, how, [0])
    if not second_assigned_before_revoke:
        h.rebalance(2, "assign", [0])
    h.poll(2, [(0, 1, 101)])
    return h


def test_two_members_holding_a_partition_at_once_overlap() -> None:
    assert judged(handover(False))["anomaly_counts"]["overlapping-owners"] == 0
    out = judged(handover(True))
    assert out["violations"] == ["overlapping-owners"]
    (ex,) = out["anomalies"]["overlapping-owners"]
    assert (ex["first"]["process"], ex["second"]["process"], ex["first"]["how"]) == (1, 2, "revoke")


def test_an_overlap_after_a_lost_assignment_is_permitted() -> None:
    out = judged(handover(True, how="lost"))
    assert out["valid"] is True and out["permitted"] == ["overlapping-owners"]


@pytest.mark.parametrize("stale", [True, False])
def test_an_assignment_of_an_older_generation_then_lost_may_overlap_the_current_one(stale: bool) -> None:
    """Found on a real run: a member paused past its session took, when it ran again, the
    assign of generation 2 its client had queued, while process 1 held the partition in
    generation 3, then found itself expelled (lost). Of a newer generation, the same
    assignment is no stale one: the first owner should have let go."""
    h = G()
    h.at(1).rebalance(1, "assign", [0], generation=3)
    h.at(7).rebalance(2, "assign", [0], generation=2 if stale else 4)
    h.at(8).rebalance(2, "lost", [0], generation=2 if stale else 4)
    h.at(9).commit(1, [], "ok")
    out = judged(h)
    assert out["anomaly_counts"]["overlapping-owners"] == 1
    assert out["violations"] == ([] if stale else ["overlapping-owners"])
    if stale:
        assert out["anomalies"]["overlapping-owners"][0]["permitted"] == OVERLAP_AFTER_LOST


def retired_owner(outcome: str) -> G:
    """Process 1 assigned partition 0 at 1 s, process 2 at 7 s; process 1's commit at 9 s
    ends ``outcome`` (info: it was retired, its closing callbacks unjournaled)."""
    h = G()
    h.at(1).rebalance(1, "assign", [0])
    h.at(7).rebalance(2, "assign", [0])
    h.at(9).commit(1, [], outcome)
    return h


def test_an_overlap_with_a_retired_first_owner_is_unknown() -> None:
    assert judged(retired_owner("ok"))["violations"] == ["overlapping-owners"]
    out = judged(retired_owner("info"))
    assert out["valid"] == "unknown" and out["violations"] == []
    assert out["unknown"] == ["owner-end-unknown"]


def test_an_overlap_with_a_first_owner_fenced_for_good_is_permitted_with_static_members() -> None:
    """A static member's zombie: another joined with its group.instance.id and took its
    partition; its client's fatal error retired it. Without static membership no member can
    fence another for good, so the same history's overlap stays unknown (found by review)."""
    h = retired_owner("ok")
    h.at(10).op(1, "invoke", "poll", None)
    h.op(1, "info", "poll", None, "_FATAL")
    assert judged(h)["unknown"] == ["owner-end-unknown"]
    out = judged(h, static=True)
    assert out["valid"] is True and out["permitted"] == ["overlapping-owners"]
    (ex,) = out["anomalies"]["overlapping-owners"]
    assert ex["permitted"] == OVERLAP_AFTER_FENCED


def paused_owner(pause_s: float, polled_after: bool = False) -> G:
    """Process 1 (consumer 0) assigned partition 0 at 1 s and paused from 2 s for
    ``pause_s`` seconds with a commit open, or a poll if ``polled_after``, which ends ok
    with a record at 8.9 s before its next commit; process 2 assigned the partition at
    7 s; process 1's commit ends info (so it is retired) at 9 s."""
    h = G()
    h.at(1).rebalance(1, "assign", [0])
    h.at(1.5).commit(1, [], "ok")
    h.op(1, "invoke", "poll" if polled_after else "commit", None if polled_after else {"offsets": []})
    h.at(2).op("nemesis", "info", "pause-client", {"kind": "pause", "consumers": [0]})
    h.op("nemesis", "info", "pause-client", {"kind": "pause", "consumers": [0], "processes": [1],
                                             "result": "paused consumer 0"})
    h.at(7).rebalance(2, "assign", [0])
    h.at(2 + pause_s).op("nemesis", "info", "resume-client", {"kind": "pause", "consumers": [0]})
    h.op("nemesis", "info", "resume-client", {"kind": "pause", "consumers": [0], "result": "resumed"})
    if polled_after:
        h.at(8.9).op(1, "ok", "poll", {"records": [[TOPIC, 0, 0, 5]]})
        h.op(1, "invoke", "commit", {"offsets": []})
    h.at(9).op(1, "info", "commit", {"offsets": []}, "REQUEST_TIMED_OUT")
    return h


def test_an_overlap_with_a_first_owner_paused_past_its_session_and_retired_is_permitted() -> None:
    """Paused 6.5 s, past the 6 s session, over the second's assignment, and retired on
    resuming with nothing read: permitted. Paused 5.5 s (its session could not have expired
    by the pause alone), or having read a record after resuming: unknown, as any overlap
    with a retired owner."""
    out = judged(paused_owner(6.5))
    assert out["valid"] is True and out["permitted"] == ["overlapping-owners"]
    (ex,) = out["anomalies"]["overlapping-owners"]
    assert ex["permitted"] == OVERLAP_AFTER_PAUSE
    assert judged(paused_owner(5.5))["unknown"] == ["owner-end-unknown"]
    assert judged(paused_owner(6.5, polled_after=True))["unknown"] == ["owner-end-unknown"]


def test_a_violation_displaces_the_last_permitted_example_kept() -> None:
    """46 members holding a partition, each losing it: 1035 overlaps permitted; then one
    member revokes while another holds it: a violation, kept at the top level in place of
    the last permitted example, where an undecided overlap after it (its first owner
    retired) displaces none; results.json's ``group`` keeps the first 100 seen, each
    ``permitted`` by its reason."""
    h = G()
    members = range(1, 47)
    for p in members:
        h.rebalance(p, "assign", [0])
    for p in members:
        h.rebalance(p, "lost", [0])
    h.rebalance(47, "assign", [0])
    h.rebalance(48, "assign", [0])
    h.rebalance(47, "revoke", [0])
    h.rebalance(49, "assign", [0])
    h.rebalance(50, "assign", [0])
    h.commit(49, [], "info")
    result = groups.judge(h.group(), GuaranteeConfig(), groups.FaultWindows([], TOPIC, None), end={})
    assert result.anomaly_counts["overlapping-owners"] == 46 * 45 // 2 + 2
    kept = result.anomalies["overlapping-owners"]
    assert len(kept) == MAX_ANOMALY_EXAMPLES and result.violations == ["overlapping-owners"]
    assert [e["permitted"] for e in kept[-2:]] == [True, False] and kept[-1]["first"]["process"] == 47
    own = result.extra["group"]["anomalies"]["overlapping-owners"]
    assert len(own) == groups.MAX_GROUP_EXAMPLES
    assert {e["permitted"] for e in own} == {OVERLAP_AFTER_LOST}


def test_an_assignment_held_to_the_end_overlaps_a_later_one() -> None:
    h = G()
    h.rebalance(1, "assign", [0])
    h.poll(1, [(0, 0, 100)])
    h.rebalance(2, "assign", [0])
    h.poll(2, [(0, 1, 101)])
    h.poll(1, [])  # process 1 still holds it: its last op ends its span
    assert judged(h)["anomaly_counts"]["overlapping-owners"] == 1


# -- lost-to-group -------------------------------------------------------------------------------


def lost(skip: int | None) -> G:
    h = G()
    for off in range(5):
        h.send(0, 100 + off, 0, off)
    five(h, skip=skip)
    h.commit(1, [(0, 5)])
    h.drain(0, [(off, 100 + off) for off in range(5)])
    return h


def test_a_record_below_the_committed_offset_no_member_got_is_lost_to_the_group() -> None:
    assert judged(lost(None))["anomaly_counts"]["lost-to-group"] == 0
    out = judged(lost(3))
    # the member's reads jumping from 2 to 4 are its position's jump too
    assert out["violations"] == ["lost-to-group", "reset-without-cause"]
    (ex,) = out["anomalies"]["lost-to-group"]
    assert (ex["offset"], ex["value"], ex["committed"]) == (3, 103, 5)
    assert judged(lost(4))["anomaly_counts"]["lost-to-group"] == 1  # just below the commit


def test_a_record_replaced_at_an_offset_a_member_read_is_lost_to_the_group() -> None:
    """The drain holds another value at offset 2 than the member read there: what the
    group committed past was truncated and rewritten."""
    h = lost(None)
    h.ops[-1]["value"]["records"][2] = [2, 999]
    assert judged(h)["anomaly_counts"]["lost-to-group"] == 1


def replaced(fault_at: float | None) -> G:
    """Five records sent at 5 s; process 1 reads them and commits 5; 999 is sent at 15 s and
    acknowledged at offset 2, where the drain reads it instead of 102; a kill of node 1,
    partition 0's leader, at ``fault_at`` s."""
    h = G()
    if fault_at is not None and fault_at < 5:
        h.kill(at=fault_at)
    h.at(5)
    for off in range(5):
        h.send(0, 100 + off, 0, off)
    five(h)
    h.commit(1, [(0, 5)])
    if fault_at is not None and 5 <= fault_at < 15:
        h.kill(at=fault_at)
    h.at(15).send(0, 999, 0, 2)
    if fault_at is not None and fault_at >= 15:
        h.kill(at=fault_at)
    h.at(30).drain(0, [(off, 999 if off == 2 else 100 + off) for off in range(5)])
    return h


def elected(at: float) -> Timeline:
    """Partition 0's metadata log: node 1 leads from the start; node 2 is elected 0.1 s after
    ``at`` s, and the ISR is full again a second after."""
    every = frozenset({1, 2, 3})
    return {(TOPIC, 0): [MetadataState(0, 1, every, every),
                         MetadataState(int((at + 0.1) * S), 2, frozenset({2, 3}), every),
                         MetadataState(int((at + 1) * S), 2, every, every)]}


def test_only_a_truncation_between_the_lost_records_write_and_its_replacement_permits_it() -> None:
    """acks=1: 102, read at offset 2, gave way to 999 there. A truncation that did so came
    after 102 was sent and before 999 was appended (its ack): a kill of the leader and an
    election at 10 s permit it; at 20 s (after the ack) or at 1 s (before the send, the
    ISR full again at 2 s) they do not; nor does 999's ack bound the window where it was
    not acknowledged at 2."""
    assert judged(replaced(10), acks="1", timeline=elected(10))["permitted"] == ["lost-to-group"]
    assert judged(replaced(20), acks="1", timeline=elected(20))["violations"] == ["lost-to-group"]
    assert judged(replaced(1), acks="1", timeline=elected(1))["violations"] == ["lost-to-group"]
    h = replaced(20)
    (ack,) = [op for op in h.ops if op["type"] == "ok" and op["value"].get("value") == 999]
    ack["type"] = "info"
    assert judged(h, acks="1", timeline=elected(20))["permitted"] == ["lost-to-group"], \
        "999 not acknowledged: it may have been appended up to the drain"
    ack.update(type="ok", value={**ack["value"], "offset": 7})
    assert judged(h, acks="1", timeline=elected(20))["permitted"] == ["lost-to-group"], \
        "999 acknowledged at 7: the copy at 2 may be a duplicate appended later"


def test_a_replacement_acknowledged_before_the_lost_record_was_sent_bounds_nothing() -> None:
    """acks=1, unclean election on: node 1 acknowledges 999 at offset 2 at 1 s, unreplicated,
    and is killed at 2 s; node 2, elected without it, takes 102 at 2 (5 s), which members
    read and commit past; node 2 is killed at 10 s and node 1 elected uncleanly: 999 is back
    at 2 and 102 lost. 999's ack came before 102 was sent, on another branch of the log, so
    it bounds no window: the election at 10 s permits the loss (the review's finding)."""
    h = G()
    for off in range(2):
        h.send(0, 100 + off, 0, off)
    h.at(1).send(0, 999, 0, 2)
    h.kill(at=2)
    h.at(5)
    for off in range(2, 5):
        h.send(0, 100 + off, 0, off)
    five(h)
    h.commit(1, [(0, 5)])
    h.at(10).op("nemesis", "info", "kill", {"nodes": [2], "leaders": {f"{TOPIC}/0": 2}})
    h.op("nemesis", "info", "kill", {"nodes": [2], "leaders": {f"{TOPIC}/0": 2}})
    h.at(30).drain(0, [(off, 999 if off == 2 else 100 + off) for off in range(5)])
    every = frozenset({1, 2, 3})
    timeline = {(TOPIC, 0): [MetadataState(0, 1, every, every),
                             MetadataState(int(2.1 * S), 2, frozenset({2, 3}), every),
                             MetadataState(int(10.1 * S), 1, frozenset({1}), every),
                             MetadataState(int(12 * S), 1, every, every)]}
    out = judged(h, acks="1", timeline=timeline)
    assert (out["violations"], out["permitted"]) == ([], ["lost-to-group"]), out


# -- unassigned-member ---------------------------------------------------------------------------


def settled(second_holds: bool, fault_at: float | None = None, joined_at: float | None = None) -> G:
    """Two members, three partitions; the first holds 0 and 1, the second 2 or nothing; a
    third member joins at ``joined_at`` s and is retired at once."""
    h = G()
    h.rebalance(1, "assign", [0, 1])
    h.rebalance(2, "assign", [2] if second_holds else [])
    if fault_at is not None:
        h.at(fault_at).fault("heal")
    if joined_at is not None:
        h.at(joined_at).op(3, "invoke", "poll", None)
        h.op(3, "info", "poll", None)
    h.at(20)
    h.poll(1, [])
    h.poll(2, [])
    return h


def test_a_member_without_an_assignment_while_a_partition_has_no_owner() -> None:
    assert judged(settled(True), partitions=3)["anomaly_counts"]["unassigned-member"] == 0
    out = judged(settled(False), partitions=3)
    assert out["violations"] == ["unassigned-member"]
    (ex,) = out["anomalies"]["unassigned-member"]
    assert (ex["process"], ex["unowned"]) == (2, [2])


def test_members_are_not_judged_unassigned_soon_after_a_fault() -> None:
    assert judged(settled(False, fault_at=5), partitions=3)["violations"] == ["unassigned-member"]
    out = judged(settled(False, fault_at=15), partitions=3)
    assert out["valid"] is True and out["settled"] is False


def test_members_are_not_judged_unassigned_soon_after_a_replacement_joins() -> None:
    """A retired member's replacement joining rebalances the group: the quiet period counts
    from its first op (and from the retirement) as from a fault."""
    assert judged(settled(False, joined_at=5), partitions=3)["violations"] == ["unassigned-member"]
    out = judged(settled(False, joined_at=15), partitions=3)
    assert out["valid"] is True and out["settled"] is False


def test_a_member_that_left_is_neither_the_last_to_poll_nor_unassigned() -> None:
    """A stopped member's last poll is early and it holds nothing after: the group settles
    on the others, :data:`QUIET_NS` after the stop, and it is no member without an assignment."""
    h = G()
    for process, partition in ((1, 0), (2, 1), (3, 2)):
        h.rebalance(process, "assign", [partition])
    h.at(2).poll(3, [])
    h.rebalance(3, "revoke", [2])
    h.op("nemesis", "info", "stop-client", {"kind": "stop", "consumers": [2], "processes": [3], "pid": 9,
                                            "result": "consumer 2 left the group"})
    h.at(20)  # partition 2 has no owner, as far as the others are concerned
    h.poll(1, [])
    h.poll(2, [])
    out = judged(h, partitions=3)
    assert out["valid"] is True and out["settled"] is True and out["anomaly_counts"]["unassigned-member"] == 0


def test_a_member_killed_between_two_ops_is_gone_though_no_op_of_it_ended_info() -> None:
    """A consumer killed after one op ended and before the next began leaves no ``info``
    op: the ``crash-client`` that names its process says it is gone, so its early last poll
    is not the group's, which settles on the others. Without that op, the same history's
    early last poll leaves the group unsettled."""

    def history(crash: bool) -> G:
        h = G()
        for process, partition in ((1, 0), (2, 1), (3, 2)):
            h.rebalance(process, "assign", [partition])
        h.at(2).poll(3, [])
        if crash:
            h.op("nemesis", "info", "crash-client", {"kind": "crash", "consumers": [2], "processes": [3],
                                                     "pid": 9, "result": "killed consumer 2"})
        h.at(20)
        h.poll(1, [])
        h.poll(2, [])
        return h

    killed, silent = judged(history(True), partitions=3), judged(history(False), partitions=3)
    assert killed["valid"] is True and killed["settled"] is True, killed
    assert silent["valid"] is True and silent["settled"] is False, silent


# -- composed on a stored run --------------------------------------------------------------------


def group_spec(mode: str = "subscribe") -> TestSpec:
    return TestSpec(name="g", topic=TopicSpec(name=TOPIC, partitions=1),
                    consumer=dataclasses.replace(ConsumerSpec(), mode=mode),  # type: ignore[arg-type]
                    workload=WorkloadSpec(name="group" if mode == "subscribe" else "queue"))


def stored(path: Path, spec: TestSpec, h: G) -> Path:
    path.mkdir()
    (path / "test.json").write_text(json.dumps(spec.to_json()))
    (path / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in h.ops))
    return path


def test_the_group_workload_is_checked_by_the_queue_and_group_checkers(tmp_path: Path) -> None:
    """A member taking over at the committed offset skips what the first member read: a
    poll-skip for a consumer that assigns, none for a member; the group checker judges
    the same history, here a commit going backwards."""
    h = G()
    for off in range(5):
        h.send(0, 100 + off, 0, off)
    five(h)
    h.commit(1, [(0, 3)])
    h.rebalance(1, "revoke", [0])
    h.rebalance(2, "assign", [0])
    h.poll(2, [(0, 3, 103), (0, 4, 104)])
    h.commit(2, [(0, 2)])
    h.drain(0, [(off, 100 + off) for off in range(5)])
    member = check_stored(stored(tmp_path / "g", group_spec(), h))
    assert member.valid is False and member.violations == ["commit-backwards"]
    assert member.extra["group"]["valid"] is False and member.anomaly_counts["commit-backwards"] == 1
    assert "violations (not permitted): commit-backwards" in summary(member).splitlines()
    assigned = check_stored(stored(tmp_path / "q", group_spec("assign"), h))
    assert assigned.violations == ["poll-skip"] and "group" not in assigned.extra


def handed_over(reads: Iterable[int], fault: str | None = None, truncated: dict[str, Any] | None = None) -> G:
    """Eight records sent; process 1 reads 0 to 4, commits 5 (ok) and is revoked; a
    ``fault`` of partition 0's leader (its ``truncated``, :meth:`G.kill`); process 2 is
    assigned the partition and reads ``reads``."""
    h = G()
    for off in range(8):
        h.send(0, 100 + off, 0, off)
    five(h)
    h.commit(1, [(0, 5)])
    h.rebalance(1, "revoke", [0])
    if fault is not None:
        h.kill(fault, truncated=truncated)
    h.rebalance(2, "assign", [0])
    h.poll(2, [(0, off, 100 + off) for off in reads])
    return h


def taken_over(fault: bool) -> G:
    """:func:`handed_over`, process 2 reading the rest and committing 3 (after a kill of the
    leader when ``fault``); the drain reads all eight."""
    h = handed_over(range(5, 8), "kill" if fault else None)
    h.commit(2, [(0, 3)])
    h.drain(0, [(off, 100 + off) for off in range(8)])
    return h


def test_a_group_violation_is_the_runs_in_results_json_and_on_its_report(tmp_path: Path) -> None:
    """A commit going backwards, written by ``faultline check``: counted and named a
    violation at results.json's top level beside the queue checker's types, in the
    report's headline, its expectations and its examples; the same commit permitted (acks=1,
    a leader killed) is named permitted, with its reason."""
    run_dir = stored(tmp_path / "g", group_spec(), taken_over(fault=False))
    results = check_run(run_dir).to_json()
    validator("results.schema.json").validate(results)
    counts = results["anomaly_counts"]
    assert results["violations"] == ["commit-backwards"] and counts["commit-backwards"] == 1
    assert counts["lost-write"] == 0 and results["group"]["valid"] is False
    assert results["group"]["settled"] is False
    (example,) = results["anomalies"]["commit-backwards"]
    assert example["permitted"] is False and example["permitted_by"] is None
    run = load_run(run_dir)
    assert verdict(run).why.startswith("commit-backwards ×1: forbidden by Kafka's guarantees")
    (row,) = [e for e in expectations(run) if e["name"] == "commit-backwards"]
    assert row["status"] == "violation" and row["count"] == 1
    (section,) = [x for x in anomaly_sections(run) if x["name"] == "commit-backwards"]
    assert len(section["rows"]) == 1 and section["rows"][0]["violation"]
    acks1 = dataclasses.replace(group_spec(), producer=dataclasses.replace(ProducerSpec(), acks="1",
                                                                           enable_idempotence=False))
    run_dir = stored(tmp_path / "permitted", acks1, taken_over(fault=True))
    run = load_run(run_dir)
    assert "commit-backwards" in run.results["permitted"] and run.results["violations"] == []
    (row,) = [e for e in expectations(run) if e["name"] == "commit-backwards"]
    assert row["status"] == "permitted" and "(KAFKA-19902)" in row["reason"]
    assert "lost-write" in run.results["permitted_reasons"], "the queue checker's reasons are kept beside"


def test_the_group_extra_keeps_its_findings_with_their_meaning(tmp_path: Path) -> None:
    """results.json's ``group`` holds the group checker's counts, examples (``permitted``:
    the reason, or null for a violation), permitted, reasons and violations, beside the
    same findings at the top level (``permitted``: a boolean)."""
    acks1 = dataclasses.replace(group_spec(), producer=dataclasses.replace(ProducerSpec(), acks="1",
                                                                           enable_idempotence=False))
    for spec, fault in ((group_spec(), False), (acks1, True)):
        results = check_run(stored(tmp_path / str(fault), spec, taken_over(fault=fault))).to_json()
        validator("results.schema.json").validate(results)
        own = results["group"]
        (example,) = own["anomalies"]["commit-backwards"]
        (top,) = results["anomalies"]["commit-backwards"]
        assert own["anomaly_counts"]["commit-backwards"] == 1 and example["unknown"] is None
        assert example["permitted"] == top["permitted_by"] and top["permitted"] is fault
        assert (own["permitted"], own["violations"]) == ((["commit-backwards"], []) if fault else
                                                         ([], ["commit-backwards"]))
        assert own["permitted_reasons"] == ({"commit-backwards": example["permitted"]} if fault else {})
        assert (example["permitted"] is None) is not fault
        del results["group"]["anomaly_counts"]
        assert not validator("results.schema.json").is_valid(results)


def test_an_undecided_group_example_is_doubted_not_a_violation(tmp_path: Path) -> None:
    """An overlap whose first owner was retired is undecided: its unknown entry names its
    type, and the report and the pipeline's anomalies table call its example doubted (a
    null ``violation``), not a violation; a decided overlap of the same run keeps its own
    judgement: a violation stays one (and so does its type), a permitted one is not doubted."""
    cell = Cell("n-1", "2026-11-23T02:00:00Z", "2026-11-23", "r1", {"seed": 1}, "done", tmp_path, None)
    doubted, violation, permitted = (False, True), (True, False), (False, False)
    for beside, status, marks, table in (
            (None, "doubted", [doubted], [(True, None)]),
            ("revoke", "violation", [doubted, violation], [(False, True), (True, None)]),
            ("lost", "doubted", [permitted, doubted], [(False, False), (True, None)])):
        h = retired_owner("info")
        if beside:  # process 3 holding partition 0 from 10 s, process 4 from 11 s; 3 ends it
            h.at(10).rebalance(3, "assign", [0])
            h.at(11).rebalance(4, "assign", [0])
            h.at(12).rebalance(3, beside, [0])
        h.send(0, 100, 0, 0)
        h.drain(0, [(0, 100)])
        run_dir = stored(tmp_path / str(beside), group_spec(), h)
        results = check_run(run_dir).to_json()
        validator("results.schema.json").validate(results)
        (entry,) = [u for u in results["unknown"] if u["kind"] == "owner-end-unknown"]
        assert entry["anomalies"] == ["overlapping-owners"]
        run = load_run(run_dir)
        (row,) = [e for e in expectations(run) if e["name"] == "overlapping-owners"]
        assert row["status"] == status
        (section,) = [x for x in anomaly_sections(run) if x["name"] == "overlapping-owners"]
        assert sorted((r["violation"], "owner-end-unknown" in r["doubt"]) for r in section["rows"]) == marks
        rows = anomaly_rows(cell, results)
        assert sorted((x["violation"] is None, x["violation"]) for x in rows) == table


def test_the_group_history_results_and_spec_match_their_schemas(tmp_path: Path) -> None:
    h = lost(3)
    h.rebalance(1, "lost", [0])
    history = validator("history.schema.json")
    for op in h.ops:
        history.validate(op)
    validator("test.schema.json").validate(group_spec().to_json())
    result = check_stored(stored(tmp_path / "g", group_spec(), h))
    validator("results.schema.json").validate(result.to_json())
    assert result.to_json()["anomaly_counts"]["lost-to-group"] == 1
    bad = {**h.ops[-1], "value": {"partitions": [[TOPIC, 0]], "member": "m1"}}  # no generation
    assert not history.is_valid(bad)


# -- commit-lost -------------------------------------------------------------------------------


def committed(fault: str | None = None, info: int | None = None,
              truncated: dict[str, Any] | None = None, fault_at: float | None = None) -> G:
    """Process 1 polls 0 to 4, commits 3 then 5 (ok), then ``info`` (a commit of that offset
    whose outcome is unknown) when given; a ``fault`` of node 1 after the last ok commit
    (its ``truncated``, :meth:`G.kill`; at ``fault_at`` s where given)."""
    h = G()
    five(h)
    h.commit(1, [(0, 3)])
    h.commit(1, [(0, 5)])
    if info is not None:
        h.commit(1, [(0, info)], "info")
    if fault is not None:
        h.kill(fault, fault_at, truncated)
    return h


def test_a_committed_offset_below_the_last_acknowledged_commit_is_lost() -> None:
    assert judged(committed(), end={0: 5})["anomaly_counts"]["commit-lost"] == 0
    out = judged(committed(), end={0: 3})
    assert out["valid"] is False and out["violations"] == ["commit-lost"]
    (ex,) = out["anomalies"]["commit-lost"]
    assert (ex["partition"], ex["committed"], ex["offset"], ex["process"]) == (0, 3, 5, 1)
    assert judged(committed(), end={})["violations"] == ["commit-lost"], "no committed offset at all"


def test_a_committed_offset_an_info_commit_may_have_stored_is_not_lost() -> None:
    assert judged(committed(info=4), end={0: 4})["anomaly_counts"]["commit-lost"] == 0
    assert judged(committed(info=4), end={0: 2})["violations"] == ["commit-lost"]


def test_either_of_two_commits_in_flight_together_may_be_the_last_stored() -> None:
    h = G()
    five(h)
    h.rebalance(2, "assign", [0])
    h.poll(2, [(0, 0, 100)])
    h.op(1, "invoke", "commit", {"offsets": [[TOPIC, 0, 5, 0]]})
    h.op(2, "invoke", "commit", {"offsets": [[TOPIC, 0, 1, 0]]})
    h.op(1, "ok", "commit", {"offsets": [[TOPIC, 0, 5, 0]]})
    h.op(2, "ok", "commit", {"offsets": [[TOPIC, 0, 1, 0]]})
    assert [groups.commits_lost(h.group(), {0: end}) for end in (1, 5)] == [[], []]
    (lost,) = groups.commits_lost(h.group(), {0: 0})
    assert lost.last.offset == 5


def test_only_a_data_destroying_fault_after_the_last_commit_permits_commit_lost() -> None:
    """__consumer_offsets keeps min.insync.replicas=1: a lose-unflushed after the commit may
    have lost it; a kill (the log survives it) does not, nor does acks=1 on the test topic."""
    out = judged(committed(fault="lose-unflushed"), end={0: 3})
    assert out["valid"] is True and "__consumer_offsets" in out["permitted_reasons"]["commit-lost"]
    assert judged(committed(fault="kill"), end={0: 3}, acks="1")["violations"] == ["commit-lost"]


def test_only_data_destroyed_on_a_replica_of_the_offsets_partition_permits_losing_commits() -> None:
    """One lose-unflushed of node 1, three facts about the nodes holding the group's
    __consumer_offsets partition: node 1 among them (permitted), not (a violation: no
    replica lost data), not known (unknown: permitted only on the assumption that it was);
    for commit-backwards, commit-lost and redelivery-below-commit."""
    for anomaly, h, end in (("commit-backwards", backwards(3, fault_at=0, fault="lose-unflushed"), None),
                            ("commit-lost", committed(fault="lose-unflushed"), {0: 3}),
                            ("redelivery-below-commit", handed_over(range(8), "lose-unflushed"), None)):
        held = judged(h, end=end, offsets=frozenset({"1", "2"}))
        assert held["valid"] is True and held["permitted"] == [anomaly], anomaly
        assert judged(h, end=end, offsets=frozenset({"2", "3"}))["violations"] == [anomaly]
        unsure = judged(h, end=end, offsets=None)
        assert unsure["valid"] == "unknown" and unsure["unknown"] == ["group-permitted-on-assumption"]
        assert "__consumer_offsets" in unsure["anomalies"][anomaly][0]["permitted"], anomaly


def test_data_destroyed_on_one_replica_of_three_loses_commits_only_where_the_isr_was_that_replica() -> None:
    """A lose-unflushed of node 1, the leader of the group's offsets partition on nodes 1 to
    3: the coordinator answers a commit once it is below that partition's HW, so on every
    ISR member; with nodes 2 and 3 in the ISR (the metadata log shows no change) they keep
    it and its loss is a violation; once the log shows node 1 the ISR alone (min.insync=1
    lets it acknowledge alone, and it is re-elected as the ISR's last member) it is
    permitted; with no metadata log, permitted only on assumption (unknown)."""
    three = GuaranteeConfig(acks="all", min_insync_replicas=1, replication_factor=3)
    for anomaly, h, end in (("commit-backwards", backwards(3, fault_at=0, fault="lose-unflushed"), None),
                            ("commit-lost", committed(fault="lose-unflushed"), {0: 3})):
        kept = judged(h, end=end, offsets=frozenset({"1", "2", "3"}), offsets_config=three)
        assert kept["violations"] == [anomaly], anomaly
        alone = judged(h, end=end, offsets=frozenset({"1", "2", "3"}), offsets_config=three,
                       offsets_states=offsets_log(1, replicas=3))
        assert alone["valid"] is True and alone["permitted"] == [anomaly], anomaly
        assert "may lose an acknowledged commit" in alone["permitted_reasons"][anomaly]
        unlogged = judged(h, end=end, offsets=None, offsets_config=three, offsets_states=[])
        assert unlogged["unknown"] == ["group-permitted-on-assumption"], anomaly


def test_a_destroyed_offsets_leader_loses_commits_only_where_it_is_elected_again_after_its_fence() -> None:
    """The offsets partition on nodes 1 to 3; after the commits its ISR shrinks to node 1 at
    1 s, whose data is lost at 3 s; the controller fences node 1 at 5 s. Where the ISR stayed
    node 1 alone, the fence leaves no leader and node 1 is elected again at 6 s with what it
    lost: the commit lost is permitted. Where the ISR was whole again at 1.5 s, the fence
    elects node 2, which holds the commit: node 1's leader record from before its fence is
    no leadership (found by review), and the loss is a violation."""
    three = GuaranteeConfig(acks="all", min_insync_replicas=1, replication_factor=3)
    every, alone = frozenset({1, 2, 3}), frozenset({1})
    shrunk = [MetadataState(-10 * S, 1, every, every), MetadataState(S, 1, alone, every)]
    again = [*shrunk, MetadataState(5 * S, None, alone, every), MetadataState(6 * S, 1, alone, every)]
    healed = [*shrunk, MetadataState(3 * S // 2, 1, every, every),
              MetadataState(5 * S, 2, frozenset({2, 3}), every)]
    h, end = committed(fault="lose-unflushed", fault_at=3), {0: 3}
    nodes = frozenset({"1", "2", "3"})
    out = judged(h, end=end, offsets=nodes, offsets_config=three, offsets_states=again)
    assert out["permitted"] == ["commit-lost"] and out["valid"] is True
    assert judged(h, end=end, offsets=nodes, offsets_config=three, offsets_states=healed)["violations"] == [
        "commit-lost"]


@pytest.mark.parametrize("how", ["no node", "failed", "never completed"])
def test_data_destroyed_by_a_fault_without_a_witness_permits_losing_commits_only_on_assumption(
        how: str) -> None:
    """A lose-unflushed that names no node, whose completion carries an error, or that never
    completed may have destroyed a replica of the group's offsets partition, or not: the
    commit it would excuse is unknown, not permitted."""
    h = committed()
    value = {} if how == "no node" else {"nodes": [1]}
    h.op("nemesis", "info", "lose-unflushed", value)
    if how != "never completed":
        h.op("nemesis", "info", "lose-unflushed", value, "boom" if how == "failed" else None)
    out = judged(h, end={0: 3})
    assert out["valid"] == "unknown" and out["unknown"] == ["group-permitted-on-assumption"]


def test_the_offsets_logs_own_record_refutes_destroyed_data_as_the_cause() -> None:
    """A lose-unflushed of node 1, a replica of the group's offsets partition, permits a
    commit going back from 5 to 3, unless every replica's log still holds the record of 5
    before one of 3 with none below 5 between (a violation); where one does and the other
    does not, unknown. The same for a commit lost (the coordinator answers 3 after 3 and
    5), where a replica whose records stay at or above 5 to the end kept it too."""
    both = [(0, 0, 5), (1, 0, 3)]
    back = backwards(3, fault_at=0, fault="lose-unflushed")
    assert judged(back, commits=[[(1, 0, 3)], [(1, 0, 3)]])["permitted"] == ["commit-backwards"]
    assert judged(back, commits=[both, both])["violations"] == ["commit-backwards"]
    assert judged(back, commits=[both, [(1, 0, 3)]])["unknown"] == ["group-permitted-on-assumption"]
    between = [(0, 0, 5), (1, 0, 2), (2, 0, 3)]  # the position fell below 5 before 3 was stored
    assert judged(back, commits=[between, between])["permitted"] == ["commit-backwards"]
    to_end, lost = [(0, 0, 3), (1, 0, 5)], committed(fault="lose-unflushed")
    assert judged(lost, end={0: 3}, commits=[[(0, 0, 3)], [(0, 0, 3)]])["permitted"] == ["commit-lost"]
    assert judged(lost, end={0: 3}, commits=[to_end, to_end])["violations"] == ["commit-lost"]
    assert judged(lost, end={0: 3}, commits=[[(0, 0, 5), (1, 0, 3)]] * 2)["violations"] == ["commit-lost"]
    fell = [(0, 0, 3), (1, 0, 5), (2, 0, 4)]
    assert judged(lost, end={0: 3}, commits=[fell, fell])["permitted"] == ["commit-lost"]
    assert judged(lost, end={0: 3}, commits=[to_end, [(0, 0, 3)]])["unknown"] == [
        "group-permitted-on-assumption"]


CUT = {"old_end": 9, "new_end": 6, "recovery_point": 6, "bytes_removed": 300}
KEPT = {f"{TOPIC}/0": {"old_end": 8, "new_end": 8, "recovery_point": 8, "bytes_removed": 0}}


@pytest.mark.parametrize(("truncated", "partition", "permitted"), [
    ({**KEPT, "__consumer_offsets/3": CUT}, 3, True),  # the record says it cut the offsets partition
    (KEPT, 3, False),  # it lists every partition of another topic that lost records: not this one
    ({**KEPT, "__consumer_offsets/3": {**CUT, "new_end": 9}}, 3, False),  # listed, its log end kept
    ({**KEPT, "__consumer_offsets/1": CUT}, 3, False),  # another group's partition was cut
    (KEPT, None, True),  # which partition holds the group's offsets is not known: it cannot say
    (None, 3, True),  # no record (a run before it, or a wipe, which deletes everything)
])
def test_a_lose_unflusheds_own_record_decides_whether_it_lost_the_groups_commits(
        truncated: dict[str, Any] | None, partition: int | None, permitted: bool) -> None:
    """A lose-unflushed of node 1, a replica of the group's offsets partition (3): its
    completion's ``truncated`` lists what it cut; where that says it cut nothing of the
    partition, it lost no commit, and commit-backwards, commit-lost and
    redelivery-below-commit are violations; where it cut there, or cannot say, permitted."""
    for anomaly, h, end in (
            ("commit-backwards", backwards(3, 0, "lose-unflushed", truncated), None),
            ("commit-lost", committed("lose-unflushed", truncated=truncated), {0: 3}),
            ("redelivery-below-commit", handed_over(range(8), "lose-unflushed", truncated), None)):
        out = judged(h, end=end, offsets_partition=partition)
        assert (out["permitted"], out["violations"]) == (([anomaly], []) if permitted else ([], [anomaly])), \
            anomaly


def test_a_retired_async_member_leaves_commit_lost_unknown() -> None:
    """A retired member's later async commits are not journaled: one may have stored the
    lower offset."""
    h = committed(info=4)  # the info retires process 1
    assert judged(h, end={0: 1}, asynchronous=True)["unknown"] == ["commit-unjournaled"]
    assert judged(h, end={0: 1})["violations"] == ["commit-lost"], "sync: a retired member commits no more"


def test_unknown_end_offsets_leave_the_verdict_unknown_in_one_line() -> None:
    out = judged(committed(), end="no group.json: the run did not collect it")
    assert out["valid"] == "unknown" and out["unknown"] == ["group-end-unknown"]
    assert judged(backwards(3), end="no group.json")["valid"] is False, "a violation still counts"


def test_a_stored_group_run_is_judged_by_its_group_json(tmp_path: Path) -> None:
    def run(name: str, end: Any) -> dict[str, Any]:
        d = stored(tmp_path / name, group_spec(), committed())
        if end is not None:
            (d / "group.json").write_text(json.dumps({
                "group": "faultline-g", "offsets": end, "offsets_topic_partition": 0,
                "offsets_replicas": [], "errors": []}))
        return check_run(d).to_json()

    kept = run("kept", [{"topic": TOPIC, "partition": 0, "offset": 5, "leader_epoch": 0}])
    assert "commit-lost" not in kept["violations"] and kept["anomaly_counts"]["commit-lost"] == 0
    lost_ = run("lost", [{"topic": TOPIC, "partition": 0, "offset": 3, "leader_epoch": 0}])
    assert "commit-lost" in lost_["violations"] and lost_["group"]["valid"] is False
    missing = run("missing", None)
    assert missing["group"]["valid"] == "unknown"
    (entry,) = [u for u in missing["unknown"] if u["kind"] == "group-end-unknown"]
    assert entry["why"].startswith("commit-lost not judged: no group.json")


def offsets_replica(node: int, crc: int) -> dict[str, Any]:
    """A replica of __consumer_offsets partition 0 holding two commit batches, the second's CRC ``crc``."""
    return {"topic": "__consumer_offsets", "partition": 0, "node": node, "log_start_offset": 0,
            "log_end_offset": 2, "hw_checkpoint": 2,
            "batches": [[0, 0, 0, 11, -1, -1, -1, -1, "data"], [1, 1, 0, crc, -1, -1, -1, -1, "data"]]}


def offsets_metadata(nodes: tuple[int, ...], isr: tuple[int, ...] | None = None) -> str:
    """A metadata log whose first line gives __consumer_offsets partition 0 the replicas
    ``nodes``, led by the first, at the run's start; and where ``isr`` is given, a second
    line 1 s later leaving only those in the ISR."""
    line = {"offset": 1, "time": 0, "type": "partition", "topic": "__consumer_offsets",
            "partition": 0, "leader": nodes[0], "isr": list(nodes), "elr": [],
            "last_known_elr": [], "replicas": list(nodes), "leader_epoch": 0, "raw": {}}
    shrunk = [] if isr is None else [{**line, "offset": 2, "time": S, "isr": list(isr)}]
    return "".join(json.dumps(x) + "\n" for x in [line, *shrunk])


def test_the_offsets_logs_replicas_must_agree_below_their_hw(tmp_path: Path) -> None:
    """Two runs differing in one fact, a replica of the group's offsets partition holding
    another batch below the HW: the group's history is the same and valid, so the brokers'
    log and the history disagree and the group is unknown; after a wipe (data destroyed)
    of one of its replicas (node 1), once the metadata log showed it the partition's ISR
    alone, the difference is permitted; not with both replicas in the ISR (the other kept
    every commit), nor after a wipe of a node holding none (the metadata log gives the
    partition nodes 2 and 3)."""
    def run(name: str, crcs: tuple[int, int], fault: str | None = None,
            holders: tuple[int, int] = (1, 2), isr: tuple[int, ...] | None = (1,)) -> dict[str, Any]:
        d = stored(tmp_path / name, group_spec(), committed(fault, fault_at=2))
        (d / "group.json").write_text(json.dumps({
            "group": "faultline-g", "offsets_topic_partition": 0,
            "offsets": [{"topic": TOPIC, "partition": 0, "offset": 5, "leader_epoch": 0}],
            "offsets_replicas": [offsets_replica(n, crc) for n, crc in zip(holders, crcs, strict=True)],
            "errors": []}))
        (d / "metadata.jsonl").write_text(offsets_metadata(holders, isr))
        return check_run(d).to_json()

    same = run("same", (7, 7))
    log = same["group"]["offsets_log"]
    assert (log["partition"], log["status"], log["checked"]) == (0, "pass", 2)
    assert same["group"]["valid"] is True and "broker-state-disagrees" not in str(same["unknown"])
    differ = run("differ", (7, 8))
    assert differ["group"]["offsets_log"]["violations"] == 1 and differ["group"]["valid"] == "unknown"
    (entry,) = [u for u in differ["unknown"] if u["kind"] == "broker-state-disagrees"]
    assert "__consumer_offsets partition 0" in entry["why"]
    wiped = run("wiped", (7, 8), "wipe")
    assert wiped["group"]["offsets_log"]["permitted"] == 1 and wiped["group"]["valid"] is True
    in_sync = run("in-sync", (7, 8), "wipe", isr=None)
    assert in_sync["group"]["offsets_log"]["violations"] == 1 and in_sync["group"]["valid"] == "unknown"
    elsewhere = run("elsewhere", (7, 8), "wipe", holders=(2, 3), isr=(2,))
    assert elsewhere["group"]["offsets_log"]["violations"] == 1 and elsewhere["group"]["valid"] == "unknown"
    assert "broker-state-disagrees" in str(elsewhere["unknown"])
    for results in (same, differ, wiped, in_sync, elsewhere):
        validator("results.schema.json").validate(results)


def test_a_stored_runs_offsets_log_records_are_read_from_its_group_json(tmp_path: Path) -> None:
    """The coordinator answers 3 after commits of 3 and 5, and node 1, a replica of the
    offsets partition and its ISR alone, lost data: permitted, unless both replicas' records
    in group.json end with the commit of 5 (a violation); records of another topic count
    for nothing."""
    def run(name: str, commits: list[list[Any]] | None) -> dict[str, Any]:
        d = stored(tmp_path / name, group_spec(), committed("lose-unflushed", fault_at=2))
        replicas = [offsets_replica(n, 7) for n in (1, 2)]
        if commits is not None:
            replicas = [{**r, "commits": commits} for r in replicas]
        (d / "group.json").write_text(json.dumps({
            "group": "faultline-g", "offsets_topic_partition": 0,
            "offsets": [{"topic": TOPIC, "partition": 0, "offset": 3, "leader_epoch": 0}],
            "offsets_replicas": replicas, "errors": []}))
        (d / "metadata.jsonl").write_text(offsets_metadata((1, 2), (1,)))
        results = check_run(d).to_json()
        validator("results.schema.json").validate(results)
        return results

    assert "commit-lost" in run("unread", None)["permitted"]
    kept = run("kept", [[0, TOPIC, 0, 3, 0], [1, TOPIC, 0, 5, 0]])
    assert "commit-lost" in kept["violations"] and kept["group"]["valid"] is False
    assert "commit-lost" in run("other", [[0, TOPIC, 0, 3, 0], [1, "other", 0, 5, 0]])["permitted"]
