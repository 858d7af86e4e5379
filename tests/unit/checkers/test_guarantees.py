"""The guarantee envelope: which anomalies a config and the faults that happened permit."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from faultline.checkers.faults_seen import (
    MetadataState,
    faults_by_partition,
    faults_of,
    nemesis_actions,
    nodes_of,
)
from faultline.checkers.guarantees import (
    ISO_ACK,
    ISO_READS,
    GuaranteeConfig,
    elr_enabled,
    forbidden,
    permitted,
    rules,
)
from faultline.checkers.partition_faults import PartitionFaults
from faultline.checkers.queue import check
from faultline.checkers.result import ANOMALIES
from tests.unit.checkers.queue_hist import H, make_spec


def cfg(**kw: Any) -> GuaranteeConfig:
    return GuaranteeConfig(**kw)


def faults(*fs: str, **kw: Any) -> PartitionFaults:
    h = H()
    for f in fs:
        h.fault(f, **kw)
    return faults_of(h.ops)


def test_from_spec_reads_topic_and_producer_settings() -> None:
    c = GuaranteeConfig.from_spec(make_spec(acks="1", min_insync=1, unclean=True, in_flight=3))
    assert c == GuaranteeConfig(acks="1", min_insync_replicas=1, replication_factor=3,
                                unclean_leader_election_enable=True, enable_idempotence=False,
                                max_in_flight=3, retries=2147483647)


def test_the_issue_examples() -> None:
    kills = faults("kill")
    assert "lost-write" in permitted(cfg(acks="1", enable_idempotence=False), kills)
    assert "lost-write" not in permitted(cfg(acks="all", min_insync_replicas=2), kills)


@pytest.mark.parametrize("min_insync", [1, 2, 3])
@pytest.mark.parametrize("fault", ["kill", "pause", "stop", "partition", "toxic"])
def test_acks_all_clean_elections_lose_nothing_to_process_or_network_faults(
        min_insync: int, fault: str) -> None:
    p = permitted(cfg(acks="all", min_insync_replicas=min_insync), faults(fault))
    assert p == {}


def faulted(n: int) -> PartitionFaults:
    """The faults of a partition on which n distinct replicas were faulted."""
    return PartitionFaults(faulted=n)


def fenced(n: int) -> PartitionFaults:
    """The faults of a partition on which faults fenced (or restarted uncleanly) n
    distinct replicas."""
    return PartitionFaults(fenced=n)


def saw(*families: str, leader: bool = False, data_loss: int = 0) -> PartitionFaults:
    """The faults of a partition that saw ``families``, a fault of its leader (``leader``)
    and data destroyed on ``data_loss`` replicas at once."""
    return PartitionFaults(frozenset(families), leader, data_loss=data_loss)


NONE = PartitionFaults()


def test_data_loss_on_min_insync_nodes_permits_committed_loss() -> None:
    c = cfg(acks="all", min_insync_replicas=2)
    assert "lost-write" not in permitted(c, faults("wipe", nodes=[1]))
    two = faults_of([*_wipe([1]), *_wipe([2], start=10)])
    assert two.data_loss >= 2
    # Corrected (issue 17): two wipes alone no longer permit it. The third replica, never
    # faulted, stays in the ISR with every committed record; only with every replica
    # faulted (3 faulted) may committed data go. Without the metadata log, a node
    # fault leaves every replica possibly out of step (5 faulted).
    counted = replace(two, faulted=0)
    assert "lost-write" not in permitted(c, counted | faulted(2))
    assert "lost-write" in permitted(c, two)
    p = permitted(c, two | faulted(3))
    assert {"lost-write", "phantom-read", "inconsistent-offsets", "nonmonotonic-poll",
            "poll-skip"} <= set(p)
    assert "min.insync" in p["lost-write"]
    assert "lost-write" in permitted(c, faults("lose-unflushed", nodes=[1, 3]) | faulted(3))


def _wipe(nodes: list[int], start: int = 0) -> list[Any]:
    h = H()
    h.t = start
    h.fault("wipe", nodes)
    return h.ops


S = 1_000_000_000


def _wipes_1_then_2(isr: dict[int, list[tuple[int, frozenset[int]]]] | None,
                    partition: int = 0) -> PartitionFaults:
    """Node 1 wiped at 0 s, node 2 at 10 s; ``isr`` as the metadata log gives it
    (partition -> ``[(time, ISR)]``, leader 1 throughout); the faults of ``partition``."""
    timeline = None if isr is None else {
        ("fl-queue", p): [MetadataState(t, 1, members) for t, members in changes]
        for p, changes in isr.items()}
    return faults_of([*_wipe([1]), *_wipe([2], start=10 * S)], timeline, ("fl-queue", partition))


ALL = frozenset({1, 2, 3})


@pytest.mark.parametrize(("timeline", "partition", "most"), [
    # no broker state: a destroyed node counts for the rest of the run
    (None, 0, 2),
    # node 1 left the ISR at 2 s and was back at 5 s: caught up before node 2's wipe
    ({0: [(-S, ALL), (2 * S, frozenset({2, 3})), (5 * S, ALL)]}, 0, 1),
    # ... but never back: both destroyed at once
    ({0: [(-S, ALL), (2 * S, frozenset({2, 3}))]}, 0, 2),
    # out of the ISR only within the clock margin of its wipe (maybe before it): not trusted
    ({0: [(-S, ALL), (S // 5, frozenset({2, 3})), (5 * S, ALL)]}, 0, 2),
    # back only within the clock margin of the second wipe: not trusted
    ({0: [(2 * S, frozenset({2, 3})), (10 * S - 1, ALL)]}, 0, 2),
    # never seen to leave (an ISR change the log did not record): not trusted
    ({0: [(-S, ALL), (5 * S, ALL)]}, 0, 2),
    # back in partition 0's ISR but not in partition 1's: partition 1 had two at once
    ({0: [(2 * S, frozenset({2, 3})), (5 * S, ALL)], 1: [(2 * S, frozenset({2, 3}))]}, 0, 1),
    ({0: [(2 * S, frozenset({2, 3})), (5 * S, ALL)], 1: [(2 * S, frozenset({2, 3}))]}, 1, 2),
])
def test_a_destroyed_node_stops_counting_once_the_metadata_log_shows_it_back_in_the_isr(
        timeline: dict[int, list[tuple[int, frozenset[int]]]] | None, partition: int,
        most: int) -> None:
    f = _wipes_1_then_2(timeline, partition)
    assert f.data_loss == most
    c = cfg(acks="all", min_insync_replicas=2)
    assert ("lost-write" in permitted(c, f | faulted(3))) == (most >= 2)


def test_a_data_loss_op_naming_no_nodes_is_assumed_to_hit_all() -> None:
    h = H()
    h.op("nemesis", "info", "wipe", {})
    h.op("nemesis", "info", "wipe", {})
    assert faults_of(h.ops).data_loss >= 5


def test_unclean_election_with_a_leader_fault_and_every_replica_faulted_permits_committed_loss(
        ) -> None:
    # Corrected (issue 17): it was permitted after any node fault. An unclean election
    # needs every ISR member gone: the leader faulted, and no untouched replica left in sync.
    c = cfg(acks="all", unclean_leader_election_enable=True)
    assert permitted(c, NONE) == {}
    assert permitted(c, faults("toxic")) == {}
    p = permitted(c, saw("kill", leader=True) | faulted(3) | fenced(3))
    assert {"lost-write", "phantom-read", "inconsistent-offsets", "nonmonotonic-poll",
            "poll-skip"} == set(p)


def test_acks_1_permits_loss_after_a_leader_fault_but_not_lost_reads() -> None:
    c = cfg(acks="1", enable_idempotence=False)
    r = rules(c, faults("kill"))
    assert "lost-write" in r and ISO_ACK in r and ISO_READS not in r
    assert "phantom-read" not in r and "poll-skip" not in r
    assert "only where an ack is involved" in r["inconsistent-offsets"]
    assert "lost-write" not in rules(c, faults("toxic"))


COMMITTED_READS = {"phantom-read", "nonmonotonic-poll", "poll-skip"}
COMMITTED_LOSS = {"lost-write", *COMMITTED_READS}


@pytest.mark.parametrize("version", ["3.9.1", "4.3.1"])
@pytest.mark.parametrize("acks", ["1", "all"])
def test_a_follower_only_wipe_does_not_permit_committed_loss(version: str, acks: str) -> None:
    # Corrected (issue 17; the old test said the opposite without ELR): the leader, never
    # faulted, keeps every committed record; losing one needs the leader replaced. The
    # model agrees ("data-loss-needs-leader-fault"): wiping followers loses nothing.
    c = cfg(acks=acks, enable_idempotence=False, min_insync_replicas=2,
            eligible_leader_replicas=elr_enabled(version))
    for touched in (1, 2, 3):  # even with the other replicas paused too
        r = rules(c, saw("wipe", "pause", data_loss=2) | faulted(touched))
        assert not COMMITTED_LOSS & set(r), (touched, r)
    wiped_leader = saw("wipe", "pause", leader=True, data_loss=1) | faulted(3)
    assert ("phantom-read" in rules(c, wiped_leader)) == (version == "3.9.1")


@pytest.mark.parametrize("acks", ["1", "all"])
def test_with_elr_committed_data_needs_min_insync_wiped_nodes(acks: str) -> None:
    # Corrected (issue 17): the old test wiped two followers of an untouched leader and
    # expected loss; with ELR, committed data is on min.insync replicas, so two must be
    # wiped, the leader among the faulted, and the third replica faulted too.
    c = cfg(acks=acks, enable_idempotence=False, min_insync_replicas=2)
    one = saw("wipe", "pause", leader=True, data_loss=1) | faulted(3)
    assert "phantom-read" not in rules(c, one)
    assert "phantom-read" in rules(c, replace(one, data_loss=2))
    assert "phantom-read" not in rules(c, replace(one, leader_fault=False, data_loss=2))
    assert "phantom-read" not in rules(c, replace(one, data_loss=2, faulted=2))


@pytest.mark.parametrize("elr", [False, True])
def test_kill_3_and_wipe_1_with_node_2_untouched_does_not_permit_committed_loss(elr: bool) -> None:
    # Corrected (issue 17): "any kill makes one wipe enough" excused this. Node 2 is never
    # faulted, stays in the ISR with every committed record and is elected. The model's
    # cell kill+wipe+leader-fault faulted<=2 finds no committed loss, with or without ELR.
    c = cfg(acks="all", min_insync_replicas=2, eligible_leader_replicas=elr)
    two = saw("kill", "wipe", leader=True, data_loss=1) | faulted(2)
    assert not COMMITTED_LOSS & set(rules(c, two))
    assert "no fault touched" in forbidden(c, two)["lost-write"]


@pytest.mark.parametrize("elr", [False, True])
def test_with_every_replica_faulted_a_kill_makes_one_wiped_node_enough(elr: bool) -> None:
    # A kill's unclean restart drops its replica from the ELR with its log intact; with
    # ISR and ELR empty the wiped last leader is elected (the model's
    # elr-unclean-restart-loss and killed-out-wipe-leader: crash(2) crash(3) ... wipe(1)).
    c = cfg(acks="all", min_insync_replicas=2, eligible_leader_replicas=elr)
    r = rules(c, saw("kill", "wipe", leader=True, data_loss=1) | faulted(3) | fenced(3))
    assert set(r) >= COMMITTED_LOSS
    assert ("kill's unclean restart" in r["lost-write"]) == elr
    assert "lost-write" not in rules(c, saw("kill", leader=True) | faulted(3))


@pytest.mark.parametrize("elr", [False, True])
@pytest.mark.parametrize("acks", ["1", "all"])
def test_an_unclean_election_is_permitted_only_with_a_leader_fault(elr: bool, acks: str) -> None:
    c = cfg(acks=acks, enable_idempotence=False, min_insync_replicas=1,
            unclean_leader_election_enable=True, eligible_leader_replicas=elr)
    # (with acks=1 a leader fault alone permits lost-write: reads below the HW tell)
    followers = saw("kill", "pause", "partition") | faulted(2) | fenced(2)
    assert not COMMITTED_READS & set(rules(c, followers))
    assert not COMMITTED_READS & set(rules(c, followers | faulted(3) | fenced(3)))
    assert not COMMITTED_READS & set(rules(c, saw("kill", leader=True) | faulted(1) | fenced(1)))
    assert set(rules(c, saw("kill", leader=True) | faulted(3) | fenced(1))) >= COMMITTED_READS


def test_acks_0_acks_carry_no_offset_to_disagree_on() -> None:
    c = cfg(acks="0", enable_idempotence=False, eligible_leader_replicas=False)
    assert "inconsistent-offsets" not in permitted(c, saw("kill", leader=True) | faulted(1))
    assert "inconsistent-offsets" in permitted(
        c, saw("wipe", leader=True, data_loss=1) | faulted(3))


@pytest.mark.parametrize(("version", "elr"), [("4.0.2", False), ("4.1.0", True), ("4.3.1", True)])
def test_elr_follows_the_kafka_version(version: str, elr: bool) -> None:
    assert elr_enabled(version) is elr


def test_acks_0_always_permits_lost_writes() -> None:
    assert "lost-write" in permitted(cfg(acks="0", enable_idempotence=False), NONE)


def test_duplicate_and_nonmonotonic_send_rules() -> None:
    assert "duplicate" not in permitted(cfg(), NONE)
    off = cfg(enable_idempotence=False)
    assert {"duplicate", "nonmonotonic-send"} <= set(permitted(off, NONE))
    assert "nonmonotonic-send" not in permitted(cfg(enable_idempotence=False, max_in_flight=1),
                                                NONE)
    no_retries = cfg(enable_idempotence=False, retries=0)
    assert not {"duplicate", "nonmonotonic-send"} & set(permitted(no_retries, NONE))
    assert "duplicate" in permitted(cfg(), saw("producer-restart"))


def test_aborted_read_and_unexpected_value_are_never_permitted() -> None:
    every_fault = faults("kill", "pause", "stop", "partition", "toxic", "wipe",
                         "lose-unflushed") | saw("producer-restart")
    for acks, mi, unclean, idem, fl in itertools.product(
            ("0", "1", "all"), (1, 2, 3), (False, True), (False, True), (NONE, every_fault)):
        p = permitted(cfg(acks=acks, min_insync_replicas=mi, unclean_leader_election_enable=unclean,
                          enable_idempotence=idem), fl)
        assert "aborted-read" not in p and "unexpected-value" not in p
        assert set(p) <= set(ANOMALIES)
        assert all(isinstance(reason, str) and reason for reason in p.values())


def test_leader_fault_needs_a_recorded_leader_when_leaders_are_recorded() -> None:
    assert faults("kill", nodes=[2]).leader_fault  # not recorded: assumed
    assert faults("kill", nodes=[2], leaders={"fl-queue/0": 2}).leader_fault
    assert not faults("kill", nodes=[2], leaders={"fl-queue/0": 1}).leader_fault
    assert not faults("toxic").leader_fault


def test_leaders_recorded_on_the_completion_only_count() -> None:
    h = H()
    h.op("nemesis", "info", "kill", {"nodes": [2]})
    h.op("nemesis", "info", "kill", {"nodes": [2], "leaders": {"fl-queue/0": 1}})
    assert "kill" in faults_of(h.ops).families and not faults_of(h.ops).leader_fault


def test_nemesis_actions_pair_by_f_and_keep_unfinished_ones() -> None:
    h = H()
    h.op("nemesis", "info", "kill", {"nodes": [1]})
    h.op("nemesis", "info", "partition", {"grudge": {"1": [2]}})
    h.op("nemesis", "info", "kill", {"nodes": [1], "result": "ok"})
    actions = nemesis_actions(h.ops)
    assert [(a.f, a.end is None) for a in actions] == [("kill", False), ("partition", True)]
    assert actions[0].value == {"nodes": [1], "result": "ok"}
    assert {"kill", "partition"} <= faults_of(h.ops).families and faults_of(h.ops).leader_fault


def test_nodes_of_a_grudge() -> None:
    assert nodes_of({"grudge": {"1": [2, 3], "2": [1], "3": []}}) == [1, 2, 3]
    assert nodes_of({"nodes": [4]}) == [4]
    assert nodes_of({}) == []


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("fault_set", [(), ("kill",), ("wipe", "partition")])
def test_every_type_is_either_permitted_or_forbidden_with_a_reason(
        acks: str, fault_set: tuple[str, ...]) -> None:
    c = cfg(acks=acks, enable_idempotence=acks == "all")
    h = H()
    for f in fault_set:
        h.fault(f, [1])
    fs = faults_of(h.ops)
    allowed, denied = permitted(c, fs), forbidden(c, fs)
    assert set(allowed) | set(denied) == set(ANOMALIES)
    assert not set(allowed) & set(denied)
    assert all(denied.values())


def test_a_forbidden_lost_write_names_the_guarantee_that_held() -> None:
    c = cfg(acks="all", min_insync_replicas=2)
    why = forbidden(c, saw("kill", leader=True) | faulted(3))["lost-write"]
    assert "min.insync.replicas=2" in why and "unclean" in why
    assert "leader" in forbidden(c, saw("kill") | faulted(2))["lost-write"]


def _lose_unflushed(cut: dict[str, tuple[int, int]], nodes: list[int] | None = None) -> H:
    """A lose-unflushed of node 1 (the leader) that cut each partition's log from its
    old end to its new one, then the other replicas paused."""
    h = H()
    truncated = {tp: {"recovery_point": new, "old_end": old, "new_end": new, "bytes_removed": old - new}
                 for tp, (old, new) in cut.items()}
    h.fault("lose-unflushed", nodes or [1], leaders={"fl-queue/0": 1, "fl-queue/1": 1},
            truncated=truncated)
    h.fault("pause", [2])
    h.fault("pause", [3])
    return h


def test_a_lose_unflushed_that_cut_nothing_from_a_partition_is_a_kill_there() -> None:
    """Found by review: its data-loss was credited to every partition of the node, so a
    partition whose log was wholly flushed had its losses excused (no ELR, one copy)."""
    c = cfg(acks="all", min_insync_replicas=2, eligible_leader_replicas=False)
    acts = nemesis_actions(_lose_unflushed({"fl-queue/0": (8, 8), "fl-queue/1": (8, 4)}).ops)
    tps = [("fl-queue", 0), ("fl-queue", 1)]
    flushed, cut = (faults_by_partition(acts, tps)[tp] for tp in tps)
    assert "kill" in flushed.families and "lose-unflushed" not in flushed.families
    assert flushed.data_loss == 0
    assert "lost-write" not in permitted(c, flushed)
    assert "lose-unflushed" in cut.families and cut.data_loss >= 1 and "lost-write" in permitted(c, cut)


@pytest.mark.parametrize("nodes", [[1], [1, 2]])
def test_a_lose_unflushed_is_data_loss_unless_it_says_plainly_it_cut_nothing(nodes: list[int]) -> None:
    """No entry for the partition, or an op of several nodes (whose entries the journal
    does not tell apart): it may have cut, so it counts."""
    acts = nemesis_actions(_lose_unflushed({"fl-queue/1": (8, 8)}, nodes).ops)
    assert faults_by_partition(acts, [("fl-queue", 0)])[("fl-queue", 0)].data_loss >= 1
    acts = nemesis_actions(_lose_unflushed({"fl-queue/0": (8, 8)}, nodes).ops)
    assert (faults_by_partition(acts, [("fl-queue", 0)])[("fl-queue", 0)].data_loss >= 1) == (
        len(nodes) > 1)


ISOLATE_3 = {"3": [1, 2], "1": [3], "2": [3]}


def test_isolating_a_follower_faults_only_it() -> None:
    """Found by review: a grudge credited every node on both sides, so isolating a
    follower was a fault on every partition's leader (acks=1: every loss excused). As
    the model's isolate(3): only node 3 is touched; its leader 1 keeps the quorum."""
    h = H()
    h.fault("partition", [1, 2, 3], grudge=ISOLATE_3, leaders={"fl-queue/0": 1, "fl-queue/1": 3})
    acts = nemesis_actions(h.ops)
    p0, p1 = (faults_by_partition(acts, [tp])[tp] for tp in [("fl-queue", 0), ("fl-queue", 1)])
    assert "partition" in p0.families and not p0.leader_fault
    assert "lost-write" not in permitted(cfg(acks="1", enable_idempotence=False), p0)
    assert p1.leader_fault  # node 3 led partition 1: it was cut off from the quorum


def test_halves_touch_no_partition_whose_replicas_are_all_on_the_majority_side() -> None:
    h = H()
    grudge = {"1": [2, 3, 4], "5": [2, 3, 4], "2": [1, 5], "3": [1, 5], "4": [1, 5]}
    h.fault("partition", [1, 2, 3, 4, 5], grudge=grudge, leaders={"fl-queue/0": 2})
    majority = frozenset({2, 3, 4})
    timeline = {("fl-queue", 0): [MetadataState(-10**10, 2, majority, majority)]}
    f = faults_by_partition(nemesis_actions(h.ops), [("fl-queue", 0)], timeline)[("fl-queue", 0)]
    assert f == NONE


@pytest.mark.parametrize("grudge", [
    {"1": [3], "3": [1]},  # a bridge: 2 sees both
    {"1": [2], "2": [1]},  # no side holds a majority of the nodes named
    {"1": [2, 3], "2": [1], "3": [1, 2]},  # 2 and 3 sit on one side but are cut too
])
def test_a_grudge_that_is_no_clean_split_with_a_majority_touches_every_node_it_names(
        grudge: dict[str, list[int]]) -> None:
    h = H()
    h.fault("partition", [1, 2, 3], grudge=grudge, leaders={"fl-queue/0": 1})
    assert faults_of(h.ops).leader_fault


def test_without_idempotence_a_leader_fault_permits_duplicates_even_with_retries_0() -> None:
    """Found by review: librdkafka re-sends after NOT_LEADER_OR_FOLLOWER (or a fenced
    broker) without counting a retry, so retries=0 does not mean once; the table said
    nothing is sent twice and a real client re-send read as a violation."""
    c = cfg(acks="all", enable_idempotence=False, retries=0, max_in_flight=1)
    assert "duplicate" in permitted(c, saw("kill", leader=True) | faulted(1))
    assert "duplicate" not in permitted(c, saw("kill") | faulted(1))  # a follower's
    assert "duplicate" not in permitted(cfg(acks="0", enable_idempotence=False, retries=0),
                                        saw("kill", leader=True))
    assert "duplicate" not in permitted(cfg(acks="all"), saw("kill", leader=True))
    java = cfg(acks="all", enable_idempotence=False, retries=0, max_in_flight=1, client="java")
    assert "duplicate" not in permitted(java, saw("kill", leader=True) | faulted(1))


@pytest.mark.parametrize("fault", ["wipe", "lose-unflushed"])
def test_with_elr_and_min_insync_3_two_destroyed_copies_do_not_pass_over_the_third(fault: str) -> None:
    """Found by review: with min.insync.replicas=3 every replica leaving the ISR joins the
    ELR with every committed record; two unclean restarts leave the third there, and it
    is elected before any unclean candidate. A "second destroyed copy" was taken to
    pass over the ELR and excused the loss (the model agrees: none)."""
    c = cfg(acks="all", min_insync_replicas=3, unclean_leader_election_enable=True,
            eligible_leader_replicas=True)
    two = saw(fault, leader=True, data_loss=2) | faulted(3)
    assert not COMMITTED_LOSS & set(permitted(c, two))
    assert set(permitted(c, replace(two, data_loss=3))) >= COMMITTED_LOSS
    two_of_2 = cfg(acks="all", min_insync_replicas=2, unclean_leader_election_enable=True,
                   eligible_leader_replicas=True)
    assert set(permitted(two_of_2, two)) >= COMMITTED_LOSS  # min.insync=2: unchanged


def test_a_stop_credits_a_kill_only_to_partitions_of_the_nodes_it_had_to_kill() -> None:
    """Found by review: one node of a multi-node stop SIGKILLed credited a kill (with ELR:
    one destroyed copy enough) to partitions of the nodes that stopped cleanly."""
    h = H()
    h.fault("stop", [1, 2], killed=[2])
    acts = nemesis_actions(h.ops)
    timeline = {("fl-queue", p): [MetadataState(-10**10, 1, frozenset(r), frozenset(r))]
                for p, r in ((0, {1, 3, 4}), (1, {2, 3, 4}))}
    tps = [("fl-queue", 0), ("fl-queue", 1)]
    clean, killed = (faults_by_partition(acts, tps, timeline)[tp] for tp in tps)
    assert "stop" in clean.families and "kill" not in clean.families
    assert {"stop", "kill"} <= killed.families


@pytest.mark.parametrize("ending", ["error", "none"])
def test_a_stop_that_failed_or_never_completed_may_have_been_a_kill(ending: str) -> None:
    """Found by review: a stop whose completion was an error (the engine's stop call timed
    out after it had SIGKILLed, a state write failed after the escalation) or never came
    (the run died) names no ``killed`` nodes, and was credited as a graceful stop only,
    though the backend may have had to SIGKILL (with ELR a kill makes one destroyed copy
    enough: a permitted loss read as a violation)."""
    h = H()
    h.op("nemesis", "info", "stop", {"nodes": [1]})
    if ending == "error":
        h.op("nemesis", "info", "stop", {"nodes": [1]}, error="ReadTimeout: the engine did not answer")
    assert {"stop", "kill"} <= faults_of(h.ops).families


#: ``hold followers of 0`` on 3 nodes, leader 1: the replication grudge it journals.
HOLD_FOLLOWERS = {"1": [2, 3], "2": [1], "3": [1]}
UNCLEAN_ELR = {"acks": "all", "unclean_leader_election_enable": True, "eligible_leader_replicas": True}


def _then_kill_leader(h: H) -> PartitionFaults:
    h.fault("kill", [1], kind="kill", leaders={"fl-queue/0": 1})
    return faults_of(h.ops)


def test_with_elr_a_hold_fences_no_follower_so_killing_the_leader_passes_over_no_elr() -> None:
    """Found by review: a hold (replication only) gave the ``partition`` token, which was
    taken to fence the ELR. The held followers keep heartbeating, stay registered and
    unfenced, join the ELR as the ISR shrinks below min.insync.replicas, and are elected
    from it when the leader is killed (PartitionChangeBuilder.isValidNewLeader): no
    unclean candidate is reached, and the model's cut(1,2) cut(1,3) ... crash(1) loses
    nothing at min.insync=2. At min.insync=1 the leader alone is the ISR, so killing it
    leaves no unfenced ISR or ELR member, and an unclean election may lose data."""
    h = H()
    h.fault("partition", [1, 2, 3], kind="hold", grudge={}, replication=HOLD_FOLLOWERS,
            leaders={"fl-queue/0": 1})
    held = _then_kill_leader(h)
    assert {"partition", "kill"} <= held.families and held.leader_fault and held.faulted >= 3
    assert not COMMITTED_LOSS & set(permitted(cfg(min_insync_replicas=2, **UNCLEAN_ELR), held))
    assert set(permitted(cfg(min_insync_replicas=1, **UNCLEAN_ELR), held)) >= COMMITTED_LOSS
    no_elr = cfg(min_insync_replicas=2, **{**UNCLEAN_ELR, "eligible_leader_replicas": False})
    assert set(permitted(no_elr, held)) >= COMMITTED_LOSS  # without ELR: unchanged


def test_with_elr_pausing_both_followers_and_killing_the_leader_may_pass_over_the_elr() -> None:
    h = H()
    h.fault("pause", [2, 3], kind="pause", leaders={"fl-queue/0": 1})
    paused = _then_kill_leader(h)
    assert set(permitted(cfg(min_insync_replicas=2, **UNCLEAN_ELR), paused)) >= COMMITTED_LOSS


def test_with_elr_killing_the_leader_alone_does_not_pass_over_the_elr_of_lagged_followers() -> None:
    """Found by review: one fencing fault on one replica was taken to pass over the whole
    ELR. Here 2 and 3 lag out of the ISR (the metadata log shows it: every replica
    faulted) and only leader 1 is killed: the ISR and ELR hold at least min.insync=2
    replicas with every committed record, so an unfenced one of them is elected before
    any unclean candidate (the model's lagged schedule loses nothing at min.insync=2)."""
    replicas = frozenset({1, 2, 3})
    timeline = {("fl-queue", 0): [MetadataState(-10**10, 1, replicas, replicas),
                                  MetadataState(-10**9, 1, frozenset({1, 2}), replicas),
                                  MetadataState(-10**8, 1, frozenset({1}), replicas)]}
    h = H()
    h.fault("kill", [1], kind="kill", leaders={"fl-queue/0": 1})
    tp = ("fl-queue", 0)
    one = faults_by_partition(nemesis_actions(h.ops), [tp], timeline)[tp]
    assert "kill" in one.families and one.leader_fault and one.faulted >= 3
    assert not COMMITTED_LOSS & set(permitted(cfg(min_insync_replicas=2, **UNCLEAN_ELR), one))
    assert set(permitted(cfg(min_insync_replicas=1, **UNCLEAN_ELR), one)) >= COMMITTED_LOSS
    # the same by counts: fences of as many replicas as min.insync.replicas pass it over
    given = saw("kill", leader=True) | faulted(3)
    assert not COMMITTED_LOSS & set(permitted(cfg(min_insync_replicas=2, **UNCLEAN_ELR), given))
    assert set(permitted(cfg(min_insync_replicas=2, **UNCLEAN_ELR),
                         given | fenced(2))) >= COMMITTED_LOSS


def test_fenced_counts_the_replicas_a_fencing_fault_touched_and_a_hold_touches_none() -> None:
    h = H()
    h.fault("partition", [1, 2, 3], kind="hold", grudge={}, replication=HOLD_FOLLOWERS)
    assert faults_of(h.ops).fenced == 0
    h.fault("pause", [2], kind="pause")
    h.fault("kill", [3], kind="kill")
    h.fault("stop", [2], kind="stop")  # 2 again: distinct replicas count
    assert faults_of(h.ops).fenced == 2
    h.fault("partition", [1, 2, 3], kind="isolate", grudge={"1": [2, 3], "2": [1], "3": [1]})
    assert faults_of(h.ops).fenced >= 3  # the isolate cut 1 off from the majority {2, 3}
    unnamed = H()
    unnamed.op("nemesis", "info", "kill", {})
    unnamed.op("nemesis", "info", "kill", {"result": "done"})
    assert faults_of(unnamed.ops).fenced >= 5  # an op naming no node: any may have been


def test_with_elr_a_kill_and_a_wipe_of_the_same_leader_leave_a_held_follower_in_the_elr() -> None:
    """Found by review: any kill made one wiped replica enough. Emptying ISR and ELR, so
    that the wiped last known leader is elected, takes unclean restarts of all their
    members, min.insync.replicas of them; here only leader 1 is killed and then wiped,
    held follower 2 stays unfenced in the ELR and is elected (the model's _LAGGED
    cut(1,2) ... crash(1) restart(1) ... wipe(1) loses nothing)."""
    h = H()
    h.fault("partition", [1, 2, 3], kind="hold", grudge={}, replication=HOLD_FOLLOWERS,
            leaders={"fl-queue/0": 1})
    h.fault("kill", [1], kind="kill", leaders={"fl-queue/0": 1})
    h.fault("wipe", [1], kind="wipe", leaders={"fl-queue/0": 2})
    same = faults_of(h.ops)
    assert {"kill", "wipe"} <= same.families and same.data_loss >= 1 and same.faulted >= 3
    assert same.fenced == 1
    for unclean in (False, True):
        c = cfg(acks="all", min_insync_replicas=2, unclean_leader_election_enable=unclean,
                eligible_leader_replicas=True)
        assert not COMMITTED_LOSS & set(permitted(c, same))
        assert set(permitted(c, same | fenced(2))) >= COMMITTED_LOSS  # 2 killed too


def test_with_elr_an_unclean_election_the_metadata_log_shows_passes_over_the_elr() -> None:
    """The other direction of counting fences: a broker fenced by no fault the nemesis
    injected (a JVM stalled past broker.session.timeout.ms on a loaded machine) is not
    counted, yet the controller did elect uncleanly. The metadata log says so (leader 3
    from neither ISR {1} nor ELR {2}): the ELR was passed over, whatever fenced 2, and a
    committed loss is permitted, not a false violation. A clean election from the ELR
    (leader 2) passes over nothing."""
    replicas = frozenset({1, 2, 3})

    def after(new_leader: int) -> PartitionFaults:
        timeline = {("fl-queue", 0): [
            MetadataState(-10**10, 1, replicas, replicas),
            MetadataState(-10**9, 1, frozenset({1}), replicas, frozenset({2})),
            MetadataState(10**12, new_leader, frozenset({new_leader}), replicas)]}
        h = H()
        h.fault("kill", [1], kind="kill", leaders={"fl-queue/0": 1})
        tp = ("fl-queue", 0)
        return faults_by_partition(nemesis_actions(h.ops), [tp], timeline)[tp]

    c = cfg(min_insync_replicas=2, **UNCLEAN_ELR)
    assert set(permitted(c, after(3))) >= COMMITTED_LOSS
    assert not COMMITTED_LOSS & set(permitted(c, after(2)))


def test_a_hold_of_the_leader_is_no_leader_fault_where_the_metadata_log_shows_no_election() -> None:
    """Found by review: a hold touching the leader gave ``leader-fault``, which excuses an
    acks=1 loss. A hold cuts only inter-broker traffic: the leader keeps heartbeating,
    stays unfenced and in the ISR, so the controller keeps it
    (PartitionChangeBuilder.electAnyLeader keeps a leader that is still valid), and a
    leader truncates only on becoming a follower, which the metadata log would show.
    Without the log the hold may still have ended in an election nobody saw: the
    permissive reading keeps ``leader-fault``, the strict one does not."""
    tp = ("fl-queue", 0)
    replicas = frozenset({1, 2, 3})
    timeline = {tp: [MetadataState(-10**10, 1, replicas, replicas),
                     MetadataState(10**12, 1, frozenset({1}), replicas)]}
    h = H()
    h.fault("partition", [1, 2, 3], kind="hold", grudge={}, replication=HOLD_FOLLOWERS,
            leaders={"fl-queue/0": 1})
    actions = nemesis_actions(h.ops)
    held = faults_by_partition(actions, [tp], timeline)[tp]
    assert "partition" in held.families and not held.leader_fault
    assert "lost-write" not in permitted(cfg(acks="1"), held)
    # the metadata log shows an election: that is a leader fault whatever caused it
    moved = {tp: [*timeline[tp], MetadataState(2 * 10**12, 2, frozenset({2}), replicas)]}
    assert faults_by_partition(actions, [tp], moved)[tp].leader_fault
    # no metadata log: the permissive reading assumes an election, the strict one does not
    assert faults_by_partition(actions, [tp])[tp].leader_fault
    assert not faults_by_partition(actions, [tp], strict=True)[tp].leader_fault


@pytest.mark.parametrize(("family", "kind", "leads_on"), [
    ("pause", "pause", False), ("partition", "isolate-node", False),
    ("kill", "kill", True), ("stop", "stop", True), ("lose-unflushed", "lose-unflushed", True)])
def test_a_fault_that_keeps_the_leaders_process_is_a_leader_fault_only_by_an_election(
        family: str, kind: str, leads_on: bool) -> None:
    """A pause or a network partition of the leader leaves its process and log alone: it
    loses what only it had (an acks=1 loss) only by becoming a follower, an election the
    metadata log shows; where the log covers the fault and shows none, the fault is no
    leader fault. A kill, stop or lose-unflushed is one all the same: a leader restarted
    before the controller fenced it may lead again with what its log kept, no election
    recorded. Where the log does not cover the fault, the fencing fault still counts."""
    tp = ("fl-queue", 0)
    replicas = frozenset({1, 2, 3})
    timeline = {tp: [MetadataState(-10**10, 1, replicas, replicas),
                     MetadataState(10**12, 1, frozenset({1}), replicas)]}
    h = H()
    extra = {"grudge": {"1": [2, 3], "2": [1], "3": [1]}, "target": 1} if family == "partition" else {}
    h.fault(family, [1], kind=kind, leaders={"fl-queue/0": 1}, **extra)
    actions = nemesis_actions(h.ops)
    for strict in (False, True):
        seen = faults_by_partition(actions, [tp], timeline, strict=strict)[tp]
        assert seen.leader_fault is leads_on, strict
    assert faults_by_partition(actions, [tp])[tp].leader_fault
    assert faults_by_partition(actions, [tp], strict=True)[tp].leader_fault


def _lost_on_the_lone_replica(fault: str) -> H:
    """Value 11 acknowledged, then a ``fault`` of node 1 (the partition's leader), and the
    drain holds only value 10."""
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.fault(fault, [1], leaders={"fl-queue/0": 1})
    h.fault("start", [1])
    h.drain([(0, 10)])
    return h


@pytest.mark.parametrize(("acks", "unclean"), [("1", False), ("1", True), ("all", True)])
def test_at_replication_factor_1_a_kill_of_the_leader_excuses_no_loss(acks: str, unclean: bool) -> None:
    """Issue 33: the acks=1 rule (a record only the leader had is truncated when another
    replica takes over) and the unclean rule (an out-of-sync replica is elected) assume
    another replica. At RF=1 every election, clean, last known leader or unclean, picks
    from the partition's one replica (PartitionChangeBuilder.electAnyLeader), whose log a
    SIGKILL leaves as it was (the page cache survives): the same loss permitted at RF=3
    is a violation, and a wipe, which destroys that log, still excuses it."""
    spec = make_spec(acks=acks, min_insync=1, unclean=unclean, rf=1)
    killed = check(spec, _lost_on_the_lone_replica("kill").ops)
    assert killed.valid is False and killed.violations == ["lost-write"]
    assert "replication.factor=1" in killed.extra["forbidden_reasons"]["lost-write"]
    wiped = check(spec, _lost_on_the_lone_replica("wipe").ops)
    assert wiped.valid is True and "replication.factor=1" in wiped.extra["permitted_reasons"]["lost-write"]
    rf3 = check(make_spec(acks=acks, min_insync=1, unclean=unclean), _lost_on_the_lone_replica("kill").ops)
    assert rf3.valid is not False


@pytest.mark.parametrize("elr", [False, True])
def test_at_replication_factor_1_only_destroyed_data_permits_loss(elr: bool) -> None:
    every = saw("kill", "pause", "stop", "partition", leader=True) | faulted(5) | fenced(5)
    for acks in ("1", "all"):
        c = cfg(acks=acks, min_insync_replicas=1, replication_factor=1, unclean_leader_election_enable=True,
                enable_idempotence=False, eligible_leader_replicas=elr)
        assert not COMMITTED_LOSS & set(permitted(c, every)), acks
        assert set(permitted(c, every | saw("wipe", data_loss=1))) >= COMMITTED_LOSS, acks
        assert "replication.factor=1" in forbidden(c, every)["lost-write"]
    acks0 = cfg(acks="0", replication_factor=1, enable_idempotence=False, eligible_leader_replicas=elr)
    assert "lost-write" in permitted(acks0, every)  # the producer never hears


#: ``hold node 3`` on 3 nodes: the replication grudge the scripted nemesis journals.
HOLD_3 = {"1": [3], "2": [3], "3": [1, 2]}
LEADERS_1 = {"fl-queue/0": 1}


def _acks1_lost_after(*steps: tuple[str, list[int], dict[str, Any]]) -> H:
    """acks=1: value 11 acknowledged, then each ``(kind, targets, network)`` step of a targeted
    schedule journaled as the scripted nemesis does (leader 1 throughout, the grudges in
    effect after the step), a heal, and a drain without value 11."""
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    for kind, targets, network in steps:
        h.fault("partition", [1, 2, 3], kind=kind, targets=targets, leaders=LEADERS_1,
                **{"grudge": {}, "replication": {}, **network})
    h.fault("heal", [1, 2, 3], kind="isolate")
    h.drain([(0, 10)])
    return h


def test_holding_then_isolating_a_follower_is_no_fault_of_its_leader() -> None:
    """Issue 33: an ``isolate`` beside a ``replication`` hold credited every node its grudges
    name, the untouched leader 1 among them (faulted, fenced and a leader fault), so holding
    then isolating follower 3 excused an acks=1 loss that isolating it alone does not.
    The isolate cuts 3 off from the majority {1, 2}, whose leader keeps the quorum; the hold
    held 3 alone. Isolating the leader itself still excuses it."""
    spec = make_spec(acks="1", min_insync=1)
    held_then_isolated = _acks1_lost_after(("hold", [3], {"replication": HOLD_3}),
                                           ("isolate", [3], {"grudge": ISOLATE_3, "replication": HOLD_3}))
    r = check(spec, held_then_isolated.ops)
    assert r.valid is False and r.violations == ["lost-write"]
    assert "partition" in r.extra["faults_seen"]
    assert not {"leader-fault", "fenced>=2"} & set(r.extra["faults_seen"])
    tp = ("fl-queue", 0)
    witnessed = faults_by_partition(nemesis_actions(held_then_isolated.ops), [tp], strict=True)[tp]
    assert witnessed.faulted == 1 and witnessed.fenced >= 1
    isolated = check(spec, _acks1_lost_after(("isolate", [3], {"grudge": ISOLATE_3})).ops)
    assert isolated.valid is False
    leader = _acks1_lost_after(("isolate", [1], {"grudge": {"1": [2, 3], "2": [1], "3": [1]}}))
    assert check(spec, leader.ops).valid is True


def test_a_hold_of_the_followers_is_no_leader_fault_even_where_no_metadata_log_covers_it() -> None:
    """A hold touches the nodes it held (its ``targets``): holding followers 2 and 3 leaves
    leader 1 unfenced and leading. It credited every node its replication grudge names,
    the leader among them, so that without the metadata log the permissive reading took it
    for a leader fault and an acks=1 loss was unknown; it is a violation. Holding the
    leader itself (the same grudge: ``targets`` say which side was held) stays unknown."""
    spec = make_spec(acks="1", min_insync=1)
    followers = check(spec, _acks1_lost_after(("hold", [2, 3], {"replication": HOLD_FOLLOWERS})).ops)
    assert followers.valid is False and followers.violations == ["lost-write"]
    leader = check(spec, _acks1_lost_after(("hold", [1], {"replication": HOLD_FOLLOWERS})).ops)
    assert leader.valid == "unknown"
    assert any(u["kind"] == "permitted-on-assumption" for u in leader.unknown)


@pytest.mark.parametrize(("isolated", "isr", "elected", "verdict"), [
    (3, {1, 2}, 2, False),  # 2 untouched: in the ISR throughout, elected cleanly
    (2, {1}, 3, True),  # 3 elected from outside ISR {1} and an empty ELR: unclean
])
def test_holding_then_isolating_a_follower_leaves_the_third_replica_untouched(
        isolated: int, isr: set[int], elected: int, verdict: bool) -> None:
    """acks=all, min.insync=2, unclean elections on: value 11 committed, follower 3 held at
    10 s, node ``isolated`` isolated at 20 s, leader 1 killed at 30 s, and the metadata log
    shows the ISR after the isolate and who was elected. The isolate beside the hold
    credited (and fenced) every node, so with node 2 never touched (isolating 3 again) the
    committed loss was excused as an unclean election: 2 stays in the ISR with every
    committed record and is elected cleanly, a violation. Isolating 2 instead leaves no
    replica untouched and 3 is elected uncleanly: permitted."""
    replicas = frozenset({1, 2, 3})
    log = [MetadataState(-10 * S, 1, replicas, replicas),
           MetadataState(15 * S, 1, frozenset({1, 2}), replicas),
           MetadataState(25 * S, 1, frozenset(isr), replicas),
           MetadataState(31 * S, elected, frozenset({elected}), replicas)]
    rest = sorted(replicas - {isolated})
    isolate = {str(isolated): rest, **{str(n): [isolated] for n in rest}}
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.t = 10 * S
    h.fault("partition", [1, 2, 3], kind="hold", targets=[3], leaders=LEADERS_1, grudge={},
            replication=HOLD_3)
    h.t = 20 * S
    h.fault("partition", [1, 2, 3], kind="isolate", targets=[isolated], leaders=LEADERS_1, grudge=isolate,
            replication=HOLD_3)
    h.t = 30 * S
    h.fault("kill", [1], kind="kill", leaders=LEADERS_1)
    h.t = 40 * S
    h.fault("heal", [1, 2, 3], kind="isolate")
    h.drain([(0, 10)])
    r = check(make_spec(acks="all", min_insync=2, unclean=True), h.ops, timeline={("fl-queue", 0): log})
    assert r.valid is verdict and r.anomaly_counts["lost-write"] == 1
