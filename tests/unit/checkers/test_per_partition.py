"""Verdicts judged per partition, from facts: which faults hit which partition's leader,
skipped faults, the metadata log's leaders and elections, and the replicas' logs as a
cross-check on the drain (a drain that stopped short decides nothing past its end)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from faultline.checkers.faults_seen import (
    MetadataState,
    NemesisAction,
    faults_by_partition,
    faults_of,
    leaders_between,
)
from faultline.checkers.guarantees import GuaranteeConfig, forbidden, permitted
from faultline.checkers.partition_faults import PartitionFaults
from faultline.checkers.queue import check
from faultline.checkers.result import UNKNOWN, Result
from tests.unit.checkers.queue_hist import TOPIC, H, make_spec

S = 1_000_000_000
ALL = frozenset({1, 2, 3})
P0, P1 = (TOPIC, 0), (TOPIC, 1)
#: Without the metadata log, a node fault leaves every replica possibly out of step.
UNKNOWN_STEP = [f"faulted>={n}" for n in range(1, 6)]


def acks1_two_partitions(lose_on: int, kill: int, leaders: dict[str, int]) -> H:
    """acks=1: value 12 acknowledged on partition ``lose_on`` and missing from its drain,
    after a kill of node ``kill`` whose leaders snapshot is ``leaders``."""
    h = H()
    for part in (0, 1):
        h.send(0, 10 + part * 10, offset=0, part=part)
    h.fault("kill", [kill], leaders=leaders)
    h.send(0, 12 if lose_on == 0 else 22, offset=1, part=lose_on)
    for part in (0, 1):
        h.drain([(0, 10 + part * 10)], part=part)
    return h


def run(h: H, acks: str = "1", **kw: Any) -> Result:
    return check(make_spec(acks=acks, min_insync=1, partitions=2), h.ops, **kw)


def test_a_forbidden_reason_is_said_only_of_the_partitions_it_is_true_of() -> None:
    """acks=all: lost-write is forbidden on both partitions, for different reasons: p0's
    leader was never hit, p1's was killed. results.json's run-wide reason must not say
    p0's ("no fault that could move the partition's leader hit it") of the whole run."""
    r = run(acks1_two_partitions(lose_on=0, kill=3, leaders={f"{TOPIC}/0": 2, f"{TOPIC}/1": 3}), acks="all")
    assert r.valid is False and r.violations == ["lost-write"]
    p0, p1 = r.extra["partitions"]
    assert "leader-fault" not in p0["faults"] and "leader-fault" in p1["faults"]
    config = GuaranteeConfig.from_spec(make_spec(acks="all", min_insync=1, partitions=2))
    why0, why1 = (forbidden(config, PartitionFaults.from_tokens(p["faults"]))["lost-write"] for p in (p0, p1))
    assert why0 != why1
    assert r.extra["forbidden_reasons"]["lost-write"] == f"{why0} (on {TOPIC}/0); {why1} (on {TOPIC}/1)"


def test_a_kill_of_another_partitions_leader_excuses_nothing() -> None:
    # The seed-21 shape: p0's leader (n2) never faulted, a kill hit p1's leader (n3).
    r = run(acks1_two_partitions(lose_on=0, kill=3, leaders={f"{TOPIC}/0": 2, f"{TOPIC}/1": 3}))
    assert r.valid is False and r.violations == ["lost-write"]
    p0, p1 = r.extra["partitions"]
    assert p0["violations"] == ["lost-write"] and "leader-fault" not in p0["faults"]
    assert p1["faults"] == [*UNKNOWN_STEP, "fenced>=1", "kill", "leader-fault"]
    assert "lost-write" in p1["permitted_reasons"]
    assert "(on fl-queue/1)" in r.extra["permitted_reasons"]["lost-write"]
    assert "(on fl-queue/0)" in r.extra["forbidden_reasons"]["lost-write"]


def test_the_same_loss_on_the_faulted_leaders_partition_is_permitted() -> None:
    r = run(acks1_two_partitions(lose_on=1, kill=3, leaders={f"{TOPIC}/0": 2, f"{TOPIC}/1": 3}))
    assert r.valid is True and r.anomaly_counts["lost-write"] == 1
    assert r.extra["partitions"][1]["anomaly_counts"] == {"lost-write": 1}
    assert r.anomalies["lost-write"][0]["permitted"] is True


def test_a_skipped_fault_permits_nothing() -> None:
    # The package journals a fault it could not plan with nodes: [] and result: skipped.
    h = H()
    h.op("nemesis", "info", "wipe", {"kind": "wipe"})
    h.op("nemesis", "info", "wipe", {"kind": "wipe", "nodes": [], "result": "skipped"},
         error="no node left to wipe")
    assert faults_of(h.ops) == PartitionFaults()
    assert permitted(GuaranteeConfig(acks="all", min_insync_replicas=2), faults_of(h.ops)) == {}


def test_a_fault_naming_no_node_that_was_not_skipped_still_assumes_the_worst() -> None:
    h = H()
    h.op("nemesis", "info", "wipe", {})
    h.op("nemesis", "info", "wipe", {"result": "wiped"})
    seen = faults_of(h.ops)
    assert "wipe" in seen.families and seen.leader_fault and seen.data_loss >= 5


def test_an_empty_leaders_snapshot_is_no_witness() -> None:
    # leaders_snapshot gives {} when the cluster did not answer: it proves nothing.
    h = H()
    h.fault("kill", [2], leaders={})
    assert faults_of(h.ops).leader_fault



def test_an_anomaly_excused_only_by_an_assumed_leader_fault_is_unknown() -> None:
    """A kill of n3 with neither witness of who led p1 (no snapshot for it, no metadata
    log) may have hit its leader: that permits acks=1's loss there, but only as an
    assumption, so the run is not known valid, and results.json says why; p0's
    snapshot says n2 led it (no leader fault, nothing assumed there)."""
    r = run(acks1_two_partitions(lose_on=1, kill=3, leaders={f"{TOPIC}/0": 2}))
    assert r.valid == UNKNOWN and r.violations == []
    assert r.anomalies["lost-write"][0]["permitted"] is True
    assert "leader-fault" in r.extra["partitions"][1]["faults"]
    [entry] = [u for u in r.unknown if u["kind"] == "permitted-on-assumption"]
    assert (entry["topic"], entry["partition"], entry["affects_verdict"]) == (TOPIC, 1, True)
    assert "lost-write" in entry["why"] and "assumed" in entry["why"]
    # a witness (the snapshot names n3 as p1's leader) leaves nothing assumed
    r = run(acks1_two_partitions(lose_on=1, kill=3, leaders={f"{TOPIC}/0": 2, f"{TOPIC}/1": 3}))
    assert r.valid is True and not [u for u in r.unknown if u["kind"] == "permitted-on-assumption"]
    # assumed on p1, where nothing it would excuse was seen: the verdict is p0's
    r = run(acks1_two_partitions(lose_on=0, kill=3, leaders={f"{TOPIC}/0": 2}))
    assert r.valid is False and r.violations == ["lost-write"]
    assert not [u for u in r.unknown if u["kind"] == "permitted-on-assumption"]


def test_a_committed_loss_excused_only_by_replicas_assumed_out_of_step_is_unknown() -> None:
    """Kafka 3.9 (no ELR), acks=all, unclean elections on: a kill of the leader (n1, the
    snapshot says) with no metadata log permits a committed loss only by assuming every
    replica fell out of step; n2 and n3 were never touched and may have stayed in the
    ISR. The loss is not known permitted."""
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.fault("kill", [1], leaders={f"{TOPIC}/0": 1})
    h.send(1, 12, offset=1)
    h.drain([(0, 10), (1, 12)])
    spec = make_spec(acks="all", unclean=True)
    spec = dataclasses.replace(spec, kafka=dataclasses.replace(spec.kafka, version="3.9.0"))
    r = check(spec, h.ops)
    assert r.valid == UNKNOWN and r.violations == []
    [entry] = [u for u in r.unknown if u["kind"] == "permitted-on-assumption"]
    assert "lost-write" in entry["why"] and "inconsistent-offsets" in entry["why"]
    # with the metadata log showing n2 and n3 out of the ISR, the permission is witnessed
    isr = {P0: [MetadataState(0, 1, ALL, ALL), MetadataState(1, 1, frozenset({1}), ALL)]}
    r = check(spec, h.ops, timeline=isr)
    assert r.valid is True and not r.unknown


@pytest.mark.parametrize("ending", ["done", "error", "none"])
def test_a_loss_excused_only_by_a_wipe_that_failed_or_never_completed_is_unknown(ending: str) -> None:
    """Found by review: a wipe whose completion carries an error (some partition log could
    not be deleted, or the kill before it failed) or never came may have destroyed nothing
    on the node, yet its data loss excused a committed loss as certainly as a wipe done.
    It still counts (the loss is permitted, not a violation), but only as an assumption.
    Kafka 3.9 (no ELR), acks=all: the metadata log shows n2 and n3 out of the ISR, then
    the leader n1 is wiped."""
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    wipe = {"nodes": [1], "leaders": {f"{TOPIC}/0": 1}}
    h.op("nemesis", "info", "wipe", wipe)
    if ending == "done":
        h.op("nemesis", "info", "wipe", {**wipe, "result": "killed node 1 and deleted its partition data"})
    elif ending == "error":
        h.op("nemesis", "info", "wipe", {**wipe, "result": "node 1 failed"},
             error="wipe failed on node 1: ClusterError: node 1's wipe could not delete fl-queue-0")
    h.drain([(0, 10)])
    spec = make_spec(acks="all")
    spec = dataclasses.replace(spec, kafka=dataclasses.replace(spec.kafka, version="3.9.0"))
    isr = {P0: [MetadataState(-10 * S, 1, ALL, ALL), MetadataState(-5 * S, 1, frozenset({1}), ALL)]}
    r = check(spec, h.ops, timeline=isr)
    assert r.violations == [] and r.anomalies["lost-write"][0]["permitted"] is True
    assert "data-loss>=1" in r.extra["partitions"][0]["faults"]
    assumed = [u for u in r.unknown if u["kind"] == "permitted-on-assumption"]
    if ending == "done":
        assert r.valid is True and not assumed
    else:
        assert r.valid == UNKNOWN
        assert assumed[0]["anomalies"] == ["lost-write"] and "failed or never completed" in assumed[0]["why"]

def state(t: int, leader: int | None, isr: frozenset[int] = ALL) -> MetadataState:
    return MetadataState(t, leader, isr, ALL)


def killed_at_5s(node: int, **extra: Any) -> H:
    h = H()
    h.t = 5 * S
    h.fault("kill", [node], **extra)
    return h


def test_the_metadata_log_names_the_leader_when_the_snapshot_does_not() -> None:
    led_by_3 = {P0: [state(0, 3)]}
    led_by_2 = {P0: [state(0, 2)]}
    assert faults_of(killed_at_5s(3).ops, led_by_3).leader_fault
    assert not faults_of(killed_at_5s(3).ops, led_by_2).leader_fault
    # either witness suffices: the snapshot says n3 led, the log (later) says n2
    assert faults_of(killed_at_5s(3, leaders={f"{TOPIC}/0": 3}).ops, led_by_2).leader_fault


def test_a_log_that_begins_within_the_clock_margin_before_the_fault_is_no_witness() -> None:
    # the log's times are the wall clock's, the history's a monotonic clock's: a log read
    # from 0.2 s before the kill (CLOCK_MARGIN_NS is 0.5 s) may begin after it
    assert faults_of(killed_at_5s(3).ops, {P0: [state(5 * S - S // 5, 2)]}).leader_fault
    assert not faults_of(killed_at_5s(3).ops, {P0: [state(5 * S - 7 * S // 10, 2)]}).leader_fault


def test_leaders_between_takes_whoever_led_at_some_moment_of_the_window() -> None:
    states = [state(0, 2), state(5 * S, 3), state(6 * S, None), state(8 * S, 1)]
    assert leaders_between(states, 1 * S, 2 * S) == {2}
    assert leaders_between(states, 4 * S, 5 * S) == {2, 3}  # n3 from 5 s on
    assert leaders_between(states, 5 * S + 1, 7 * S) == {3}  # then none
    assert leaders_between(states, 9 * S, 10 * S) == {1}
    assert leaders_between(states, -2 * S, -S) == set()  # before the partition existed


def test_an_election_in_the_metadata_log_is_a_leader_fault() -> None:
    # No fault at all, but the leader moved (a preferred-leader election truncates what
    # only the old leader had: acks=1 writes).
    timeline = {P0: [state(0, 1), state(9 * S, 2)]}
    assert faults_of(H().ops, timeline) == PartitionFaults(leader_fault=True)
    # no election, but n3 fell out of the ISR: out of step with the leader
    lagged = {P0: [state(0, 1), state(9 * S, 1, frozenset({1, 2}))]}
    assert faults_of(H().ops, lagged) == PartitionFaults(faulted=1)


def test_a_node_fault_on_no_replica_of_the_partition_does_not_count_for_it() -> None:
    five = {P0: [MetadataState(0, 1, ALL, ALL)]}
    assert faults_of(killed_at_5s(4).ops, five) == PartitionFaults()
    assert faults_of(killed_at_5s(3).ops, five) == PartitionFaults(frozenset({"kill"}), faulted=1, fenced=1)


# --- the replicas' logs against the drain ----------------------------------------------


def replica(node: int, end: int, batches: list[list[int]], lso: int = 0) -> dict[str, Any]:
    return {"topic": TOPIC, "partition": 0, "node": node, "log_start_offset": lso,
            "log_end_offset": end, "hw_checkpoint": end, "batches": batches}


def stale_drain() -> H:
    """acks=1, no fault: five values acknowledged at 0..4, the drain read to HW 3."""
    h = H()
    for off in range(5):
        h.send(0, 100 + off, offset=off)
    h.drain([(o, 100 + o) for o in range(3)], hw=3)
    return h


SAME = [[0, 2, 0, 7], [3, 4, 0, 8]]


def check1(h: H, replicas: list[dict[str, Any]] | None) -> Result:
    return check(make_spec(acks="1", min_insync=1), h.ops, replicas=replicas)


def test_without_replicas_a_stale_drain_reads_as_loss() -> None:
    r = check1(stale_drain(), None)
    assert r.valid is False and r.anomaly_counts["lost-write"] == 2


def test_a_drain_short_of_what_every_replica_holds_is_unknown_not_loss() -> None:
    r = check1(stale_drain(), [replica(n, 5, SAME) for n in (1, 2, 3)])
    assert r.valid == UNKNOWN and r.anomaly_counts["lost-write"] == 0
    (short,) = [u for u in r.unknown if u["kind"] == "short-drain"]
    assert short["count"] == 2 and short["affects_verdict"] is True
    assert "read to offset 3" in short["why"] and "up to 5" in short["why"]
    assert r.extra["partitions"][0]["replicas_agree_to"] == 5


def test_replicas_that_disagree_past_the_drain_do_not_excuse_a_loss() -> None:
    # n3 diverges at offset 3 (another CRC): agreed only to 3, where the drain ended.
    diverged = [[0, 2, 0, 7], [3, 4, 1, 9]]
    r = check1(stale_drain(), [replica(1, 5, SAME), replica(2, 5, SAME), replica(3, 5, diverged)])
    assert r.valid is False and r.anomaly_counts["lost-write"] == 2
    assert r.extra["partitions"][0]["replicas_agree_to"] == 3
    story = " | ".join(e["text"] for e in r.anomalies["lost-write"][0]["story"])
    assert "batch 3..4 (leader epoch 0, crc 8) on n1, n2" in story
    assert "batch 3..4 (leader epoch 1, crc 9) on n3" in story


def test_a_gap_of_one_offset_in_the_first_replica_ends_the_agreement() -> None:
    # n1 lacks the batch 3..3 the others hold, and agrees with them again from 4: agreed to 3.
    full = [[0, 2, 0, 7], [3, 3, 0, 5], [4, 4, 0, 8]]
    gap = [[0, 2, 0, 7], [4, 4, 0, 8]]
    r = check1(stale_drain(), [replica(1, 5, gap), replica(2, 5, full), replica(3, 5, full)])
    assert r.extra["partitions"][0]["replicas_agree_to"] == 3
    assert r.valid is False and r.anomaly_counts["lost-write"] == 2


def test_a_missing_replica_agrees_to_nothing() -> None:
    r = check1(stale_drain(), [replica(1, 5, SAME), replica(2, 5, SAME)])
    assert r.valid is False and r.extra["partitions"][0]["replicas_agree_to"] is None


def test_a_short_drain_keeps_losses_below_its_end() -> None:
    # value 101 was acknowledged at offset 1, which the drain read and found holding 999
    h = H()
    for off in range(5):
        h.send(0, 100 + off, offset=off)
    h.drain([(0, 100), (1, 999), (2, 102)], hw=3)
    r = check1(h, [replica(n, 5, SAME) for n in (1, 2, 3)])
    assert r.valid is False and r.anomaly_counts["lost-write"] == 1
    assert r.anomalies["lost-write"][0]["value"] == 101


def test_a_read_past_every_replicas_log_end_is_a_phantom_read_even_after_a_short_drain() -> None:
    """Found by review: past a short drain's end every phantom read was set aside, also at
    offsets no replica holds a record at (all end at 5): reads of 5..7 are certainly gone."""
    h = H()
    for off in range(8):
        h.send(0, 100 + off, offset=off)
    h.poll(1, [(o, 100 + o) for o in range(8)])
    h.drain([(o, 100 + o) for o in range(3)], hw=3)
    r = check1(h, [replica(n, 5, SAME) for n in (1, 2, 3)])
    assert r.valid is False and r.violations == ["phantom-read"]
    assert [e["offset"] for e in r.anomalies["phantom-read"]] == [5, 6, 7]
    (short,) = [u for u in r.unknown if u["kind"] == "short-drain"]
    assert short["count"] == 5 + 2  # the lost writes (a value may be unread below 5), reads at 3, 4


def test_an_ack_past_a_short_drains_end_is_not_said_empty() -> None:
    """Found by review: 104 acknowledged at offset 4, drained at 1 (where 101 was
    acknowledged too); the drain stopped short at 3, so it never read offset 4 and cannot
    say it is empty there: set aside, not an inconsistent-offsets of the ack at 4."""
    h = H()
    for off in range(5):
        h.send(0, 100 + off, offset=off)
    h.drain([(0, 100), (1, 104), (2, 102)], hw=3)
    r = check1(h, [replica(n, 5, SAME) for n in (1, 2, 3)])
    iso = r.anomalies["inconsistent-offsets"]
    assert [e["offset"] for e in iso] == [1]  # 101 acked where the drain read 104
    (short,) = [u for u in r.unknown if u["kind"] == "short-drain"]
    assert "inconsistent-offsets ×1" in short["why"]


def test_faulted_counts_replicas_a_fault_touched_or_the_log_shows_out_of_the_isr() -> None:
    h = killed_at_5s(3)
    h.fault("pause", [2])
    steady = {P0: [state(0, 1)]}
    assert faults_of(h.ops, steady).faulted == 2
    lagged = {P0: [state(0, 1), state(S, 1, frozenset({1, 3})), state(2 * S, 1)]}  # n2 lagged out
    assert faults_of(killed_at_5s(3).ops, steady).faulted < 2
    assert faults_of(killed_at_5s(3).ops, lagged).faulted >= 2
    # the leader too, once a fault touched it: every replica
    h.fault("kill", [1])
    assert faults_of(h.ops, steady).faulted >= 3


def test_a_log_that_begins_after_the_fault_is_no_witness() -> None:
    # the metadata log read starts 2 s after the kill: who led at the kill is unknown
    assert faults_of(killed_at_5s(3).ops, {P0: [state(8 * S, 2)]}).leader_fault


def test_a_read_the_drain_skipped_where_every_replica_holds_a_record_is_unknown() -> None:
    """The drain read 0, 1, 3, 4 and 5 below its HW 6 and nothing at 2, which every
    replica holds (batch 0..2): a consumer's read of 102 at 2 is then no phantom read
    (the history says gone, the brokers that it is there), as the write acknowledged
    there is no lost one; nor is an ack of 105 at 2, which the drain read at 5 only, an
    inconsistent offset (the drain's silence at 2 is what the brokers contradict)."""
    h = H()
    for off in (0, 1, 3, 4):
        h.send(0, 100 + off, offset=off)
    h.send(0, 105, offset=2)
    h.poll(5, [(0, 100), (1, 101), (2, 105), (3, 103), (4, 104)])
    h.drain([(o, 100 + o) for o in (0, 1, 3, 4)] + [(5, 105)], hw=6)
    same = [[0, 2, 0, 7], [3, 5, 0, 8]]
    r = check1(h, [replica(n, 6, same) for n in (1, 2, 3)])
    assert r.violations == [] and r.valid == UNKNOWN
    assert r.anomaly_counts["phantom-read"] == 0 and r.anomaly_counts["inconsistent-offsets"] == 0
    (entry,) = [u for u in r.unknown if u["kind"] == "drain-missed-held"]
    assert entry["count"] == 2 and entry["affects_verdict"] is True
    # where the replicas do not all hold the same batch there, the drain still skipped
    # offset 2, below its HW, where offsets are dense (issue 33: it was two violations)
    split = [replica(1, 6, same), replica(2, 6, same), replica(3, 6, [[0, 2, 1, 70], [3, 5, 1, 80]])]
    r = check1(h, split)
    assert r.violations == [] and r.valid == UNKNOWN
    (entry,) = [u for u in r.unknown if u["kind"] == "drain-missed"]
    assert entry["count"] == 2 and entry["affects_verdict"] is True


@pytest.mark.parametrize("forbidden_first", [False, True])
def test_a_forbidden_instance_is_among_the_examples_however_many_were_permitted(
        monkeypatch: pytest.MonkeyPatch, forbidden_first: bool) -> None:
    """acks=1: a kill of p1's leader permits its 5 lost writes; p0's one is forbidden. With
    room for 3 examples, the forbidden one must be among them, whichever partition the
    checker meets first: a violated type whose examples are all permitted hides the
    violation."""
    monkeypatch.setattr("faultline.checkers.verdict.MAX_ANOMALY_EXAMPLES", 3)
    h = H()
    h.send(0, 10, offset=0, part=0)
    h.send(0, 20, offset=0, part=1)
    h.fault("kill", [3], leaders={f"{TOPIC}/0": 2, f"{TOPIC}/1": 3})
    lost = {0: [12], 1: [21, 22, 23, 24, 25]}
    for part in (0, 1) if forbidden_first else (1, 0):
        for k, v in enumerate(lost[part]):
            h.send(0, v, offset=1 + k, part=part)
    for part in (0, 1):
        h.drain([(0, 10 + part * 10)], part=part)
    r = run(h)
    assert r.valid is False and r.anomaly_counts["lost-write"] == 6
    kept = r.anomalies["lost-write"]
    assert len(kept) == 3
    assert [e["value"] for e in kept if not e["permitted"]] == [12]


def acks1_loss_after(f: str, ending: str, **value: Any) -> H:
    """acks=1: value 11 acknowledged on p0 and missing from its drain, after a fault ``f``
    of n1 (p0's leader, the snapshot says) that was done, failed (``error``) or never
    completed (``none``)."""
    h = H()
    h.send(0, 10, offset=0)
    fault = {"nodes": [1], "leaders": {f"{TOPIC}/0": 1}, **value}
    h.op("nemesis", "info", f, fault)
    if ending == "done":
        h.op("nemesis", "info", f, {**fault, "result": "done"})
    elif ending == "error":
        h.op("nemesis", "info", f, {**fault, "result": "node 1 failed"},
             error=f"{f} failed on node 1: ClusterError: node 1 did not answer")
    h.send(0, 11, offset=1)
    h.drain([(0, 10)])
    return h


@pytest.mark.parametrize("f, value", [("kill", {}), ("pause", {}), ("stop", {}),
                                      ("partition", {"grudge": {"1": [2, 3], "2": [1], "3": [1]}})])
@pytest.mark.parametrize("ending", ["done", "error", "none"])
def test_a_loss_excused_only_by_a_node_fault_that_failed_or_never_completed_is_unknown(
        f: str, value: dict[str, Any], ending: str) -> None:
    """Found by review: a kill (pause, stop, network partition) of the leader whose
    completion says it failed, or that never completed, may have done nothing, yet its
    leader fault excused an acks=1 loss as certainly as one done: the run was valid on a
    fault that may not have happened. It still permits the loss, but only as an
    assumption."""
    r = check(make_spec(acks="1"), acks1_loss_after(f, ending, **value).ops)
    assert r.violations == [] and r.anomalies["lost-write"][0]["permitted"] is True
    assumed = [u for u in r.unknown if u["kind"] == "permitted-on-assumption"]
    if ending == "done":
        assert r.valid is True and not assumed
    else:
        assert r.valid == UNKNOWN and assumed[0]["anomalies"] == ["lost-write"]
        assert "failed or never completed" in assumed[0]["why"]


def test_an_election_the_log_shows_witnesses_a_leader_fault_whatever_the_fault_said() -> None:
    """A kill of the leader n1 that failed, but the metadata log shows n2 take over after
    it: the election is its own witness, and the acks=1 loss is permitted, known valid."""
    h = acks1_loss_after("kill", "error")
    r = check(make_spec(acks="1"), h.ops, timeline={P0: [state(0, 1), state(h.t + S, 2)]})
    assert r.valid is True and r.violations == [] and not r.unknown


@pytest.mark.parametrize("ending", ["error", "none"])
def test_a_failed_or_unfinished_node_fault_witnesses_none_of_its_tokens(ending: str) -> None:
    """Strictly read, a node fault that failed or never completed gives nothing: not its
    family, nor a leader fault, nor its replicas out of step or fenced, nor the ``kill``
    a stop may have had to do; the permissive reading keeps them all. What the metadata
    log shows (an election, a replica out of the ISR) is witnessed all the same."""
    actions = [NemesisAction(f, 5 * S, None if ending == "none" else 6 * S,
                             {"nodes": [1], "leaders": {f"{TOPIC}/0": 1}},
                             None if ending == "none" else f"{f} failed on node 1")
               for f in ("kill", "pause", "stop")]
    assert faults_by_partition(actions, [P0], strict=True)[P0] == PartitionFaults()
    assert faults_by_partition(actions, [P0])[P0] == PartitionFaults(
        frozenset({"kill", "pause", "stop"}), leader_fault=True, faulted=len(UNKNOWN_STEP), fenced=1)
    log = {P0: [state(0, 1), state(5 * S, 1, frozenset({1, 3})), state(7 * S, 3, frozenset({1, 3}))]}
    assert faults_by_partition(actions, [P0], log, strict=True)[P0] == PartitionFaults(
        leader_fault=True, faulted=1)


def test_the_metadata_log_outweighs_the_leaders_snapshot_where_it_covers_the_fault() -> None:
    """Found by review: the nemesis's leaders snapshot may come from a broker cut off from
    the controller, answering from a frozen metadata cache. Where the metadata log covers
    the write's window it decides (issue 33): a kill of n3, which the snapshot names p0's
    leader, while the log says n2 led throughout, or that n3 led throughout and was never
    replaced, shows no election that could truncate the acks=1 write: a violation (it was
    unknown, and valid where the log agreed with the snapshot)."""
    h = acks1_loss_after("kill", "done", nodes=[3], leaders={f"{TOPIC}/0": 3})
    for led_by in (2, 3):
        r = check(make_spec(acks="1"), h.ops, timeline={P0: [state(-10 * S, led_by)]})
        assert r.violations == ["lost-write"] and r.anomalies["lost-write"][0]["permitted"] is False
    # where the log begins too late to say, the snapshot stands
    r = check(make_spec(acks="1"), h.ops, timeline={P0: [state(h.t, 2)]})
    assert r.valid is True and not r.unknown
