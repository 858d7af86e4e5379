"""Parsing real DumpLogSegments output, and the timeline's effective-state fill.

``data/dumplogsegments-metadata.txt`` is the real output of Kafka 4.3.1's
``org.apache.kafka.tools.DumpLogSegments --cluster-metadata-decoder`` on a 3-node local
cluster: topic ``it-topic`` created with leaders 3, 1, 2; node 3 killed (partition 0
moves to node 1); node 3 started again and back in every ISR.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from faultline.brokerstate.metadata_log import RawRecord, parse_dump, timeline
from faultline.brokerstate.replica_logs import replica_summary
from tests.unit.brokerstate.fakes import batch, segment

DUMP = (Path(__file__).parent / "data" / "dumplogsegments-metadata.txt").read_text()
START_MS = 1795317075177


def test_parses_every_record_of_real_output() -> None:
    records = list(parse_dump(DUMP))
    assert [r.offset for r in records] == sorted(r.offset for r in records)
    assert len(records) == DUMP.count("\n| offset: ")
    types = {r.type for r in records}
    assert {"partition", "partition-change", "topic", "register-broker", "broker-registration-change",
            "leader-change", "feature-level", "no-op"} <= types
    first = records[0]
    assert first.type == "leader-change" and first.data["leaderId"] == 3


def test_real_timeline_shows_the_election_and_the_fencing() -> None:
    lines = [x for x in timeline(parse_dump(DUMP), START_MS) if x.get("topic") == "it-topic"]
    p0 = [x for x in lines if x.get("partition") == 0]
    assert [(x["type"], x["leader"], x["isr"], x["leader_epoch"]) for x in p0] == [
        ("partition", 3, [3, 1, 2], 0),
        ("partition-change", 1, [1, 2], 1),  # node 3 killed: leader 1, epoch 1
        ("partition-change", 1, [1, 2, 3], 1),  # back in the ISR: leader unchanged, epoch too
    ]
    assert "leader" not in p0[2]["raw"]  # the record itself said nothing of the leader
    assert p0[1]["time"] == (1795317094984 - START_MS) * 1_000_000
    fencing = [(x["broker"], x["fenced"]) for x in timeline(parse_dump(DUMP), START_MS)
               if x["type"] == "broker-registration-change" and x["fenced"] is not None]
    fenced_at = fencing.index((3, True))
    assert (3, False) in fencing[fenced_at:]  # unfenced again after it came back


def _rec(offset: int, type_: str, **data: object) -> RawRecord:
    return RawRecord(offset, 1000 + offset, type_, 0, data)


def test_absent_fields_mean_unchanged_and_leader_bumps_the_epoch() -> None:
    recs = [
        _rec(0, "topic", name="t", topicId="T"),
        _rec(1, "partition", topicId="T", partitionId=0, leader=1, isr=[1, 2, 3], replicas=[1, 2, 3],
             leaderEpoch=4, leaderRecoveryState=0),
        _rec(2, "partition-change", topicId="T", partitionId=0, isr=[1, 2]),
        _rec(3, "partition-change", topicId="T", partitionId=0, leader=-1, isr=[],
             eligibleLeaderReplicas=[1, 2]),
        _rec(4, "partition-change", topicId="T", partitionId=0, leader=2, isr=[2],
             eligibleLeaderReplicas=[1]),
        _rec(5, "partition-change", topicId="T", partitionId=0, leader=-2, leaderRecoveryState=-1),
        _rec(6, "clear-elr", topicName="t"),
        _rec(7, "partition-change", topicId="T", partitionId=0, leader=3, isr=[3], leaderRecoveryState=1),
    ]
    out = [x for x in timeline(recs, 1000) if x.get("partition") == 0]
    got = [(x["leader"], x["isr"], x["elr"], x["leader_epoch"], x["leader_recovery_state"]) for x in out]
    assert got == [
        (1, [1, 2, 3], [], 4, 0),
        (1, [1, 2], [], 4, 0),
        (None, [], [1, 2], 5, 0),  # -1: no leader, and still an epoch bump
        (2, [2], [1], 6, 0),
        (2, [2], [1], 6, 0),  # -2 and -1: nothing changed
        (3, [3], [], 7, 1),  # ClearElr emptied the ELR; RECOVERING after an unclean election
    ]
    assert out[0]["time"] == 1_000_000 and out[0]["topic"] == "t"


def test_a_clear_elr_empties_the_last_known_elr_too_and_without_a_topic_name_every_topics() -> None:
    """Kafka's ClearElrRecord: a named topic's ELR and last known ELR are emptied; an empty
    topic name clears every topic's (TopicsDelta.replay)."""
    recs = [
        _rec(0, "topic", name="t", topicId="T"),
        _rec(1, "topic", name="u", topicId="U"),
        *(_rec(2 + i, "partition", topicId=tid, partitionId=0, leader=-1, isr=[], replicas=[1, 2, 3],
               eligibleLeaderReplicas=[1], lastKnownElr=[2], leaderEpoch=0) for i, tid in enumerate("TU")),
        _rec(4, "clear-elr", topicName="u"),
        _rec(5, "partition-change", topicId="T", partitionId=0, isr=[3]),
        _rec(6, "partition-change", topicId="U", partitionId=0, isr=[3]),
        _rec(7, "clear-elr", topicName=""),
        _rec(8, "partition-change", topicId="T", partitionId=0, isr=[2]),
    ]
    got = [(x["topic"], x["elr"], x["last_known_elr"]) for x in timeline(recs, 1000)
           if x["type"] == "partition-change"]
    assert got == [("t", [1], [2]), ("u", [], []), ("t", [], [])]


def test_a_change_of_an_unseen_partition_has_unknown_state() -> None:
    (line,) = timeline([_rec(9, "partition-change", topicId="X", partitionId=2, isr=[1])], 0)
    assert line["topic"] == "X"
    assert line["leader"] is None and line["isr"] is None and line["leader_epoch"] is None


def test_a_replica_is_summarized_batch_by_batch(tmp_path: Path) -> None:
    seg = segment(tmp_path / "t-0", 0, batch(0, 3, b"abc") + batch(3, 2, b"de", epoch=1, producer=(7, 2, 40))
                  + batch(5, 1, b"f", epoch=1)[:-1])  # the tail cut short
    (tmp_path / "replication-offset-checkpoint").write_text("0\n2\nt 0 4\nother 1 9\n")
    summary = replica_summary(tmp_path, "t", 0)
    assert summary == {
        "topic": "t", "partition": 0, "log_start_offset": 0, "log_end_offset": 5, "hw_checkpoint": 4,
        "batches": [[0, 2, 0, zlib.crc32(b"abc"), -1, -1, -1, -1, "data"],
                    [3, 4, 1, zlib.crc32(b"de"), 7, 2, 40, 41, "data"]]}
    (tmp_path / "replication-offset-checkpoint").write_text("0\n3\nt 0 4\n")
    assert replica_summary(tmp_path, "t", 0) == {**summary, "hw_checkpoint": None}, "malformed"
    seg.write_bytes(seg.read_bytes()[:-(len(batch(5, 1, b"f")) - 1)])  # rolled after offset 4
    segment(tmp_path / "t-0", 5, batch(5, 1, b"f", epoch=1))
    assert replica_summary(tmp_path, "t", 0) == {
        **summary, "hw_checkpoint": None, "log_end_offset": 6,
        "batches": [*summary["batches"], [5, 5, 1, zlib.crc32(b"f"), -1, -1, -1, -1, "data"]]}
    assert replica_summary(tmp_path, "t", 1) is None
