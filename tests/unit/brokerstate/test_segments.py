"""Reading batches and LEOs from segment files and offsets from checkpoint files:
hand-built batches, and a segment a real Kafka 4.3.1 broker wrote (``data/kafka-4.3.1-p0/``)."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

from faultline.brokerstate.segments import (
    Batch,
    LogEndReader,
    control_type,
    iter_batches,
    parse_checkpoint,
    read_batch_kinds,
    read_batches,
    read_checkpoint,
    segment_files,
)
from tests.unit.brokerstate.fakes import batch, marker, segment

DATA = Path(__file__).parent / "data"


def test_batches_give_their_offsets_extent_epoch_crc_and_producer() -> None:
    a, b = batch(0, 3), batch(3, 2, b"w" * 100, epoch=7, producer=(4242, 3, 17))
    assert list(iter_batches(a + b)) == [
        Batch(0, len(a), 0, 2, 0, zlib.crc32(b"v" * 20), -1, -1, -1),
        Batch(len(a), len(b), 3, 4, 7, zlib.crc32(b"w" * 100), 4242, 3, 17)]
    assert [x.last_sequence for x in iter_batches(a + b)] == [-1, 18]
    assert [x.position for x in iter_batches(a + b, position=1000)] == [1000, 1000 + len(a)]


def test_a_batch_may_end_past_the_buffer_but_its_header_may_not() -> None:
    a, b = batch(0, 3), batch(3, 2)
    assert [x.base_offset for x in iter_batches((a + b)[: len(a) + 61])] == [0, 3]
    assert [x.base_offset for x in iter_batches((a + b)[: len(a) + 60])] == [0]


def test_the_last_sequence_wraps_as_a_producers_does() -> None:
    """Kafka's DefaultRecordBatch.incrementSequence: past 2^31 - 1 the sequence goes on from 0."""
    top = (1 << 31) - 1
    [x] = iter_batches(batch(10, 3, producer=(5, 0, top - 1)))
    assert (x.base_sequence, x.last_sequence) == (top - 1, 0)


@pytest.mark.parametrize("junk", [
    b"\0" * 64,  # preallocated, never written
    batch(5, 1, magic=1),  # a pre-0.11 message set
    batch(5, 1, magic=3),
    struct.pack(">qi", 5, -20) + batch(5, 1)[12:],  # a negative batchLength
    struct.pack(">qi", 5, 20) + batch(5, 1)[12:],  # shorter than a v2 header
    struct.pack(">q", -1) + batch(5, 1)[8:],  # a negative baseOffset
    batch(5, 0),  # a negative lastOffsetDelta
])
def test_iteration_stops_at_what_is_not_a_v2_batch(junk: bytes, tmp_path: Path) -> None:
    data = batch(0, 5) + junk + batch(6, 1)
    assert [x.base_offset for x in iter_batches(data)] == [0]
    assert [x.base_offset for x in read_batches(segment(tmp_path, 0, data))] == [0]


def test_a_segment_file_ends_at_its_torn_tail(tmp_path: Path) -> None:
    whole = batch(0, 3, epoch=1) + batch(3, 2, b"x" * 3000, epoch=2)
    seg = segment(tmp_path, 0, whole + batch(5, 1)[:-1])
    batches = list(read_batches(seg))
    assert [(b.base_offset, b.last_offset, b.leader_epoch) for b in batches] == [(0, 2, 1), (3, 4, 2)]
    assert batches[-1].end == len(whole)
    assert list(read_batches(segment(tmp_path, 5, batch(5, 1)[:26]))) == []


def test_segments_are_the_log_files_in_base_offset_order(tmp_path: Path) -> None:
    for name in ["00000000000000000120.log", "00000000000000000000.log", "00000000000000000120.index",
                 "00000000000000000300.log.deleted", "120.log", "leader-epoch-checkpoint"]:
        (tmp_path / name).write_bytes(b"")
    assert segment_files(tmp_path) == [(0, tmp_path / "00000000000000000000.log"),
                                       (120, tmp_path / "00000000000000000120.log")]
    assert segment_files(tmp_path / "missing") == []


def test_leo_counts_complete_batches_only_and_reads_incrementally(tmp_path: Path) -> None:
    reader = LogEndReader(tmp_path)
    assert reader.read() is None, "no partition directory yet"
    seg = segment(tmp_path, 0, b"")
    assert reader.read() == 0, "an empty segment: its base offset"
    whole = batch(0, 3) + batch(3, 4)
    with seg.open("ab") as fh:
        fh.write(whole + batch(7, 2)[:40])  # the last batch half written
    assert reader.read() == 7
    with seg.open("ab") as fh:
        fh.write(batch(7, 2)[40:])
    assert reader.read() == 9


def test_leo_after_a_roll_is_the_new_segments(tmp_path: Path) -> None:
    reader = LogEndReader(tmp_path / "t-0")
    segment(tmp_path / "t-0", 0, batch(0, 10))
    assert reader.read() == 10
    seg = segment(tmp_path / "t-0", 10, b"")
    assert reader.read() == 10
    seg.write_bytes(batch(10, 5))
    assert reader.read() == 15


def test_truncation_makes_the_reader_start_over(tmp_path: Path) -> None:
    reader = LogEndReader(tmp_path)
    first, second = batch(0, 4), batch(4, 4)
    seg = segment(tmp_path, 0, first + second)
    assert reader.read() == 8
    os.truncate(seg, len(first))  # a follower truncating to offset 4
    assert reader.read() == 4
    seg.write_bytes(first + second)
    assert reader.read() == 8
    os.truncate(seg, len(first) + 70)  # cut inside the last batch, its header still whole
    assert reader.read() == 4


def test_truncated_and_rewritten_between_reads_is_noticed(tmp_path: Path) -> None:
    reader = LogEndReader(tmp_path)
    seg = segment(tmp_path, 0, batch(0, 4) + batch(4, 4))
    assert reader.read() == 8
    # truncated to 4, then a new leader's longer batches written: same size or more,
    # same file, but the batch last read is gone and the next header is not where it was
    seg.write_bytes(batch(0, 4) + batch(4, 2, b"x" * 40) + batch(6, 1))
    assert reader.read() == 7


def test_a_replaced_segment_is_read_from_the_start(tmp_path: Path) -> None:
    reader = LogEndReader(tmp_path)
    seg = segment(tmp_path, 0, batch(0, 4))
    assert reader.read() == 4
    tmp = tmp_path / "new"
    tmp.write_bytes(batch(0, 4) + batch(4, 1))
    tmp.replace(seg)  # another inode under the same name
    assert reader.read() == 5
    for p in tmp_path.iterdir():
        p.unlink()
    assert reader.read() is None, "wiped"


def test_a_segment_larger_than_one_read(tmp_path: Path) -> None:
    big = b"".join(batch(i * 100, 100, b"r" * 5000) for i in range(300))  # ~1.5 MB
    seg = segment(tmp_path, 0, big)
    assert LogEndReader(tmp_path).read() == 30_000
    assert seg.stat().st_size > 1 << 20


def test_a_segment_written_by_kafka() -> None:
    """Written by Kafka 4.3.1: idempotent batches of 1 and 5 records, 10 gzip-compressed
    from another producer, then 3 from a plain producer. The offsets, producer ids,
    epochs and sequences are those Kafka's own ``DumpLogSegments`` prints for this file."""
    part = DATA / "kafka-4.3.1-p0"
    path = part / "00000000000000000000.log"
    batches = list(iter_batches(path.read_bytes()))
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 0), (1, 5), (6, 15), (16, 18)]
    assert [(b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) for b in batches] == [
        (0, 0, 0, 0), (0, 0, 1, 5), (1000, 0, 0, 9), (-1, -1, -1, -1)]
    assert batches[-1].end == path.stat().st_size
    assert list(read_batches(path)) == batches
    assert LogEndReader(part).read() == 19


def test_checkpoint_files_parse() -> None:
    text = "0\n3\nfl-queue 1 50\nfaultline-health 0 2\nfl-queue 0 25\n"
    assert parse_checkpoint(text) == {("fl-queue", 1): 50, ("faultline-health", 0): 2, ("fl-queue", 0): 25}
    assert parse_checkpoint("0\n0\n") == {}
    assert parse_checkpoint("") == {} and parse_checkpoint("0\n") == {}  # as Kafka reads them


@pytest.mark.parametrize("text,message", [
    ("1\n0\n", "unknown checkpoint version"),
    ("0\n2\nt 0 1\n", "header says 2 entries, found 1"),
    ("0\n1\nt 0 1\n\n", "header says 1 entries, found 2"),
    ("0\n1\nt 0\n", "malformed entry"),
    ("0\n1\nt x 1\n", "malformed entry"),
    ("0\n1\n\n", "malformed entry"),
    ("0\nmany\n", "bad entry count"),
    ("0\n\n", "bad entry count"),
])
def test_a_malformed_checkpoint_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_checkpoint(text)


def test_read_checkpoint_is_none_when_missing_or_malformed(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    assert read_checkpoint(path) is None
    path.write_text("0\n2\nt 0 1\n")
    assert read_checkpoint(path) is None
    path.write_bytes(b"0\n1\n\xff 0 1\n")
    assert read_checkpoint(path) is None
    path.write_text("0\n1\nt 0 1\n")
    assert read_checkpoint(path) == {("t", 0): 1}


def test_a_batch_says_whether_it_holds_records_a_transactions_or_its_marker(tmp_path: Path) -> None:
    """Attributes bit 4 (transactional) and bit 5 (control), and a control record's key
    type: 0 abort, 1 commit, another type is some other control record (a timestamp delta
    of several varint bytes before the key is read past)."""
    data = (batch(0, 2) + batch(2, 2, producer=(7, 0, 0), attributes=0x10) + marker(4, 1)
            + marker(5, 0, timestamp_delta=1 << 40) + marker(6, 2))
    path = segment(tmp_path / "fl-queue-0", 0, data)
    assert [(b.base_offset, b.transactional, b.control, kind) for b, kind in read_batch_kinds(path)] == [
        (0, False, False, "data"), (2, True, False, "txn"), (4, True, True, "commit"),
        (5, True, True, "abort"), (6, True, True, "control")]


def test_a_control_record_cut_short_of_its_key_is_no_marker() -> None:
    """Length, attributes, timestamp and offset deltas, key length (one byte each here) and
    the 4-byte key: 9 bytes."""
    record = marker(0, 1)[61:]
    assert [control_type(record[:n]) for n in range(11)] == [None] * 9 + [1, 1]


def test_a_real_brokers_batches_hold_records_outside_any_transaction() -> None:
    [(_, path)] = segment_files(DATA / "kafka-4.3.1-p0")
    assert {kind for _, kind in read_batch_kinds(path)} == {"data"}
