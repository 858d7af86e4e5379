"""Cutting partition logs back to their recovery points, on segments built here.

Batch walking and checkpoint parsing are :mod:`faultline.brokerstate.segments`' and are
tested with it; here, what lose-unflushed makes of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultline.errors import NemesisError
from faultline.nemeses.lose_unflushed import (
    CHECKPOINT,
    cut_point,
    end_offset,
    lose_unflushed,
    partition_dirs,
    read_checkpoint,
    recovery_points,
    truncate_partition,
)
from tests.unit.brokerstate import fakes


def batch(base: int, count: int) -> bytes:
    """A v2 record batch of ``count`` records, 101 bytes: the 61-byte header and 40 bytes."""
    return fakes.batch(base, count, b"\xab" * 40)


def segment(*batches: bytes) -> bytes:
    return b"".join(batches)


def test_read_checkpoint_absent_is_empty(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / CHECKPOINT) == {}
    (tmp_path / CHECKPOINT).write_text("0\n1\nt 0 4\n")
    assert read_checkpoint(tmp_path / CHECKPOINT) == {("t", 0): 4}


@pytest.mark.parametrize("data,message", [
    (b"0\n2\nt 0 1\n", "header says 2 entries, found 1"),
    (b"1\n0\n", "unknown checkpoint version"),
    (b"0\n1\n\xff 0 1\n", "can't decode"),
])
def test_read_checkpoint_names_the_file_it_cannot_read(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / CHECKPOINT
    path.write_bytes(data)
    with pytest.raises(NemesisError, match=message) as raised:
        read_checkpoint(path)
    assert str(raised.value).startswith(f"{path}: ")


def test_cut_point_keeps_only_batches_wholly_below(tmp_path: Path) -> None:
    f = fakes.segment(tmp_path, 0, segment(batch(0, 3), batch(3, 3), batch(6, 3)))
    assert cut_point(f, 0) == (0, None)
    assert cut_point(f, 3) == (101, 3)
    assert cut_point(f, 4) == (101, 3)  # batch 3..5 straddles the point: cut whole
    assert cut_point(f, 5) == (101, 3)  # its last offset, 5, is not flushed either
    assert cut_point(f, 6) == (202, 6)
    assert cut_point(f, 9) == (303, 9)
    assert cut_point(f, 100) == (303, 9)


def test_cut_point_is_at_a_torn_tail_or_zero_padding(tmp_path: Path) -> None:
    data = segment(batch(0, 3), batch(3, 3))
    assert cut_point(fakes.segment(tmp_path, 0, data + batch(6, 3)[:50]), 100) == (202, 6)
    assert cut_point(fakes.segment(tmp_path, 0, data + b"\0" * 64), 100) == (202, 6)


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
