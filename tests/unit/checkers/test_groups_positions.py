"""The group anomalies of a member's position (faultline/checkers/groups.py):
redelivery-below-commit and reset-without-cause, each in histories that differ in one fact
and get different verdicts; and a fail commit, which may have been stored, for commit-lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from faultline.checkers import groups
from faultline.checkers.results_file import check_run
from tests.schemas import SCHEMAS, validator
from tests.unit.checkers.test_groups import TOPIC, G, committed, five, group_spec, handed_over, judged, stored

DOCS = Path(__file__).resolve().parents[3] / "docs"

REDELIVERY, RESET = "redelivery-below-commit", "reset-without-cause"


def counts(out: dict[str, Any]) -> tuple[int, int]:
    return out["anomaly_counts"][REDELIVERY], out["anomaly_counts"][RESET]


def takeover(first: int, fault: str | None = None, acks: str = "all", **kw: Any) -> dict[str, Any]:
    """:func:`handed_over`, process 2 reading from ``first`` to 7, judged."""
    return judged(handed_over(range(first, 8), fault), acks=acks, **kw)


# -- redelivery-below-commit -------------------------------------------------------------------


def test_a_member_taking_over_after_a_commit_reads_from_it() -> None:
    """The new owner fetches the group's committed offset on assignment
    (ConsumerCoordinator.refreshCommittedOffsetsIfNeeded, OffsetFetch): below it is more
    than at-least-once redelivers."""
    assert counts(takeover(5)) == (0, 0)
    out = takeover(2)
    assert out["violations"] == [REDELIVERY] and counts(out) == (1, 0)
    (ex,) = out["anomalies"][REDELIVERY]
    assert (ex["process"], ex["offset"], ex["committed"], ex["previous"]) == (2, 2, [5], None)


def test_a_commit_still_in_flight_at_the_assignment_judges_no_redelivery() -> None:
    """A commit that ended after the assignment may have been stored after the new owner's
    fetch, which then found no committed offset: it starts at the log start."""
    for ended_before, verdict in ((False, True), (True, False)):
        h = G()
        five(h)
        h.op(1, "invoke", "commit", {"offsets": [[TOPIC, 0, 5, 0]]})
        if ended_before:
            h.op(1, "ok", "commit", {"offsets": [[TOPIC, 0, 5, 0]]})
        h.rebalance(1, "revoke", [0])
        h.rebalance(2, "assign", [0])
        if not ended_before:  # (its revocation came first: not this test's point)
            h.op(1, "ok", "commit", {"offsets": [[TOPIC, 0, 5, 0]]})
        h.poll(2, [(0, off, 100 + off) for off in range(8)])
        assert judged(h)["valid"] is verdict


def lower(outcome: str | None, first: int = 2) -> G:
    """Process 1 commits 5 (ok); process 3 then commits 2 ending ``outcome`` (None: no such
    commit); process 2 is assigned and reads from ``first``."""
    h = G()
    five(h)
    h.commit(1, [(0, 5)])
    if outcome is not None:
        h.rebalance(3, "assign", [])
        h.poll(3, [(0, 1, 101)])
        h.commit(3, [(0, 2)], outcome)
    h.rebalance(2, "assign", [0])
    h.poll(2, [(0, off, 100 + off) for off in range(first, 8)])
    return h


def test_a_lower_commit_that_may_have_been_stored_explains_the_read() -> None:
    """An info or fail commit may have been stored (a retried request's first attempt): the
    new owner may have fetched it."""
    assert judged(lower(None))["violations"] == [REDELIVERY]
    for outcome in ("info", "fail"):
        assert counts(judged(lower(outcome))) == (0, 0), outcome
        assert judged(lower(outcome, first=1))["violations"] == [REDELIVERY], outcome


def test_a_commit_requested_before_a_later_one_ended_ok_is_not_fetched() -> None:
    """Process 1 commits 3, process 3 then 5 (ok) once 3 ended: the coordinator stored 5
    last, so a new owner reading from 3 got more than at-least-once; 3 still in flight when
    5 was requested may have been stored last."""
    for overlap, verdict in ((False, False), (True, True)):
        h = G()
        five(h)
        h.rebalance(3, "assign", [])
        h.poll(3, [(0, 4, 104)])
        h.op(1, "invoke", "commit", {"offsets": [[TOPIC, 0, 3, 0]]})
        if not overlap:
            h.op(1, "ok", "commit", {"offsets": [[TOPIC, 0, 3, 0]]})
        h.op(3, "invoke", "commit", {"offsets": [[TOPIC, 0, 5, 0]]})
        if overlap:
            h.op(1, "ok", "commit", {"offsets": [[TOPIC, 0, 3, 0]]})
        h.op(3, "ok", "commit", {"offsets": [[TOPIC, 0, 5, 0]]})
        h.rebalance(1, "revoke", [0])
        h.rebalance(2, "assign", [0])
        h.poll(2, [(0, off, 100 + off) for off in range(3, 8)])
        assert judged(h)["valid"] is verdict


def test_a_truncation_permits_a_redelivery_with_acks_1() -> None:
    """acks=1 and the leader killed: the log may lose what the group committed past, the
    new owner's fetch is out of range and auto.offset.reset=earliest rewinds it
    (KAFKA-19902)."""
    out = takeover(0, fault="kill", acks="1")
    assert out["valid"] is True and out["permitted"] == [REDELIVERY]
    assert "KAFKA-19902" in out["permitted_reasons"][REDELIVERY]
    assert takeover(0, fault="kill", acks="all")["violations"] == [REDELIVERY]


def test_a_data_destroying_fault_after_the_commit_permits_a_redelivery() -> None:
    """__consumer_offsets keeps min.insync.replicas=1: a lose-unflushed may take the commit
    with the coordinator's log (guarantees.offsets_destroyed, as for commit-lost)."""
    out = takeover(0, fault="lose-unflushed")
    assert out["valid"] is True and "__consumer_offsets" in out["permitted_reasons"][REDELIVERY]
    assert takeover(0, fault="kill")["violations"] == [REDELIVERY]


def test_a_retired_async_member_leaves_a_redelivery_unknown() -> None:
    """A member retired while the group commits async or auto may have committed lower after
    its last journaled op."""
    h = G()
    five(h)
    h.commit(1, [(0, 5)])
    h.rebalance(3, "assign", [])
    h.commit(3, [], "info")  # retires process 3
    h.rebalance(2, "assign", [0])
    h.poll(2, [(0, off, 100 + off) for off in range(2, 8)])
    out = judged(h, asynchronous=True)
    assert out["valid"] == "unknown" and out["unknown"] == ["commit-unjournaled"]
    assert judged(h)["violations"] == [REDELIVERY], "sync: a retired member commits no more"


# -- reset-without-cause -------------------------------------------------------------------------


def reads(offsets: list[int], acks: str = "all", fault: bool = False) -> dict[str, Any]:
    """Process 1 assigned partition 0 reads ``offsets`` in that order, the leader killed
    before the last read when ``fault``."""
    h = G()
    h.rebalance(1, "assign", [0])
    h.poll(1, [(0, off, 100 + off) for off in offsets[:-1]])
    if fault:
        h.kill()
    h.poll(1, [(0, offsets[-1], 100 + offsets[-1])])
    return judged(h, acks=acks)


def test_a_position_that_jumps_within_an_assignment_is_reset_without_cause() -> None:
    assert counts(reads([0, 1, 2, 3])) == (0, 0)
    forward = reads([0, 1, 2, 4])
    assert forward["violations"] == [RESET]
    (ex,) = forward["anomalies"][RESET]
    assert (ex["previous"], ex["offset"], ex["committed"]) == (2, 4, None)
    assert reads([0, 1, 2, 1])["violations"] == [RESET], "back"


def test_a_truncation_permits_a_reset() -> None:
    """acks=1 and the leader killed within the assignment: the log may have been truncated
    under the member's position, whose fetch is then out of range."""
    out = reads([0, 1, 2, 0], acks="1", fault=True)
    assert out["valid"] is True and out["permitted"] == [RESET]
    assert reads([0, 1, 2, 0], acks="all", fault=True)["violations"] == [RESET]


def test_a_first_read_is_at_the_committed_offset_or_with_none_at_the_log_start() -> None:
    """auto.offset.reset=earliest: with no committed offset a member starts at the log start;
    with one, above it is a reset without cause, not a redelivery."""
    assert counts(reads([0, 1])) == (0, 0)
    out = reads([3, 4])
    assert out["violations"] == [RESET]
    assert out["anomalies"][RESET][0]["committed"] == []
    assert counts(takeover(7)) == (0, 1)


def test_an_assignment_of_a_partition_still_held_keeps_its_position() -> None:
    """A member assigned a partition it holds, with no revocation between, carries on at
    its own next offset; after a revocation it starts over at the committed offset."""
    for revoked, verdict in ((False, True), (True, False)):
        h = G()
        h.rebalance(1, "assign", [0])
        h.poll(1, [(0, 0, 100), (0, 1, 101)])
        if revoked:
            h.rebalance(1, "revoke", [0])
        h.rebalance(1, "assign", [0])
        h.poll(1, [(0, 2, 102)])
        assert judged(h)["valid"] is verdict


# -- commit-lost, by a fail commit -----------------------------------------------------------------


def test_a_committed_offset_a_fail_commit_may_have_stored_is_not_lost() -> None:
    assert judged(committed(info=None), end={0: 4})["violations"] == ["commit-lost"]
    h = committed()
    h.commit(1, [(0, 4)], "fail")
    assert judged(h, end={0: 4})["anomaly_counts"]["commit-lost"] == 0


# -- the names ----------------------------------------------------------------------------------------


def test_the_results_schema_and_the_history_doc_name_every_group_anomaly(tmp_path: Path) -> None:
    """results.json's ``group`` counts exactly the group checker's anomalies, which
    docs/history.md lists; a stored run's results with a redelivery and a reset hold to it."""
    schema = json.loads((SCHEMAS / "results.schema.json").read_text())
    names = schema["properties"]["group"]["properties"]["anomaly_counts"]["propertyNames"]["enum"]
    assert tuple(names) == groups.GROUP_ANOMALIES
    listed = (DOCS / "history.md").read_text().replace("\n  ", " ")
    assert ", ".join(f"`{a}`" for a in groups.GROUP_ANOMALIES) in listed
    h = handed_over((2, 3, 4, 6, 7))
    h.drain(0, [(off, 100 + off) for off in range(8)])
    results = check_run(stored(tmp_path / "g", group_spec(), h)).to_json()
    validator("results.schema.json").validate(results)
    assert results["violations"] == [REDELIVERY, RESET] == results["group"]["violations"]
    bad = {**results, "group": {**results["group"], "anomaly_counts": {"redelivery": 1}}}
    assert not validator("results.schema.json").is_valid(bad)
