"""Checkpoint parsing and record-batch walking for lose-unflushed, on bytes built here."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from faultline.errors import NemesisError
from faultline.nemeses.lose_unflushed import (
    CHECKPOINT,
    cut_point,
    end_offset,
    iter_batches,
    lose_unflushed,
    parse_checkpoint,
    partition_dirs,
    read_checkpoint,
    recovery_points,
    truncate_partition,
)


def batch(base: int, count: int, payload: int = 40, magic: int = 2) -> bytes:
    """A v2 record batch header (61 bytes) followed by ``payload`` filler bytes."""
    body = struct.pack(">iBIhiqqqhii", 0, magic, 0, 0, count - 1, 0, 0, -1, -1, -1, count)
    body += b"\xab" * payload
    return struct.pack(">qi", base, len(body)) + body


def segment(*batches: bytes) -> bytes:
    return b"".join(batches)


def test_header_layout_matches_kafka() -> None:
    b = batch(100, 5)
    assert len(b) == 61 + 40  # RECORD_BATCH_OVERHEAD is 61
    assert struct.unpack_from(">i", b, 23) == (4,)  # lastOffsetDelta at byte 23
    assert b[16] == 2  # magic


def test_parse_checkpoint() -> None:
    text = "0\n3\nfl-queue 0 17\nfl-queue 2 0\n__consumer_offsets 12 5\n"
    assert parse_checkpoint(text) == {("fl-queue", 0): 17, ("fl-queue", 2): 0,
                                      ("__consumer_offsets", 12): 5}
    assert parse_checkpoint("0\n0\n") == {}
    assert parse_checkpoint("") == {} and parse_checkpoint("0\n") == {}  # as Kafka reads them


@pytest.mark.parametrize("text,message", [
    ("1\n0\n", "unknown checkpoint version"),
    ("0\n2\nt 0 1\n", "header says 2 entries, found 1"),
    ("0\n1\nt 0\n", "malformed entry"),
    ("0\n1\nt x 1\n", "malformed entry"),
    ("0\nmany\n", "bad entry count"),
])
def test_parse_checkpoint_rejects(text: str, message: str) -> None:
    with pytest.raises(NemesisError, match=message):
        parse_checkpoint(text)


def test_read_checkpoint_absent_is_empty(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / CHECKPOINT) == {}


def test_iter_batches_walks_and_stops_at_torn_tail() -> None:
    data = segment(batch(0, 3), batch(3, 1), batch(4, 10, payload=100))
    walked = list(iter_batches(io.BytesIO(data)))
    assert [(b.base_offset, b.last_offset) for b in walked] == [(0, 2), (3, 3), (4, 13)]
    assert [b.position for b in walked] == [0, 101, 202]
    torn = data + batch(14, 2)[:30]
    assert len(list(iter_batches(io.BytesIO(torn)))) == 3
    assert len(list(iter_batches(io.BytesIO(torn[:5])))) == 0


def test_iter_batches_legacy_magic_uses_wrapper_offset() -> None:
    (b,) = iter_batches(io.BytesIO(batch(7, 1, magic=1)))
    assert b.last_offset == 7


def test_cut_point_keeps_only_batches_wholly_below() -> None:
    data = segment(batch(0, 3), batch(3, 3), batch(6, 3))
    f = io.BytesIO(data)
    assert cut_point(f, 0) == (0, None)
    assert cut_point(f, 3) == (101, 3)
    assert cut_point(f, 4) == (101, 3)  # batch 3..5 straddles the point: cut whole
    assert cut_point(f, 6) == (202, 6)
    assert cut_point(f, 9) == (303, 9)
    assert cut_point(f, 100) == (303, 9)


def _write_partition(d: Path, segs: dict[int, bytes]) -> None:
    d.mkdir(parents=True)
    for base, data in segs.items():
        (d / f"{base:020d}.log").write_bytes(data)
        for suffix in (".index", ".timeindex"):
            (d / f"{base:020d}{suffix}").write_bytes(b"\0" * 24)
    (d / "partition.metadata").write_text("version: 0\n")


def test_truncate_partition_across_segments(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _write_partition(d, {0: segment(batch(0, 5), batch(5, 5)),
                         10: segment(batch(10, 5), batch(15, 5)),
                         20: segment(batch(20, 5))})
    assert end_offset(d) == 25
    t = truncate_partition(d, 17)
    assert (t.old_end, t.new_end, t.recovery_point) == (25, 15, 17)
    assert sorted(p.name for p in d.iterdir()) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "00000000000000000010.log", "partition.metadata"]
    assert (d / "00000000000000000010.log").stat().st_size == 101
    assert t.bytes_removed == 202


def test_truncate_partition_recovery_point_at_segment_base(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _write_partition(d, {0: segment(batch(0, 10)), 10: segment(batch(10, 5))})
    t = truncate_partition(d, 10)
    assert t.new_end == 10
    assert [p.name for p in sorted(d.glob("*.log"))] == ["00000000000000000000.log"]
    assert (d / "00000000000000000000.log").stat().st_size == 101


def test_truncate_partition_nothing_flushed_keeps_an_empty_first_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _write_partition(d, {0: segment(batch(0, 10), batch(10, 1))})
    t = truncate_partition(d, 0)
    assert (t.old_end, t.new_end) == (11, 0)
    assert (d / "00000000000000000000.log").stat().st_size == 0


def test_truncate_partition_fully_flushed_changes_no_data(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    data = segment(batch(0, 10), batch(10, 1))
    _write_partition(d, {0: data})
    t = truncate_partition(d, 11)
    assert (t.old_end, t.new_end, t.bytes_removed) == (11, 11, 0)
    assert (d / "00000000000000000000.log").read_bytes() == data


def test_lose_unflushed_uses_the_checkpoint(tmp_path: Path) -> None:
    _write_partition(tmp_path / "fl-queue-0", {0: segment(batch(0, 4), batch(4, 4))})
    _write_partition(tmp_path / "fl-queue-1", {0: segment(batch(0, 4), batch(4, 4))})
    _write_partition(tmp_path / "new-topic-0", {0: segment(batch(0, 4))})
    _write_partition(tmp_path / "__cluster_metadata-0", {0: segment(batch(0, 4))})
    (tmp_path / "fl-queue-2.0123abcd-delete").mkdir()
    (tmp_path / CHECKPOINT).write_text("0\n2\nfl-queue 0 4\nfl-queue 1 8\n")
    assert set(partition_dirs(tmp_path)) == {("fl-queue", 0), ("fl-queue", 1), ("new-topic", 0)}
    out, _ = lose_unflushed(tmp_path)
    assert {k: (v.old_end, v.new_end) for k, v in out.items()} == {
        "fl-queue/0": (8, 4), "fl-queue/1": (8, 8), "new-topic/0": (4, 0)}
    assert end_offset(tmp_path / "__cluster_metadata-0") == 4
    only, _ = lose_unflushed(tmp_path, topics=["absent"])
    assert only == {}


def test_an_unreadable_checkpoint_means_nothing_was_flushed(tmp_path: Path) -> None:
    _write_partition(tmp_path / "t-0", {0: segment(batch(0, 4), batch(4, 4))})
    (tmp_path / CHECKPOINT).write_text("0\n2\nt 0 4\n")
    points, why = recovery_points(tmp_path)
    assert points == {} and why is not None and "header says 2 entries" in why
    assert {k: v.new_end for k, v in lose_unflushed(tmp_path)[0].items()} == {"t/0": 0}
