"""Stand-ins for the observer's and the log readers' inputs: record batches and segments
built by hand, and a client source that answers from a dict."""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path

from faultline.brokerstate.segments import HW_CHECKPOINT
from faultline.cluster.kafka_client import HighWatermark
from faultline.cluster.protocol import PartitionState

TOPIC = "fl-queue"


def batch(base: int, records: int, body: bytes = b"v" * 20, magic: int = 2, epoch: int = 0,
          producer: tuple[int, int, int] = (-1, -1, -1), attributes: int = 0) -> bytes:
    """A v2 record batch written in leader epoch ``epoch`` by ``producer`` (id, epoch, base
    sequence; -1 each for none), with ``attributes``: the 61-byte header (CRC over the body
    only, enough to tell two batches apart) and ``body`` standing in for the records."""
    rest = struct.pack(">iBIhiqqqhii", epoch, magic, zlib.crc32(body), attributes, records - 1,
                       0, 0, *producer, records) + body
    return struct.pack(">qi", base, len(rest)) + rest


def zigzag(n: int) -> bytes:
    """``n`` as a Kafka record's zigzag varint."""
    u, out = (n << 1) ^ (n >> 63), b""
    while u > 0x7F:
        out += bytes([(u & 0x7F) | 0x80])
        u >>= 7
    return out + bytes([u])


def marker(base: int, kind: int, producer: tuple[int, int] = (7, 0), timestamp_delta: int = 0) -> bytes:
    """A control batch (transactional, control) holding one control record of type ``kind``
    (0 abort, 1 commit) for ``producer`` (id, epoch), as a transaction coordinator writes it:
    key ``version 0 | type``, value ``version 0 | coordinator epoch``."""
    key, value = struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 3)
    record = (b"\0" + zigzag(timestamp_delta) + zigzag(0) + zigzag(len(key)) + key
              + zigzag(len(value)) + value + zigzag(0))
    return batch(base, 1, zigzag(len(record)) + record, producer=(*producer, -1), attributes=0x30)


def segment(dir: Path, base: int, data: bytes) -> Path:
    """Write ``data`` as the segment of base offset ``base`` in partition directory ``dir``."""
    dir.mkdir(parents=True, exist_ok=True)
    path = dir / f"{base:020d}.log"
    path.write_bytes(data)
    return path


class FakeSource:
    """Answers as a client would, or raises ``fail`` when it is set."""

    def __init__(self, state: dict[int, PartitionState], hws: dict[int, HighWatermark | str],
                 lsos: dict[int, HighWatermark | str] | None = None) -> None:
        self.state, self.hws, self.lsos = state, hws, lsos or {}
        self.fail: Exception | None = None
        self.closed_in: str | None = None  # the thread that closed it

    def partitions(self, topic: str) -> dict[int, PartitionState]:
        if self.fail is not None:
            raise self.fail
        return self.state

    def high_watermarks(self, topic: str, partitions: Sequence[int],
                        committed: bool = False) -> dict[int, HighWatermark | str]:
        if self.fail is not None:
            raise self.fail
        answers = self.lsos if committed else self.hws
        return {p: answers[p] for p in partitions if p in answers}

    def close(self) -> None:
        self.closed_in = threading.current_thread().name


def log_dirs(tmp_path: Path) -> dict[int, Path]:
    """Nodes 1-3 with partition 0 at LEO 10, 10, 6 and checkpoints 6, 6, missing;
    partition 1 has no directory anywhere."""
    dirs = {n: tmp_path / f"n{n}" for n in (1, 2, 3)}
    for n, d in dirs.items():
        segment(d / f"{TOPIC}-0", 0, batch(0, 6) + (batch(6, 4) if n != 3 else b""))
        if n != 3:
            (d / HW_CHECKPOINT).write_text(f"0\n2\n{TOPIC} 0 6\nother 0 99\n")
    return dirs
