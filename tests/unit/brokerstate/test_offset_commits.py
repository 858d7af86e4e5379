"""A group's offset commit records decoded from a replica's __consumer_offsets segments
(faultline/brokerstate/offset_commits.py), built by hand as Kafka's group coordinator
writes them (OffsetCommitKey v0 under key types 0 and 1, OffsetCommitValue v0 to v4)."""

from __future__ import annotations

import struct
from pathlib import Path

from faultline.brokerstate.offset_commits import offset_commits
from tests.unit.brokerstate.fakes import batch, segment, zigzag

GROUP = "faultline-g"


def string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def value(version: int, offset: int, epoch: int) -> bytes:
    """An OffsetCommitValue of ``version`` with empty metadata (past 4, laid out as 4)."""
    head = struct.pack(">hq", version, offset)
    if version in (0, 2):
        return head + string("") + struct.pack(">q", 7)
    if version == 1:
        return head + string("") + struct.pack(">qq", 7, -1)
    if version == 3:
        return head + struct.pack(">i", epoch) + string("") + struct.pack(">q", 7)
    return head + struct.pack(">i", epoch) + b"\x01" + struct.pack(">q", 7) + b"\x00"  # compact, tags


def record(delta: int, key: bytes, val: bytes | None) -> bytes:
    body = (b"\0" + zigzag(0) + zigzag(delta) + zigzag(len(key)) + key
            + (zigzag(-1) if val is None else zigzag(len(val)) + val) + zigzag(0))
    return zigzag(len(body)) + body


def commit(delta: int, partition: int, offset: int | None, version: int = 3, epoch: int = 2,
           group: str = GROUP, kind: int = 1) -> bytes:
    key = struct.pack(">h", kind) + string(group) + string("fl-queue") + struct.pack(">i", partition)
    return record(delta, key, None if offset is None else value(version, offset, epoch))


def records(base: int, *recs: bytes, attributes: int = 0) -> bytes:
    return batch(base, len(recs), b"".join(recs), attributes=attributes)


def test_a_groups_commits_are_read_in_log_order_whatever_their_versions(tmp_path: Path) -> None:
    """Two segments; a group metadata record (key type 2), another group's commit, a
    tombstone and value versions 0 to 4 between the group's commits (epoch -1: none)."""
    metadata = record(0, struct.pack(">h", 2) + string(GROUP), b"\0\3whatever")
    d = tmp_path / "__consumer_offsets-3"
    segment(d, 0, records(0, metadata, commit(1, 0, 5, version=0, kind=0), commit(2, 1, 6, version=1),
                          commit(3, 0, 9, group="other")))
    segment(d, 4, records(4, commit(0, 0, 7, version=2), commit(1, 0, 8, version=3, epoch=-1))
            + records(6, commit(0, 0, 9, version=4, epoch=4), commit(1, 1, None)))
    assert offset_commits(d, GROUP) == [
        [1, "fl-queue", 0, 5, None], [2, "fl-queue", 1, 6, None], [4, "fl-queue", 0, 7, None],
        [5, "fl-queue", 0, 8, None], [6, "fl-queue", 0, 9, 4], [7, "fl-queue", 1, None, None]]
    assert offset_commits(d, "none") == []


def test_what_cannot_be_told_makes_the_commits_unknown(tmp_path: Path) -> None:
    """A compressed batch, the group's commit in a transaction, a value of an unknown
    version, a record cut short: None. Another group's commit in a transaction is not the
    group's."""
    cases = {"gzip": records(0, commit(0, 0, 5), attributes=0x01),
             "txn": records(0, commit(0, 0, 5), attributes=0x10),
             "v5": records(0, commit(0, 0, 5, version=5)),
             "cut": records(0, commit(0, 0, 5)[:-6])}
    for name, data in cases.items():
        assert offset_commits(segment(tmp_path / name, 0, data).parent, GROUP) is None, name
    other = segment(tmp_path / "other", 0, records(0, commit(0, 0, 5, group="x"), attributes=0x10))
    assert offset_commits(other.parent, GROUP) == []
