"""Who wrote a duplicate or a reordering, from stored batches (replicas.jsonl lines built
by hand): the cause, its culprit in results.json, and the client log lined up in the story."""

from __future__ import annotations

from typing import Any

import pytest

from faultline.checkers.client_log import MAX_LINES, ClientLines
from faultline.checkers.provenance import (
    Batches,
    Copy,
    duplicate_cause,
    pair_cause,
    reorder_cause,
)
from faultline.checkers.queue import check
from faultline.checkers.result import Result
from tests.schemas import validator
from tests.unit.checkers.queue_hist import MS, TOPIC, H, make_spec

RESULTS = validator("results.schema.json")
PID = 1000


def replicas(batches: list[list[int]]) -> list[dict[str, Any]]:
    """Three replicas of partition 0 holding the same ``batches``."""
    end = batches[-1][1] + 1
    return [{"topic": TOPIC, "partition": 0, "node": n, "log_start_offset": 0, "log_end_offset": end,
             "hw_checkpoint": end, "batches": batches} for n in (1, 2, 3)]


def batch(base: int, last: int, epoch: int, seq: int, pid: int = PID) -> list[int]:
    """A batch ``base..last`` by producer ``pid`` in producer epoch ``epoch`` from sequence ``seq``
    (leader epoch 0; the CRC differs per batch, as it would)."""
    return [base, last, 0, 7919 * base + epoch, pid, epoch, seq, seq + last - base]


def duplicated() -> H:
    """Process 0 sends 10 (acked at 0) then 11; the drain holds 10 at 0 and again at 2."""
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.drain([(0, 10), (1, 11), (2, 10)])
    return h


def checked(h: H, batches: list[list[int]], **kw: Any) -> Result:
    r = check(make_spec(), h.ops, replicas=replicas(batches), **kw)
    RESULTS.validate(r.to_json())
    return r


def test_a_copy_re_sent_under_a_later_epoch_is_the_clients_violation() -> None:
    bumped = "[thrd:main]: All partitions drained, bumped epoch to PID{Id:1000,Epoch:1}"
    log = [{"time": t, "process": p, "client": "faultline-p0#producer-1", "level": "debug",
            "facility": fac, "message": msg} for t, p, fac, msg in (
               (MS, 0, "DRAIN", bumped),  # process 0, between its sends
               (MS, 1, "DRAIN", bumped),  # another process
               (2 * MS, 0, "TXN", "Starting PID FSM timer"))]  # nothing to explain
    r = checked(duplicated(), [batch(0, 1, 0, 0), batch(2, 2, 1, 0)], client_log=log)
    assert r.violations == ["duplicate"]
    assert r.extra["causes"] == {"duplicate": {"client-epoch-bump": 1}}
    assert r.extra["violations_by"] == {"client": ["duplicate"]}
    ex = r.anomalies["duplicate"][0]
    assert (ex["cause"], ex["culprit"]) == ("client-epoch-bump", "client")
    assert [(c["offset"], c["producer_id"], c["producer_epoch"], c["sequence"]) for c in ex["copies"]] == [
        (0, PID, 0, 0), (2, PID, 1, 0)]
    assert [e["process"] for e in ex["client_events"]] == [0]
    text = " | ".join(e["text"] for e in ex["story"])
    assert "producer id 1000, epoch 1, sequence 0" in text and "bumped epoch to PID{Id:1000,Epoch:1}" in text
    assert "[thrd:" not in text and "PID FSM" not in text
    assert "The client broke it" in ex["explanation"]


def test_one_producer_id_epoch_and_sequence_stored_twice_is_the_brokers_violation() -> None:
    r = checked(duplicated(), [batch(0, 1, 0, 0), batch(2, 2, 0, 0)])
    assert r.extra["causes"] == {"duplicate": {"broker-dedup-failure": 1}}
    assert r.extra["violations_by"] == {"broker": ["duplicate"]}
    ex = r.anomalies["duplicate"][0]
    assert (ex["cause"], ex["culprit"]) == ("broker-dedup-failure", "broker")
    assert "de-duplication" in ex["explanation"] and ex["client_events"] == []


def test_a_new_producer_id_is_the_clients_and_old_batches_say_nothing() -> None:
    r = checked(duplicated(), [batch(0, 1, 0, 0), batch(2, 2, 0, 0, pid=PID + 1)])
    assert r.extra["causes"] == {"duplicate": {"client-new-producer-id": 1}}
    old = [b[:4] for b in (batch(0, 1, 0, 0), batch(2, 2, 0, 0))]  # a run before the producer fields
    r = checked(duplicated(), old)
    assert r.extra["causes"] == {"duplicate": {"unknown": 1}}
    assert r.extra["violations_by"] == {"unknown": ["duplicate"]}
    assert r.anomalies["duplicate"][0]["copies"] == [None, None]


def test_a_permitted_duplicate_is_attributed_but_violates_nothing() -> None:
    r = check(make_spec(idempotence=False), duplicated().ops,
              replicas=replicas([batch(0, 1, 0, 0), batch(2, 2, 1, 0)]))
    assert r.valid is True and r.extra["causes"] == {"duplicate": {"client-epoch-bump": 1}}
    assert r.extra["violations_by"] == {}


@pytest.mark.parametrize("later_sent,first_sent,cause", [
    # (epoch, sequence) of the later send (stored at 0) and of the first send (stored at 1)
    ((0, 1), (0, 0), "broker-order-failure"),  # numbered in send order, stored reversed
    ((0, 0), (0, 1), "client-resequenced"),  # the later send numbered first
    ((0, 1), (1, 0), "client-epoch-bump"),  # the first send re-sent under a later epoch
])
def test_a_reordering_is_attributed_by_the_sequences(later_sent: tuple[int, int],
                                                     first_sent: tuple[int, int], cause: str) -> None:
    h = H()
    h.send(0, 10, offset=1)
    h.send(0, 11, offset=0)
    h.drain([(0, 11), (1, 10)])
    r = checked(h, [batch(0, 0, *later_sent), batch(1, 1, *first_sent)])
    assert r.extra["causes"] == {"nonmonotonic-send": {cause: 1}}
    ex = r.anomalies["nonmonotonic-send"][0]
    assert ex["offsets"] == [1, 0] and ex["cause"] == cause
    assert [c["offset"] for c in ex["copies"]] == [1, 0]


def test_a_copy_is_found_on_the_first_replica_holding_it_with_a_producer() -> None:
    reps = replicas([batch(0, 4, 0, 10)])
    reps[0] = {**reps[0], "batches": [batch(0, 1, 0, 10)], "log_end_offset": 2}  # n1 is short
    b = Batches(reps)
    assert b.copy_at(3) == Copy(3, 2, 0, 4, PID, 0, 13)
    assert b.copy_at(1) == Copy(1, 1, 0, 1, PID, 0, 11)
    assert b.copy_at(5) is None
    top = (1 << 31) - 1
    assert Batches(replicas([batch(0, 2, 0, top)])).copy_at(2) == Copy(2, 1, 0, 2, PID, 0, 1)
    assert Batches(replicas([[0, 2, 0, 1, -1, -1, -1, -1]])).copy_at(1) is None  # no producer


def test_who_wrote_a_record_the_replicas_disagree_on_is_not_known() -> None:
    """Found by review: the first replica by node was believed, so another producer's
    batch on n1 blamed the client for a copy n2 and n3 show the broker stored twice."""
    h = duplicated()
    same = [batch(0, 1, 0, 0), batch(2, 2, 0, 0)]
    reps = replicas(same)
    reps[0] = {**reps[0], "batches": [batch(0, 1, 0, 0), batch(2, 2, 0, 0, pid=PID + 7)]}
    r = check(make_spec(), h.ops, replicas=reps)
    assert r.extra["causes"] == {"duplicate": {"unknown": 1}}
    assert checked(h, same).extra["causes"] == {"duplicate": {"broker-dedup-failure": 1}}


def test_causes_of_pairs() -> None:
    a = Copy(0, 1, 0, 0, PID, 0, 5)
    assert pair_cause(a, Copy(9, 1, 9, 9, PID, 0, 5)) == "broker-dedup-failure"
    assert pair_cause(a, Copy(9, 1, 9, 9, PID, 1, 0)) == "client-epoch-bump"
    assert pair_cause(a, Copy(9, 1, 9, 9, PID + 1, 0, 5)) == "client-new-producer-id"
    assert pair_cause(a, Copy(9, 1, 9, 9, PID, 0, 6)) == "client-resequenced"
    bump, same = Copy(5, 1, 5, 5, PID, 1, 0), Copy(7, 1, 7, 7, PID, 0, 5)
    assert duplicate_cause([a, bump, same]) == "broker-dedup-failure", "the broker's failure wins"
    assert duplicate_cause([a, same, bump]) == "broker-dedup-failure", "wherever it is"
    assert duplicate_cause([a, bump]) == "client-epoch-bump"
    again = Copy(9, 1, 9, 9, PID, 1, 0)  # found by review: bump and again are one batch twice
    assert duplicate_cause([a, bump, again]) == "broker-dedup-failure", "between any two"
    assert duplicate_cause([a, None]) == "unknown"
    wrapped = Copy(1, 1, 1, 1, PID, 0, 0)
    assert reorder_cause(Copy(0, 1, 0, 0, PID, 0, (1 << 31) - 1), wrapped) == "broker-order-failure"


def test_client_lines_are_the_processs_relevant_ones_around_a_send() -> None:
    def line(t: int, p: int = 0, level: str = "debug", facility: str = "X",
             message: str = "") -> dict[str, Any]:
        return {"time": t, "process": p, "level": level, "facility": facility, "message": message}

    s = 1_000_000_000
    lines = ClientLines([line(5 * s, facility="DRAIN"), line(5 * s, p=1, facility="DRAIN"),
                         line(6 * s, level="warning"), line(7 * s, message="Timed out ProduceRequest"),
                         line(8 * s, facility="TXN"), line(20 * s, facility="GETPID"),
                         {"time": "late", "process": 0, "facility": "DRAIN"}])
    assert [x["time"] for x in lines.around(0, 6 * s, 8 * s)] == [5 * s, 6 * s, 7 * s]
    assert lines.around(2, 0, 30 * s) == []
    storm = ClientLines([line(i, facility="DRAIN") for i in range(MAX_LINES + 5)])
    assert [x["time"] for x in storm.around(0, 0, 0)] == list(range(MAX_LINES))


def test_lost_write_and_offset_stories_say_who_wrote_the_batch_the_replicas_hold() -> None:
    """Value 10 acked at offset 0, where the replicas hold another producer's batch."""
    h = H()
    h.send(0, 10, offset=0)
    h.drain([(0, 99)])
    r = checked(h, [batch(0, 0, 2, 40, pid=PID + 5)])
    for name in ("lost-write", "inconsistent-offsets"):
        ex = r.anomalies[name][0]
        assert "producer id 1005 epoch 2 sequences 40..40) on n1, n2, n3" in " | ".join(
            e["text"] for e in ex["story"]), name


def test_a_reordering_under_a_bumped_epoch_claims_no_copy_already_written() -> None:
    """Found by review: a reordering's story took the duplicate's reason, "re-sent a batch
    the broker had already written", though each of its records is stored once."""
    h = H()
    h.send(0, 10, offset=1)
    h.send(0, 11, offset=0)
    h.drain([(0, 11), (1, 10)])
    r = checked(h, [batch(0, 0, 0, 1), batch(1, 1, 1, 0)])
    ex = r.anomalies["nonmonotonic-send"][0]
    assert ex["cause"] == "client-epoch-bump"
    assert "already written" not in ex["explanation"]
    assert "later epoch" in ex["explanation"]


@pytest.mark.parametrize("kind", ["duplicate", "nonmonotonic-send"])
def test_an_older_epoch_written_after_a_newer_one_is_the_brokers(kind: str) -> None:
    """Found by review: a record of a producer id written after one of its later epoch was
    called the client's epoch bump ("re-sent it under a later epoch"), but it was written
    under the earlier epoch, which the broker must fence (InvalidProducerEpoch)."""
    if kind == "duplicate":  # 10 at 0 under epoch 1, again at 2 under epoch 0
        h, batches = duplicated(), [batch(0, 1, 1, 0), batch(2, 2, 0, 5)]
    else:  # 11 (sent later) at 0 under epoch 1, 10 (sent first) at 1 under epoch 0
        h = H()
        h.send(0, 10, offset=1)
        h.send(0, 11, offset=0)
        h.drain([(0, 11), (1, 10)])
        batches = [batch(0, 0, 1, 0), batch(1, 1, 0, 5)]
    r = checked(h, batches)
    assert r.extra["causes"] == {kind: {"broker-fencing-failure": 1}}
    assert r.extra["violations_by"] == {"broker": [kind]}
    ex = r.anomalies[kind][0]
    assert (ex["cause"], ex["culprit"]) == ("broker-fencing-failure", "broker")
    assert "The broker broke it" in ex["explanation"] and "earlier epoch" in ex["explanation"]


def test_a_permitted_instance_is_no_violation_in_its_story() -> None:
    """Found by review: a duplicate the guarantees permit (a producer restart) said "The
    client broke it: ... (a violation of idempotence by the client). Permitted: ..."."""
    h = duplicated()
    h.fault("producer-restart")
    r = checked(h, [batch(0, 1, 0, 0), batch(2, 2, 0, 0, pid=PID + 1)])
    assert r.valid is True and r.extra["causes"] == {"duplicate": {"client-new-producer-id": 1}}
    ex = r.anomalies["duplicate"][0]
    assert ex["permitted"] is True and ex["culprit"] == "client"
    assert "broke it" not in ex["explanation"] and "violation" not in ex["explanation"]
    assert "different producer ids" in ex["explanation"]
    assert "Permitted: a producer was restarted" in ex["explanation"]
    forbidden = checked(duplicated(), [batch(0, 1, 0, 0), batch(2, 2, 0, 0, pid=PID + 1)])
    assert "The client broke it (a violation of idempotence" in forbidden.anomalies[
        "duplicate"][0]["explanation"]


def test_a_copy_the_replicas_disagree_on_is_not_told_as_one_no_replica_holds() -> None:
    """Found by review: where the replicas' batches disagree on who wrote a copy, the story
    said "no replica's batch says who wrote it", though each of them says, differently."""
    reps = replicas([batch(0, 1, 0, 0), batch(2, 2, 0, 0)])
    reps[0] = {**reps[0], "batches": [batch(0, 1, 0, 0), batch(2, 2, 0, 0, pid=PID + 7)]}
    r = check(make_spec(), duplicated().ops, replicas=reps)
    ex = r.anomalies["duplicate"][0]
    assert ex["copies"][1] is None
    text = " | ".join(e["text"] for e in ex["story"]) + " | " + ex["explanation"]
    assert "no replica's batch says who wrote it" not in text
    assert "offset 2: the replicas disagree on who wrote it, or" in text
    assert "or replicas that disagree" in ex["explanation"]


def test_client_lines_of_an_odd_shape_are_skipped_not_a_crash() -> None:
    """Found by review: a client-log.jsonl line whose facility or level is not text (a
    list, an object) raised TypeError (unhashable) out of the checker."""
    odd = [{"time": MS, "process": 0, "facility": ["DRAIN"], "message": "x"},
           {"time": MS, "process": 0, "level": {"n": 1}, "message": "x"},
           {"time": MS, "process": 0, "facility": "DRAIN", "message": ["bumped epoch"]}]
    r = checked(duplicated(), [batch(0, 1, 0, 0), batch(2, 2, 1, 0)], client_log=odd)
    assert [e["facility"] for e in r.anomalies["duplicate"][0]["client_events"]] == ["DRAIN"]
