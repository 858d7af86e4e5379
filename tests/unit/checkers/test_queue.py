"""The queue checker on small hand-written histories: one or more per anomaly, and
per permitted / forbidden case."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from faultline.checkers import queue
from faultline.checkers.columns import NONE
from faultline.checkers.faults_seen import MetadataState
from faultline.checkers.queue import Engine, check
from faultline.checkers.result import ANOMALIES, UNKNOWN, Result, merge_valid
from faultline.errors import HistoryError
from faultline.spec import TestSpec
from tests.schemas import validator
from tests.unit.checkers.queue_hist import MS, TOPIC, H, make_spec

RESULTS, HISTORY = validator("results.schema.json"), validator("history.schema.json")


def run(h: H, spec: TestSpec | None = None, **kw: Any) -> Result:
    return check(spec or make_spec(), h.ops, **kw)


def seen(r: Result) -> set[str]:
    return {k for k, n in r.anomaly_counts.items() if n}


def story_text(example: dict[str, Any]) -> str:
    return " | ".join(e["text"] for e in example["story"])


def clean() -> H:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.poll(5, [(0, 10), (1, 11)])
    h.drain([(0, 10), (1, 11)])
    return h


def test_a_clean_history_is_valid_with_every_count_zero() -> None:
    r = run(clean())
    assert r.valid is True
    assert list(r.anomaly_counts) == list(ANOMALIES)
    assert not seen(r) and r.violations == [] and r.anomalies == {}
    assert r.stats["send"] == {"ok": 2, "fail": 0, "info": 0}
    assert [u for u in r.unknown if u["affects_verdict"]] == []


# -- lost-write ---------------------------------------------------------------------

def lost_after_kill(nodes: list[int] | None = None, **fault: Any) -> H:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.fault("kill", nodes or [1], **fault)
    h.fault("start", nodes or [1])
    h.send(1, 12, offset=1)  # the new leader reused offset 1
    h.drain([(0, 10), (1, 12)])
    return h


def test_lost_write_with_acks_all_clean_elections_and_kills_is_a_violation() -> None:
    r = run(lost_after_kill(), make_spec(acks="all", min_insync=2))
    assert r.valid is False
    assert r.anomaly_counts["lost-write"] == 1
    assert "lost-write" in r.violations
    ex = r.anomalies["lost-write"][0]
    assert (ex["topic"], ex["partition"], ex["value"], ex["offset"]) == (TOPIC, 0, 11, 1)
    assert ex["time"] == 4 * MS and ex["invoke_time"] == 3 * MS and ex["permitted"] is False
    text = story_text(ex)
    assert "acknowledged at offset 1" in text and "kill of node(s) 1" in text
    assert "offset 1 holds value 12" in text
    assert "Not permitted" in ex["explanation"]
    # the same offset now holds another value: an ack-involved inconsistent-offsets too
    iso = r.anomalies["inconsistent-offsets"][0]
    assert iso["offset"] == 1 and iso["values"] == [11, 12] and iso["involves_ack"] is True


def test_lost_write_with_acks_1_after_a_leader_kill_is_permitted() -> None:
    r = run(lost_after_kill(leaders={f"{TOPIC}/0": 1}), make_spec(acks="1"))
    assert r.valid is True
    assert r.anomaly_counts["lost-write"] == 1
    assert "lost-write" in r.permitted and "inconsistent-offsets" in r.permitted
    assert r.violations == []
    assert "acks=1" in r.extra["permitted_reasons"]["lost-write"]
    assert r.anomalies["lost-write"][0]["permitted"] is True


def test_lost_write_with_acks_1_and_no_fault_is_a_violation() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.drain([(0, 10)])
    r = run(h, make_spec(acks="1"))
    assert r.valid is False and r.violations == ["lost-write"]
    assert "offset 1 is at or past the high watermark 1" in story_text(r.anomalies["lost-write"][0])


def test_acks_1_fault_on_a_recorded_follower_does_not_permit_loss() -> None:
    h = lost_after_kill([3], leaders={f"{TOPIC}/0": 1})
    r = run(h, make_spec(acks="1"))
    assert "leader-fault" not in r.extra["faults_seen"]
    assert r.valid is False and "lost-write" in r.violations


def test_lost_write_with_acks_all_after_wiping_min_insync_nodes_is_permitted() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.fault("wipe", [1, 2], leaders={f"{TOPIC}/0": 1})
    h.fault("pause", [3])  # issue 17: with node 3 never faulted, it would keep the write
    h.drain([])
    assert run(h, make_spec(min_insync=2)).valid is True
    assert run(h, make_spec(min_insync=3)).valid is False


def test_sends_ended_info_are_never_lost() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, "info", error="_MSG_TIMED_OUT")
    h.invoke(1, 12)  # never completes
    h.drain([(0, 10)])
    r = run(h)
    assert r.valid is True and not seen(r)
    (u,) = r.unknown
    assert u["kind"] == "indeterminate-sends" and u["count"] == 2 and u["affects_verdict"] is False
    assert r.stats["send"] == {"ok": 1, "fail": 0, "info": 1} and r.stats["send_open"] == 1


def test_an_info_send_that_was_read_happened() -> None:
    h = H()
    h.send(0, 10, "info")
    h.drain([(0, 10)])
    r = run(h)
    assert r.valid is True and r.stats["indeterminate_read"] == 1 and r.unknown == []


def test_acks_0_offsets_are_never_compared_and_loss_is_permitted() -> None:
    h = H()
    h.send(0, 10, offset=-1)
    h.send(0, 11, offset=-1)
    h.drain([(0, 11)])  # 11 sits at offset 0: no offset was reported, so no disagreement
    r = run(h, make_spec(acks="0"))
    assert r.anomaly_counts["lost-write"] == 1 and r.anomaly_counts["inconsistent-offsets"] == 0
    assert r.anomalies["lost-write"][0]["offset"] is None
    assert r.valid is True and "lost-write" in r.permitted


def test_value_acked_below_the_log_start_is_unknown_not_lost() -> None:
    """Issue 33: the test sets no retention and deletes nothing, so a value acknowledged
    below the drain's log start went missing: unknown (it was valid, with a note)."""
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.drain([(1, 11)], lso=1)
    r = run(h)
    assert r.valid == UNKNOWN and r.anomaly_counts["lost-write"] == 0
    (u,) = r.unknown
    assert (u["kind"], u["count"], u["affects_verdict"]) == ("below-log-start", 1, True)
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.drain([(0, 10), (1, 11)], lso=0)
    assert run(h).valid is True


def test_a_record_read_below_the_log_start_and_gone_is_unknown() -> None:
    """Issue 33: a consumer read 9 (an info send) at offset 0, below the drain's log start
    1: it went missing, unseen (the check said valid); read and drained, nothing vanished."""
    h = H()
    h.send(0, 9, outcome="info")
    h.send(0, 11, offset=1)
    h.poll(5, [(0, 9), (1, 11)])
    h.drain([(1, 11)], lso=1, hw=2)
    r = run(h)
    assert r.valid == UNKNOWN
    (u,) = [u for u in r.unknown if u["affects_verdict"]]
    assert (u["kind"], u["count"]) == ("below-log-start", 1)
    h = H()
    h.send(0, 9, outcome="info")
    h.send(0, 11, offset=1)
    h.poll(5, [(0, 9), (1, 11)])
    h.drain([(0, 9), (1, 11)], lso=0, hw=2)
    assert run(h).valid is True


# -- incomplete drains and cut histories ----------------------------------------------

def test_a_partition_without_a_complete_drain_is_unknown_not_lost() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.drain([(0, 10)], last=False)
    r = run(h)
    assert r.valid == "unknown" and r.anomaly_counts["lost-write"] == 0
    (u,) = [u for u in r.unknown if u["affects_verdict"]]
    assert (u["kind"], u["topic"], u["partition"]) == ("incomplete-drain", TOPIC, 0)
    assert r.extra["partitions"][0]["complete"] is False


def test_every_partition_of_the_spec_needs_a_drain() -> None:
    h = clean()
    r = run(h, make_spec(partitions=2))
    assert r.valid == "unknown"
    assert [(u["kind"], u["partition"]) for u in r.unknown] == [("incomplete-drain", 1)]


def test_a_truncated_history_is_at_most_unknown() -> None:
    assert run(clean(), truncated=True).valid == "unknown"
    assert run(lost_after_kill(), truncated=True).valid is False


# -- reads --------------------------------------------------------------------------

def test_phantom_read_forbidden_with_clean_elections_permitted_with_unclean() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.poll(5, [(0, 10), (1, 11)])
    h.fault("kill", leaders={f"{TOPIC}/0": 1})
    h.send(0, 12, offset=1)
    h.drain([(0, 10), (1, 12)])
    r = run(h, make_spec(acks="all"))
    assert {"phantom-read", "lost-write", "inconsistent-offsets"} <= seen(r)
    ph = r.anomalies["phantom-read"][0]
    assert (ph["value"], ph["offset"], ph["process"]) == (11, 1, 5)
    assert "phantom-read" in r.violations and r.valid is False
    # with eligible leader replicas (Kafka >= 4.1) a kill of one node fences one replica,
    # and an unfenced one of the ISR and ELR, min.insync=2 together, is elected before
    # any unclean candidate; two fenced replicas may leave only unclean candidates (the
    # metadata log shows n2 and n3 out of the ISR: every replica out of step)
    every = frozenset({1, 2, 3})
    lagged = {(TOPIC, 0): [MetadataState(0, 1, every, every), MetadataState(1, 1, frozenset({1}), every)]}
    assert run(h, make_spec(acks="all", unclean=True), timeline=lagged).valid is False
    assert run(h, make_spec(acks="all", min_insync=1, unclean=True), timeline=lagged).valid is True
    h.fault("kill", [2])
    r = run(h, make_spec(acks="all", unclean=True), timeline=lagged)
    assert r.valid is True and {"phantom-read", "lost-write", "inconsistent-offsets"} <= set(
        r.permitted)


def test_a_poll_past_the_drained_high_watermark_is_a_phantom() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, "info")
    h.poll(5, [(0, 10), (1, 11)])
    h.drain([(0, 10)])
    r = run(h)
    assert seen(r) == {"phantom-read"}
    assert "at or past the high watermark" in story_text(r.anomalies["phantom-read"][0])


def test_a_phantom_read_by_an_unknown_poll_names_no_consumer_or_time() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.poll(5, [(0, 10), (1, 99)])  # 99 was never sent: which poll read it is not recorded
    h.drain([(0, 10)])
    ph = run(h).anomalies["phantom-read"][0]
    assert (ph["value"], ph["offset"], ph["time"], ph["process"]) == (99, 1, None, None)
    text = story_text(ph)
    assert "a consumer polled value 99 at offset 1" in text
    assert "consumer 0" not in text and "0.000s" not in text


def test_inconsistent_offsets_between_reads_only() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, "info")
    h.poll(5, [(0, 10)])
    h.poll(6, [(0, 11)])  # another consumer sees another value at offset 0
    h.drain([(0, 10)], hw=1)
    r = run(h, make_spec(acks="1"))
    iso = r.anomalies["inconsistent-offsets"][0]
    assert iso["involves_ack"] is False and iso["values"] == [10, 11]
    assert {s["source"] for s in iso["sightings"]} == {"ack", "poll", "drain"}
    # acks=1 with a leader fault permits ack disagreements, not reads disagreeing
    h.fault("kill")
    r = run(h, make_spec(acks="1"))
    assert "inconsistent-offsets" in r.permitted and "inconsistent-offsets" in r.violations
    (after_kill,) = r.anomalies["inconsistent-offsets"]
    assert after_kill["involves_ack"] is False and after_kill["permitted"] is False


def test_an_ack_offset_the_drain_leaves_empty_is_inconsistent() -> None:
    h = H()
    h.send(0, 10, offset=3)
    h.drain([(0, 10)], hw=1)  # 3 at or past the HW: nothing there (below it: a missed read)
    r = run(h)
    assert seen(r) == {"inconsistent-offsets"}
    iso = r.anomalies["inconsistent-offsets"][0]
    assert iso["involves_ack"] is True and iso["offsets"] == [3, 0] and r.valid is False


def test_two_acks_at_one_offset() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(1, 11, offset=0)
    h.drain([(0, 10), (1, 11)])
    r = run(h)
    iso = r.anomalies["inconsistent-offsets"][0]
    assert iso["offset"] == 0 and iso["values"] == [10, 11] and iso["involves_ack"]


def test_duplicate_forbidden_with_idempotence_permitted_without() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.drain([(0, 10), (1, 10)])
    r = run(h)
    assert seen(r) == {"duplicate"} and r.anomalies["duplicate"][0]["offsets"] == [0, 1]
    assert r.valid is False
    r = run(h, make_spec(idempotence=False))
    assert r.valid is True and "duplicate" in r.permitted


def test_aborted_read_is_never_permitted() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, "fail", error="NOT_ENOUGH_REPLICAS")
    h.fault("wipe", [1, 2, 3])
    h.poll(5, [(0, 10), (1, 11)])
    h.drain([(0, 10), (1, 11)])
    r = run(h, make_spec(acks="0", unclean=True, min_insync=1))
    assert seen(r) == {"aborted-read"} and r.violations == ["aborted-read"]
    ex = r.anomalies["aborted-read"][0]
    assert (ex["value"], ex["offset"], ex["reader"], ex["error"]) == (
        11, 1, "consumer 5", "NOT_ENOUGH_REPLICAS")


def test_a_failed_send_read_before_it_failed_is_an_aborted_read() -> None:
    h = H()
    h.invoke(0, 11)
    h.poll(5, [(0, 11)])
    h.done(0, 11, "fail")
    h.drain([(0, 11)])
    assert seen(run(h)) == {"aborted-read"}


def test_unexpected_values_never_sent_sent_elsewhere_or_read_before_invoke() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 20, offset=0, part=1)
    h.poll(5, [(0, 10), (1, 30)])  # 30 read before its send
    h.send(0, 30, "info")
    h.drain([(0, 10), (1, 30), (2, 20), (3, 99)])
    h.drain([(0, 20)], part=1)
    r = run(h, make_spec(acks="0", unclean=True, idempotence=False, partitions=2))
    assert r.violations == ["unexpected-value"]
    whys = {e["value"]: e["explanation"] for e in r.anomalies["unexpected-value"]}
    assert set(whys) == {20, 30, 99}
    assert "went to fl-queue/1" in whys[20] and "before its send" in whys[30]
    assert "no send" in whys[99]


def two_reads_disagree(acked: bool) -> H:
    """A consumer read 11 at offset 0, the (incomplete) drain 12; an acks=1 ack of 10 there
    or not; a kill of the leader, which permits the acks=1 ack's loss but not committed
    data's."""
    h = H()
    if acked:
        h.send(0, 10, offset=0)
    else:
        h.send(0, 10, "info")
    h.send(1, 11, "info")
    h.send(2, 12, "info")
    h.poll(5, [(0, 11)])
    h.fault("kill", [1])
    h.fault("start", [1])
    h.drain([(0, 12)], last=False)
    return h


@pytest.mark.parametrize("acked", [False, True])
def test_a_wrong_ack_does_not_excuse_reads_that_disagree_among_themselves(acked: bool) -> None:
    """Found by review: the ack's row (as lost-write, permitted by acks=1 and a leader
    fault) judged the whole instance, and two reads of committed data that differ went
    unjudged; both rows apply, each must permit it."""
    r = run(two_reads_disagree(acked), make_spec(acks="1"))
    (iso,) = r.anomalies["inconsistent-offsets"]
    assert (iso["involves_ack"], iso["reads_disagree"]) == (acked, True)
    assert iso["permitted"] is False and r.valid is False
    assert r.violations == ["inconsistent-offsets"]


def test_a_wrong_ack_alone_is_judged_as_lost_write() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.fault("kill", [1])
    h.fault("start", [1])
    h.send(1, 11, offset=0)
    h.poll(5, [(0, 11)])
    h.drain([(0, 11)])
    r = run(h, make_spec(acks="1"))
    iso = r.anomalies["inconsistent-offsets"][0]
    assert (iso["involves_ack"], iso["reads_disagree"], iso["permitted"]) == (True, False, True)
    assert "as lost-write" in iso["explanation"]


def test_a_value_the_drain_read_where_it_had_read_another_is_not_lost() -> None:
    """Two drain chunks read two values at one offset (the log changed under the drain):
    an inconsistent offset, but each value was read by the drain, so neither is lost."""
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.drain([(0, 10)], last=False)
    h.drain([(0, 11)], hw=1)
    r = run(h)
    assert seen(r) == {"inconsistent-offsets"} and r.anomaly_counts["lost-write"] == 0
    at_0, acked_at_1 = r.anomalies["inconsistent-offsets"]  # 11 was acked at 1, read at 0
    assert (at_0["offset"], at_0["values"]) == (0, [10, 11])
    assert (acked_at_1["offset"], acked_at_1["offsets"]) == (1, [1, 0])


def test_a_value_the_drain_reread_where_another_was_is_no_duplicate() -> None:
    """Found by review of the fix above: the re-read value became a second copy (a
    duplicate, forbidden with idempotence), though no one version of the log held it twice
    (librdkafka seeks back silently when it meets a truncated log)."""
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.fault("kill", [1])
    h.drain([(0, 10), (1, 11)], last=False)
    h.drain([(0, 11)], hw=2)
    r = run(h, make_spec(unclean=True))
    assert r.anomaly_counts["duplicate"] == 0 and r.anomaly_counts["lost-write"] == 0
    assert seen(r) == {"inconsistent-offsets"}


def test_a_poll_of_the_value_the_drain_reread_at_that_offset_is_no_phantom() -> None:
    """Found by review: the drain read 10 at offset 0, then (the log changed under it)
    11; a consumer that had read 11 there saw a record the drain holds, yet only the
    drain's first value counted, so its read was a phantom read (forbidden here)."""
    h = H()
    h.send(0, 10, "info")
    h.send(0, 11, "info")
    h.poll(5, [(0, 11)])
    h.drain([(0, 10)], last=False)
    h.drain([(0, 11)], hw=1)
    r = run(h)
    assert r.anomaly_counts["phantom-read"] == 0
    assert seen(r) == {"inconsistent-offsets"}  # the drain's two reads at offset 0


def test_an_ack_below_the_drains_log_start_is_not_said_empty() -> None:
    """Found by review: 10 was acknowledged at offset 3, below the drain's log start 5,
    and drained at 7. The drain never read offset 3, so it cannot say it holds nothing
    there (10 may have been at 3 and 7, a copy deleted by retention): it was an
    inconsistent-offsets involving the ack, forbidden where a duplicate is permitted.
    Undecided: ``below-log-start``, as a loss there is (test_anomalies' finding)."""
    h = H()
    h.send(0, 10, offset=3)
    h.drain([(7, 10)], lso=5, hw=8)
    r = run(h, make_spec(idempotence=False))
    assert r.anomaly_counts["inconsistent-offsets"] == 0 and r.valid == UNKNOWN
    assert [u["count"] for u in r.unknown if u["kind"] == "below-log-start"] == [1]
    h = H()
    h.send(0, 10, offset=8)  # at the HW the drain read to: nothing there
    h.drain([(5, 11), (6, 12), (7, 10)], lso=5, hw=8)
    assert run(h, make_spec(idempotence=False)).anomaly_counts["inconsistent-offsets"] == 1


def test_an_offset_is_inconsistent_once_however_many_acks_the_drain_left_it_empty_for() -> None:
    """Found by review: two values acknowledged at offset 3, which the drain holds empty,
    each drained elsewhere, counted offset 3 three times (the two acks disagreeing, and
    each ack's offset empty); an ack and a poll disagreeing there, twice. Counted once
    per offset (queue.py), as the examples name one offset."""
    h = H()
    h.send(0, 10, offset=3)
    h.send(1, 11, offset=3)
    h.drain([(0, 10), (1, 11)])
    r = run(h)
    assert r.anomaly_counts["inconsistent-offsets"] == 1
    (iso,) = r.anomalies["inconsistent-offsets"]
    assert (iso["offset"], iso["values"], iso["involves_ack"]) == (3, [10, 11], True)
    h = H()
    h.send(0, 10, offset=3)
    h.send(1, 12, "info")
    h.poll(5, [(3, 12)])
    h.drain([(0, 10)])
    r = run(h)
    assert r.anomaly_counts["inconsistent-offsets"] == 1 and r.anomaly_counts["phantom-read"] == 1
    assert r.anomalies["inconsistent-offsets"][0]["involves_ack"] is True
    h = H()  # acks at two empty offsets: two offsets, two instances
    h.send(0, 10, offset=3)
    h.send(1, 11, offset=4)
    h.drain([(0, 10), (1, 11)])
    assert run(h).anomaly_counts["inconsistent-offsets"] == 2


def foreign_records() -> H:
    """Another producer's records among the workload's, as its consumers journal them:
    text, a null, and digits past a send's values (as read from a file, they fit u64)."""
    h = H()
    h.send(0, 10, offset=0)
    h.poll(5, [(0, 10), (1, "x"), (2, None)])  # read in order: no skip
    h.send(0, 11, offset=1)  # acknowledged where the drain holds "x"
    h.poll(6, [(0, 10), (3, 2**63)])  # jumped over 1 and 2, which hold records
    h.poll(6, [(4, "y")])  # where the drain holds nothing
    h.drain([(0, 10), (1, "x"), (2, None), (3, 2**63), (5, 11)], hw=6)
    return h


def test_a_value_no_send_can_carry_is_unexpected_and_holds_its_offset() -> None:
    """Each such value is an unexpected-value once per partition, its reads counted, told
    as the history holds it; and the offsets it holds count as any other's: read in
    order it is no skip, jumped over it is one, an ack at its offset is inconsistent, a
    poll of it where the drain skipped an offset below its HW is a missed read (issue 33:
    offsets there are dense), and where the drain read nothing past its HW a phantom read."""
    r = run(foreign_records())
    assert r.valid is False
    assert seen(r) == {"unexpected-value", "poll-skip", "inconsistent-offsets"}
    assert [(u["kind"], u["count"]) for u in r.unknown] == [("drain-missed", 1)]
    h = foreign_records()
    h.ops[-1].value["high_watermark"] = 4  # type: ignore[index]
    h.ops[-1].value["records"].pop()  # type: ignore[index]
    r = run(h)
    assert seen(r) == {"unexpected-value", "poll-skip", "inconsistent-offsets", "phantom-read",
                       "lost-write"}
    unexpected = {e["value"]: e for e in r.anomalies["unexpected-value"]}
    assert list(unexpected) == ["x", None, 2**63, "y"]  # in the order first read
    assert [(e["offset"], e["reads"]) for e in unexpected.values()] == [(1, 2), (2, 2), (3, 2), (4, 1)]
    assert 'consumer 5 read value "x" at offset 1' in story_text(unexpected["x"])
    assert "no send can carry it" in unexpected[None]["explanation"]
    assert "read value null at offset 2" in story_text(unexpected[None])
    skip = r.anomalies["poll-skip"]
    assert len(skip) == 1 and (skip[0]["process"], skip[0]["skipped"]) == (6, [1, 2])
    iso = r.anomalies["inconsistent-offsets"]
    assert [(e["offset"], e["values"], e["involves_ack"]) for e in iso] == [(1, [11, "x"], True)]
    assert {(x["source"], x["value"]) for x in iso[0]["sightings"]} == {
        ("ack", 11), ("poll", "x"), ("drain", "x")}
    assert 'offset 1 holds value "x"' in story_text(iso[0])
    phantom = r.anomalies["phantom-read"]
    assert [(e["value"], e["offset"], e["process"]) for e in phantom] == [("y", 4, None)]
    assert 'value "y" is nowhere in the partition' in phantom[0]["explanation"]
    RESULTS.validate(orjson.loads(orjson.dumps(r.to_json())))
    for op in foreign_records().ops:
        HISTORY.validate(op.to_dict())


def test_a_foreign_value_the_drain_holds_twice_is_named_at_both() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.poll(5, [(0, 10), (1, "x"), (2, "x"), (3, "x")])
    h.drain([(0, 10), (1, "x"), (2, "x")])  # offset 3 is at its high watermark
    r = run(h)
    assert seen(r) == {"unexpected-value", "phantom-read"}
    assert "value \"x\" is at offset(s) 1, 2" in r.anomalies["phantom-read"][0]["explanation"]
    assert r.anomalies["unexpected-value"][0]["reads"] == 5


@pytest.mark.parametrize("value", [-2**63 + 2**32 - 1, -2**63 + 1, 2**63])
def test_a_send_value_out_of_range_is_an_error(value: int) -> None:
    """The lowest 2**32 int64 values stand for foreign ones; a send may not carry them."""
    h = clean()
    h.send(3, value, offset=5)
    with pytest.raises(HistoryError, match="not a usable integer") as e:
        run(h)
    assert e.value.line == len(h.ops) - 1


def test_the_lowest_value_a_send_may_carry_is_read_as_sent() -> None:
    h = H()
    h.send(0, -2**63 + 2**32, offset=0)
    h.poll(5, [(0, -2**63 + 2**32)])
    h.drain([(0, -2**63 + 2**32)])
    assert run(h).valid is True


def test_nonmonotonic_send_forbidden_with_idempotence() -> None:
    h = H()
    h.invoke(0, 10)
    h.invoke(0, 11)
    h.done(0, 11, offset=0)
    h.done(0, 10, offset=1)
    h.drain([(0, 11), (1, 10)])
    r = run(h)
    assert seen(r) == {"nonmonotonic-send"} and r.valid is False
    ex = r.anomalies["nonmonotonic-send"][0]
    assert ex["values"] == [10, 11] and ex["offsets"] == [1, 0] and ex["process"] == 0
    r = run(h, make_spec(idempotence=False, in_flight=5))
    assert r.valid is True
    assert run(h, make_spec(idempotence=False, in_flight=1)).valid is False


def test_sends_of_different_producers_may_interleave() -> None:
    h = H()
    h.invoke(0, 10)
    h.invoke(1, 11)
    h.done(1, 11, offset=0)
    h.done(0, 10, offset=1)
    h.drain([(0, 11), (1, 10)])
    assert run(h).valid is True


def test_nonmonotonic_poll_and_a_new_process_starting_over() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.poll(5, [(0, 10), (1, 11)])
    h.poll(5, [(1, 11)])
    h.poll(6, [(0, 10)])  # a fresh consumer may start from the beginning
    h.drain([(0, 10), (1, 11)])
    r = run(h)
    assert seen(r) == {"nonmonotonic-poll"} and r.anomaly_counts["nonmonotonic-poll"] == 1
    ex = r.anomalies["nonmonotonic-poll"][0]
    assert (ex["process"], ex["offset"], ex["previous"]) == (5, 1, 1)


def test_poll_skip_only_over_offsets_holding_records() -> None:
    h = H()
    for i in range(4):
        h.send(0, 10 + i, offset=i)
    h.poll(5, [(0, 10), (2, 12)])
    h.poll(6, [(0, 10), (3, 13)])
    h.drain([(0, 10), (1, 11), (2, 12), (3, 13)])
    r = run(h)
    assert seen(r) == {"poll-skip"} and r.anomaly_counts["poll-skip"] == 2
    ex = r.anomalies["poll-skip"][1]
    assert ex["skipped"] == [1, 2] and ex["skipped_count"] == 2 and ex["process"] == 6
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 12, offset=2)
    h.poll(5, [(0, 10), (2, 12)])
    h.drain([(0, 10), (2, 12)])  # offset 1 holds nothing: not a skip
    assert run(h).valid is True



def test_a_consumers_first_record_past_the_log_start_skipped_what_is_below_it() -> None:
    """A consumer assigns every partition from the beginning (the workload's
    OFFSET_BEGINNING), so its first record of a partition comes right after the log
    start: records the drain holds below it were skipped. From the log start on: a
    first record at the drain's log start, with nothing the drain holds below, is none."""
    h = H()
    for i in range(4):
        h.send(0, 10 + i, offset=i)
    h.poll(5, [(2, 12), (3, 13)])  # never got 0 and 1
    h.poll(6, [(1, 11), (2, 12)])  # started at the log start, 1
    h.drain([(1, 11), (2, 12), (3, 13)], lso=1)
    r = run(h)
    assert seen(r) == {"poll-skip"} and r.anomaly_counts["poll-skip"] == 1 and r.valid is False
    ex = r.anomalies["poll-skip"][0]
    assert (ex["process"], ex["offset"], ex["previous"], ex["skipped"]) == (5, 2, None, [1])
    assert "as its first record" in story_text(ex)
    RESULTS.validate(orjson.loads(orjson.dumps(r.to_json())))

# -- errors -------------------------------------------------------------------------

@pytest.mark.parametrize(("f", "typ", "value", "needle"), [
    ("send", "invoke", {"topic": TOPIC, "partition": 0}, "integer 'value'"),
    ("send", "invoke", {"topic": TOPIC, "partition": 0, "value": [1]}, "integer 'value'"),
    ("poll", "ok", {"records": [[TOPIC, 0, 1]]}, "[topic, partition, offset, value]"),
    ("poll", "ok", {"records": [[TOPIC, 0, "1", 2]]}, "[topic, partition, offset, value]"),
    ("drain", "ok", {"topic": TOPIC, "partition": 0, "records": [[0]]}, "[offset, value]"),
    ("poll", "ok", {"records": [[TOPIC, 0, 1, [2]]]}, "[topic, partition, offset, value]"),
    ("poll", "ok", {"records": [[TOPIC, 0, 1, True]]}, "[topic, partition, offset, value]"),
    ("drain", "ok", {"topic": TOPIC, "partition": 0, "records": [[0, 1.5]]}, "[offset, value]"),
    ("drain", "ok", {"topic": TOPIC, "partition": 0, "records": [[None, "x"]]}, "[offset, value]"),
])
def test_a_malformed_value_names_the_line(f: str, typ: str, value: Any, needle: str) -> None:
    h = clean()
    if typ != "invoke":
        h.op(7, "invoke", f, None if f == "poll" else {"topic": TOPIC, "partition": 0})
    h.op(7, typ, f, value)
    with pytest.raises(HistoryError) as e:
        run(h)
    assert e.value.line == len(h.ops) and needle in str(e.value)


def test_a_value_sent_twice_is_an_error() -> None:
    h = clean()
    h.send(3, 10, offset=5)
    with pytest.raises(HistoryError, match="already sent"):
        run(h)


def test_a_completion_without_invoke_is_an_error() -> None:
    h = clean()
    h.done(3, 77, offset=5)
    with pytest.raises(HistoryError, match="no open invoke"):
        run(h)


def test_merge_valid() -> None:
    assert merge_valid(True, True) is True
    assert merge_valid(True, "unknown") == "unknown"
    assert merge_valid("unknown", False, True) is False
    assert merge_valid() is True


# -- measures -----------------------------------------------------------------------

def test_measures_throughput_latency_unavailability_and_faults() -> None:
    h = H()
    h.send(0, 1, offset=0)
    h.fault("kill", [2])
    h.t += 3000 * MS  # 3 s with no ok send
    h.send(0, 2, "fail")
    h.send(0, 3, offset=1)
    h.fault("start", [2])
    h.fault("wipe", [3])
    h.drain([(0, 1), (1, 3)])
    r = run(h, unavailable_after_ns=1000 * MS)
    m = r.extra["measures"]
    assert m["bucket_ns"] == 1_000_000_000
    assert [(b["ok"], b["fail"]) for b in m["throughput"]] == [(1, 0), (0, 0), (0, 0), (1, 1)]
    assert [b["faults"] for b in m["throughput"]] == [[0], [0], [0], [0, 1]]
    assert [lat["count"] for lat in m["latency"]] == [1, 1]
    assert m["latency"][0]["p50_ms"] == pytest.approx(1.0)
    kill, wipe = m["faults"]
    assert (kill["f"], kill["nodes"], kill["start"], kill["end"]) == ("kill", [2], 3 * MS,
                                                                      h.ops[-5].time)
    assert (wipe["f"], wipe["end"] - wipe["start"]) == ("wipe", MS)
    (part,) = m["unavailable"]
    (w,) = part["windows"]
    assert (w["start"], w["fail"], w["ongoing"], w["faults"]) == (2 * MS, 1, False, [0])
    assert w["duration_ms"] > 3000


def test_partitions_extra() -> None:
    (p,) = run(clean()).extra["partitions"]
    assert p == {"topic": TOPIC, "partition": 0, "complete": True, "drained": 2,
                 "high_watermark": 2, "log_start_offset": 0, "polled": 2,
                 "sends": {"ok": 2, "fail": 0, "info": 0, "open": 0},
                 "replicas_agree_to": None, "faults": [], "anomaly_counts": {},
                 "violations": [], "permitted_reasons": {}}


def test_the_values_column_follows_every_feed() -> None:
    """slot -> value is made from the value index when asked, and made again after a
    further feed (values the index keeps in its array and in its dict alike)."""
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, -5, offset=1)  # a negative value: the index's dict
    engine = Engine(make_spec(), "history")
    rows = [op.to_dict() for op in h.ops]
    engine.feed(rows[:2])
    assert list(engine.c_val) == [10]
    engine.feed(rows[2:])
    assert list(engine.c_val) == [10, -5]


def test_a_first_read_keeps_its_offset_only_where_the_ack_or_drain_does_not_say_it() -> None:
    h = H()
    h.invoke(0, 10)
    h.poll(5, [(0, 10)])  # read before its ack, at the offset the ack will give
    h.done(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.poll(-1, [(1, 11)])  # a consumer whose process is -1, the drain's marker
    h.send(0, 12, offset=2)
    h.poll(5, [(3, 12)])  # read where the ack did not say
    h.send(0, 13, offset=4)
    h.send(0, 14, offset=6)  # never read
    h.drain([(0, 10), (5, 11), (3, 12), (4, 13)])
    engine = Engine(make_spec(), "history")
    engine.feed(op.to_dict() for op in h.ops)
    assert engine.read_offs == {1: 1, 2: 3}
    assert [engine.read_off(s) for s in range(5)] == [0, 1, 3, 4, NONE]
    assert [engine.first_read(s)[1] for s in range(4)] == [5, -1, 5, -1]


@pytest.mark.parametrize("offset", [5, 2**40])
def test_a_record_drained_twice_at_one_offset_is_no_duplicate(offset: int) -> None:
    """The drain read one record twice (a retried fetch): one offset, so no duplicate,
    whether the offset fits the drain offsets' int32 cells or waits in their dict."""
    h = H()
    h.send(0, 10, offset=offset)
    h.drain([(offset, 10), (offset, 10)], hw=offset + 1)
    r = run(h)
    assert r.valid is True and r.anomaly_counts["duplicate"] == 0
    h.drain([(offset + 1, 10)], hw=offset + 2)  # and once more, one offset further: one
    assert run(h).anomaly_counts["duplicate"] == 1


def test_a_first_read_past_int32_offsets_is_kept_only_where_the_ack_does_not_say_it() -> None:
    """Offsets an int32 cell cannot hold are compared whole: a poll where the ack says
    keeps no offset of its own."""
    h = H()
    h.send(0, 10, offset=2**40)
    h.send(0, 11, offset=2**40 + 1)
    h.poll(5, [(2**40, 10), (2**40 + 2, 11)])
    h.drain([(2**40, 10), (2**40 + 2, 11)], hw=2**40 + 3, lso=2**40)
    engine = Engine(make_spec(), "history")
    engine.feed(op.to_dict() for op in h.ops)
    assert engine.read_offs == {1: 2**40 + 2}
    assert [engine.read_off(s) for s in range(2)] == [2**40, 2**40 + 2]


def test_more_sends_than_int32_slots_is_refused_in_one_line(monkeypatch: Any) -> None:
    """Slots live in int32 cells; the limit, made small here, is a HistoryError."""
    monkeypatch.setattr(queue, "NARROW_MAX", 10)
    monkeypatch.setattr(queue, "GROW", 4)
    h = H()
    for v in range(8):
        h.send(0, v, offset=v)
    assert run(h).valid is not None  # 8 sends: room for them
    for v in range(8, 12):
        h.send(0, v, offset=v)
    with pytest.raises(HistoryError, match="more than 10 sends"):
        run(h)


def test_more_topic_partitions_than_int16_ids_is_refused_in_one_line(monkeypatch: Any) -> None:
    """Partition ids live in int16 cells; the limit, made small here, is a HistoryError."""
    monkeypatch.setattr(queue, "MAX_PARTS", 2)
    h = H()
    for part in range(3):
        h.send(0, part, offset=0, part=part)
    assert run(h, make_spec(partitions=3)).valid is not None  # ids 0, 1 and 2
    with pytest.raises(HistoryError, match="more than 3 topic-partitions"):
        run(h, make_spec(partitions=4))


@pytest.mark.parametrize("op", ["send", "poll", "drain"])
def test_an_op_on_a_partition_the_topic_does_not_have_is_refused_naming_its_line(op: str) -> None:
    """The workload sends to and reads only the test topic's partitions: an op naming
    another (partition 7 of a 3-partition topic) is a history inconsistent with its
    test.json, not an unexpected-value or an incomplete drain to judge."""
    h = H()
    for part in range(3):
        h.send(0, 10 + part, offset=0, part=part)
    {"send": lambda: h.send(0, 20, offset=0, part=7),
     "poll": lambda: h.poll(5, [(0, 10)], part=7),
     "drain": lambda: h.drain([(0, 10)], part=7)}[op]()
    for part in range(3):
        h.drain([(0, 10 + part)], part=part)
    line = 7 if op == "send" else 8  # the send's invoke; the poll's or drain's ok
    with pytest.raises(HistoryError, match=rf"^history:{line}: {op} names fl-queue/7, not a "
                                           "partition of the test's topic fl-queue, which has "
                                           r"partitions 0 to 2 \(test.json\)$"):
        run(h, make_spec(partitions=3))


def test_an_op_on_another_topic_is_refused_naming_its_line() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.op(5, "invoke", "poll")
    h.op(5, "ok", "poll", {"records": [["other", 0, 0, 10]]})
    h.drain([(0, 10)])
    with pytest.raises(HistoryError, match=r"^history:4: poll names other/0, not a partition"):
        run(h)


def test_sends_to_a_partition_whose_id_passes_int16_arithmetic_are_counted() -> None:
    """Ids live in int16 cells; counting sends per partition (id * 4 + outcome) must not
    wrap for an id past 8,191."""
    h = H()
    h.send(0, 1, offset=0, part=9000)
    h.send(0, 2, outcome="fail", part=9000)
    r = Engine(make_spec(partitions=9001), "history")
    r.feed(op.to_dict() for op in h.ops)
    assert r.parts[9000].sends == [0, 1, 1, 0]


# -- the drain's edges (issue 33) -----------------------------------------------------

def test_an_ack_that_ended_once_the_drain_had_begun_is_set_aside_not_lost() -> None:
    """The drain reads to the HW taken before it began: 11, acknowledged at offset 1 after
    that, is past what it read. Acknowledged before the drain, the same loss is counted."""
    h = H()
    h.send(0, 10, offset=0)
    h.invoke(0, 11)
    h.drain([(0, 10)], hw=1)
    h.done(0, 11, offset=1)
    r = run(h, make_spec(acks="all"))
    assert r.valid == UNKNOWN and r.anomaly_counts["lost-write"] == 0
    (u,) = [u for u in r.unknown if u["affects_verdict"]]
    assert (u["kind"], u["count"], u["partition"]) == ("after-drain", 1, 0)
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.drain([(0, 10)], hw=1)
    assert run(h, make_spec(acks="all")).violations == ["lost-write"]


def test_a_poll_that_ended_once_the_drain_had_begun_is_set_aside_not_phantom() -> None:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, "info")
    h.drain([(0, 10)], hw=1)
    h.poll(5, [(0, 10), (1, 11)])
    r = run(h, make_spec(acks="all"))
    assert r.valid == UNKNOWN and r.anomaly_counts["phantom-read"] == 0
    assert [u["kind"] for u in r.unknown if u["affects_verdict"]] == ["after-drain"]
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, "info")
    h.poll(5, [(0, 10), (1, 11)])
    h.drain([(0, 10)], hw=1)
    assert run(h, make_spec(acks="all")).violations == ["phantom-read"]


def test_a_lost_write_in_a_gap_of_the_drain_is_a_missed_read_without_replicas() -> None:
    """Offsets below the HW are dense: the drain read 0 and 2 and skipped 1, where 11 was
    acknowledged; without replicas.jsonl that was a lost write. Truncated at 1 (HW 1), the
    loss stands."""
    h = H()
    for off in range(3):
        h.send(0, 10 + off, offset=off)
    h.drain([(0, 10), (2, 12)], hw=3)
    r = run(h, make_spec(acks="all"))
    assert r.valid == UNKNOWN and r.violations == []
    (u,) = [u for u in r.unknown if u["affects_verdict"]]
    assert (u["kind"], u["count"]) == ("drain-missed", 1)
    h = H()
    for off in range(3):
        h.send(0, 10 + off, offset=off)
    h.drain([(0, 10)], hw=1)
    assert run(h, make_spec(acks="all")).violations == ["lost-write"]


@pytest.mark.parametrize(("fault", "heal", "valid"),
                         [("clock", "reset-clock", False), ("kill", "start", True)])
def test_a_clock_fault_on_the_leader_excuses_no_loss_where_a_kill_does(fault: str, heal: str,
                                                                       valid: bool) -> None:
    # Replication does not rest on wall clocks: the same lost acks=1 write is a violation
    # after the leader's clock was bumped, and permitted after it was killed.
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    h.fault(fault, [1], kind="bump" if fault == "clock" else fault, offset_s=300,
            leaders={f"{TOPIC}/0": 1})
    h.fault(heal, [1])
    h.send(1, 12, offset=1)
    h.drain([(0, 10), (1, 12)])
    r = run(h, make_spec(acks="1"))
    assert r.valid is valid and r.anomaly_counts["lost-write"] == 1
    assert ("lost-write" in r.violations) is not valid
