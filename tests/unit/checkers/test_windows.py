"""Each anomaly judged by the faults and elections of its own window, from its write (or
read) to the drain, and, where the metadata log covers that window, by what the log shows
(issue 33). Each test is a pair of histories that differ in one fact."""

from __future__ import annotations

import dataclasses

from faultline.checkers.faults_seen import MetadataState
from faultline.checkers.queue import check
from faultline.checkers.result import UNKNOWN, Result
from faultline.spec import KafkaSpec
from tests.unit.checkers.queue_hist import TOPIC, H, make_spec

S = 1_000_000_000
ALL = frozenset({1, 2, 3})
P0 = (TOPIC, 0)


def state(t: float, leader: int | None, isr: frozenset[int] = ALL) -> MetadataState:
    return MetadataState(int(t * S), leader, isr, ALL)


def at(h: H, seconds: float) -> None:
    """Move the history's clock to ``seconds``."""
    assert h.t <= seconds * S
    h.t = int(seconds * S)


#: n1 led p0; killed at 10 s, n2 elected at 10.5 s, n1 back in the ISR at 25 s.
HEALED = {P0: [state(-1, 1), state(10.5, 2, frozenset({2, 3})), state(25, 2)]}


def acks1_loss(write_at: float, kill_at: float) -> H:
    """acks=1: value 11, acknowledged at ``write_at`` s, missing from the drain at 90 s;
    a kill of p0's leader n1 at ``kill_at`` s."""
    h = H()
    h.send(0, 10, offset=0)
    events = sorted([(write_at, "write"), (kill_at, "kill")])
    for t, what in events:
        at(h, t)
        if what == "write":
            h.send(0, 11, offset=1)
        else:
            h.fault("kill", [1], leaders={f"{TOPIC}/0": 1})
    at(h, 90)
    h.drain([(0, 10)])
    return h


def lost(r: Result) -> bool:
    """Whether the one lost write was judged permitted."""
    [example] = r.anomalies["lost-write"]
    return bool(example["permitted"])


def test_a_kill_healed_before_the_write_excuses_nothing() -> None:
    """A kill at 10 s, every replica back in the ISR at 25 s: an acks=1 loss of a write
    acknowledged at 60 s has no election after it to explain it (it was permitted, as the
    kill excused the whole run). The same kill after the write, with the log's election
    after it, permits it."""
    after = check(make_spec(acks="1"), acks1_loss(write_at=60, kill_at=10).ops, timeline=HEALED)
    assert after.violations == ["lost-write"] and not lost(after)
    before = check(make_spec(acks="1"), acks1_loss(write_at=5, kill_at=10).ops, timeline=HEALED)
    assert before.valid is True and lost(before)
    assert before.anomalies["lost-write"][0]["excused_by"] == {
        "kind": "election", "time": int(10.5 * S), "from": 1, "to": 2, "epoch": None, "how": "isr",
        "witnessed": True}


def test_a_kill_not_yet_healed_at_the_write_still_bears_on_it_only_through_a_later_election() -> None:
    """The kill at 10 s, n1 not back before the write at 20 s: the kill is not over, but
    it took a process out and put none in a deposed leader's place, so only an election
    after the write (here at 30 s, n1 back as leader) could truncate it."""
    back_late = {P0: [state(-1, 1), state(10.5, 2, frozenset({2, 3})), state(30, 1)]}
    no_second = {P0: [state(-1, 1), state(10.5, 2, frozenset({2, 3}))]}
    r = check(make_spec(acks="1"), acks1_loss(write_at=20, kill_at=10).ops, timeline=back_late)
    assert r.valid is True and lost(r)
    r = check(make_spec(acks="1"), acks1_loss(write_at=20, kill_at=10).ops, timeline=no_second)
    assert r.violations == ["lost-write"]


def test_a_deposed_leader_acknowledging_under_a_pause_is_excused_by_the_earlier_election() -> None:
    """n1 paused at 10 s, n2 elected at 10.5 s; the write at 20 s was acknowledged by n1
    as a deposed leader that had not learned of epoch 1 (the pause still bears on it: n1
    rejoins only at 40 s). The same history without the pause: the election was over
    before the write, and nothing after it explains the loss."""
    log = {P0: [state(-1, 1), state(10.5, 2, frozenset({2, 3})), state(40, 2)]}

    def history(paused: bool) -> H:
        h = H()
        h.send(0, 10, offset=0)
        if paused:
            at(h, 10)
            h.fault("pause", [1], leaders={f"{TOPIC}/0": 1})
        at(h, 20)
        h.send(0, 11, offset=1)
        at(h, 90)
        h.drain([(0, 10)])
        return h

    r = check(make_spec(acks="1"), history(paused=True).ops, timeline=log)
    assert r.valid is True and lost(r)
    r = check(make_spec(acks="1"), history(paused=False).ops, timeline=log)
    assert r.violations == ["lost-write"]


def test_without_the_log_a_fault_over_before_the_write_excuses_only_on_assumption() -> None:
    """No metadata log: whether the kill's effect outlasted it no witness says, so an
    acks=1 loss of a write after it is unknown; after a kill that followed the write, it
    is permitted."""
    r = check(make_spec(acks="1"), acks1_loss(write_at=60, kill_at=10).ops)
    assert r.valid == UNKNOWN and lost(r)
    [assumed] = [u for u in r.unknown if u["kind"] == "permitted-on-assumption"]
    assert assumed["anomalies"] == ["lost-write"]
    r = check(make_spec(acks="1"), acks1_loss(write_at=60, kill_at=61).ops)
    assert r.valid is True and lost(r)
    excuse = r.anomalies["lost-write"][0]["excused_by"]
    assert excuse == {"kind": "fault", "fault": "kill", "time": excuse["time"], "nodes": [1],
                      "witnessed": False} and excuse["time"] // S == 61


def killed_everywhere() -> H:
    """acks=all: value 10 committed at 1 ms, missing from the drain; n1, n2 and n3
    killed at 10, 20 and 30 s and restarted (not journaled: restarts are no faults)."""
    h = H()
    h.send(0, 10, offset=0)
    for node, t in ((1, 10), (2, 20), (3, 30)):
        at(h, t)
        h.fault("kill", [node])
    at(h, 90)
    h.drain([])
    return h


def test_a_committed_loss_needs_the_unclean_election_the_log_shows() -> None:
    """unclean.leader.election.enable=true and every replica killed: the log shows every
    election made from the ISR, so nothing elected a replica without the committed write:
    a violation (it was permitted by the setting and the kills alone). The same with the
    log showing n1 elected from outside the ISR: permitted."""
    clean = {P0: [state(-1, 1), state(10.5, 2, frozenset({2, 3})), state(20.5, 3, frozenset({3})),
                  state(40, 3, frozenset({1, 2, 3}))]}
    unclean = {P0: [state(-1, 1), state(10.5, 2, frozenset({2, 3})), state(20.5, 3, frozenset({3})),
                    state(30.5, None, frozenset({3})), state(40, 1, frozenset({1}))]}
    spec = make_spec(acks="all", min_insync=2, unclean=True)
    r = check(spec, killed_everywhere().ops, timeline=clean)
    assert r.violations == ["lost-write"]
    r = check(spec, killed_everywhere().ops, timeline=unclean)
    assert r.valid is True and lost(r)
    excuse = r.anomalies["lost-write"][0]["excused_by"]
    assert (excuse["how"], excuse["from"], excuse["to"]) == ("unclean", None, 1)


def test_a_destroyed_leaders_record_from_before_its_fence_is_no_leadership() -> None:
    """Found by review: n1, the leader, alone in the ISR from 6 s to 8 s, its data lost
    (lose-unflushed) at 15 s with the ISR whole again. The log names n1 leader until the
    controller fences it at 21 s and elects n2, which holds every committed record: that
    record is no leadership of n1 with what it lost, and the loss is a violation. Where the
    fence at 21 s leaves no leader (n1 the ISR alone) and n1 is elected again at 23 s, it
    led with what it lost: permitted."""
    h = H()
    h.send(0, 10, offset=0)
    at(h, 15)
    h.fault("lose-unflushed", [1], leaders={f"{TOPIC}/0": 1})
    at(h, 90)
    h.drain([])
    spec = dataclasses.replace(make_spec(acks="all", min_insync=1), kafka=KafkaSpec(version="3.9.1"))
    shrunk = [state(-1, 1), state(6, 1, frozenset({1})), state(8, 1)]
    deposed = {P0: [*shrunk, state(21, 2, frozenset({2, 3})), state(40, 2)]}
    reelected = {P0: [state(-1, 1), state(6, 1, frozenset({1})), state(21, None, frozenset({1})),
                      state(23, 1, frozenset({1})), state(40, 1)]}
    assert check(spec, h.ops, timeline=deposed).violations == ["lost-write"]
    r = check(spec, h.ops, timeline=reelected)
    assert r.valid is True and lost(r)


def test_destroyed_data_excuses_a_committed_loss_only_where_the_log_shows_it_lead() -> None:
    """Kafka 3.9 (no eligible leader replicas): n2 and n3 killed at 5 s, the ISR down to
    the leader n1, whose data is wiped at 10 s. Where the log shows n1 still leading
    after the wipe, the committed write is gone with it: permitted. Where it shows n2
    elected cleanly before the wipe was done and n1 back in the ISR after, no replica
    that lost the write ever led: a violation."""
    h = H()
    h.send(0, 10, offset=0)
    at(h, 5)
    h.fault("kill", [2, 3])
    at(h, 10)
    h.fault("wipe", [1], leaders={f"{TOPIC}/0": 1})
    at(h, 90)
    h.drain([])
    spec = dataclasses.replace(make_spec(acks="all", min_insync=1),
                               kafka=KafkaSpec(version="3.9.1"))
    kept = {P0: [state(-1, 1), state(5.5, 1, frozenset({1})), state(30, 1)]}
    moved = {P0: [state(-1, 1), state(5.5, 1, frozenset({1})), state(10.2, 2, frozenset({2})),
                  state(30, 2)]}
    r = check(spec, h.ops, timeline=kept)
    assert r.valid is True and lost(r)
    r = check(spec, h.ops, timeline=moved)
    assert r.violations == ["lost-write"]
