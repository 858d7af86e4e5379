"""What the white-box observer costs: reading LEOs from segment files, and one round.

    .venv/bin/python benchmarks/bench_observer.py              # segments, then a 3-node cluster
    .venv/bin/python benchmarks/bench_observer.py --no-cluster # segments only (no root needed)

*segments*: a synthetic segment of record batches (hand-built v2 headers, the sizes a
``linger.ms=5`` producer makes) read cold by a fresh :class:`LogEndReader` (MB/s and
batches/s of header walking), then the incremental read after 1000 more batches.
*summary*: :func:`replica_summary` of the same segment (every batch header parsed into
a replicas.jsonl line, after the run), cold and warm page cache alike.
*round*: one :meth:`Observer.sample` on a real cluster with 3 partitions x 3 replicas
after ``--records`` acks=all records per partition, median and max of ``--rounds``
rounds, split into the client part (metadata + ListOffsets) and the disk part (LEO +
checkpoints). Needs root for the cluster.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from faultline.brokerstate.observe import KafkaSource, Observer, host_data_dirs
from faultline.brokerstate.replica_logs import replica_summary
from faultline.brokerstate.segments import LogEndReader
from faultline.spec import KafkaSpec, TestSpec, TopicSpec


def _batch(base: int, records: int, body: bytes) -> bytes:
    rest = struct.pack(">iBIhiqqqhii", 0, 2, 0, 0, records - 1, 0, 0, -1, -1, -1, records) + body
    return struct.pack(">qi", base, len(rest)) + rest


def bench_segments(batches: int, records_per_batch: int, body_bytes: int) -> None:
    body = b"r" * body_bytes
    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "t-0"
        part.mkdir()
        seg = part / f"{0:020d}.log"
        with seg.open("wb") as fh:
            for i in range(batches):
                fh.write(_batch(i * records_per_batch, records_per_batch, body))
        size = seg.stat().st_size
        reader = LogEndReader(part)
        t0 = time.perf_counter()
        leo = reader.read()
        cold = time.perf_counter() - t0
        assert leo == batches * records_per_batch, leo
        with seg.open("ab") as fh:
            for i in range(batches, batches + 1000):
                fh.write(_batch(i * records_per_batch, records_per_batch, body))
        t0 = time.perf_counter()
        reader.read()
        warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        reader.read()
        idle = time.perf_counter() - t0
        t0 = time.perf_counter()
        summary = replica_summary(Path(tmp), "t", 0)
        whole = time.perf_counter() - t0
        assert summary is not None and len(summary["batches"]) == batches + 1000
    print(f"segment {size / 1e6:7.1f} MB, {batches} batches of {records_per_batch} records "
          f"({body_bytes} B body): cold {cold * 1e3:7.1f} ms ({size / 1e6 / cold:6.0f} MB/s, "
          f"{batches / cold / 1e3:5.0f} k batches/s); +1000 batches {warm * 1e3:5.2f} ms; "
          f"nothing new {idle * 1e6:5.0f} us; replica_summary {whole * 1e3:6.1f} ms "
          f"({(batches + 1000) / whole / 1e3:4.0f} k batches/s)")


def bench_round(records: int, rounds: int) -> None:
    from faultline.cluster.local.cluster import LocalCluster

    spec = TestSpec(name="bench-observer", kafka=KafkaSpec(heap_mb=384),
                    topic=TopicSpec(name="bench-obs", partitions=3, replication_factor=3))
    with LocalCluster(spec) as cluster, tempfile.TemporaryDirectory() as tmp:
        cluster.create_topic()
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                             "linger.ms": 5, "enable.idempotence": True})
        for p in range(3):
            for i in range(records):
                while True:
                    try:
                        producer.produce("bench-obs", value=str(i).encode(), partition=p)
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        producer.poll(0.05)
        assert producer.flush(120) == 0
        source = KafkaSource(cluster.bootstrap_servers())
        obs = Observer(Path(tmp) / "o.jsonl", time.monotonic_ns, "bench-obs", 3, source,
                       host_data_dirs(cluster))
        t0 = time.perf_counter()
        obs.sample()
        first = time.perf_counter() - t0
        totals, client = [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            lines = obs.sample()
            totals.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            source.partitions("bench-obs")
            source.high_watermarks("bench-obs", [0, 1, 2])
            client.append(time.perf_counter() - t0)
        assert all(set(ln["leo"].values()) == {records} for ln in lines), lines
        disk = [t - c for t, c in zip(totals, client, strict=True)]
        ms = 1e3
        print(f"round, 3 partitions x 3 replicas, {records} records each: first (cold reads) "
              f"{first * ms:.1f} ms; then median {statistics.median(totals) * ms:.1f} ms, max "
              f"{max(totals) * ms:.1f} ms; client part median {statistics.median(client) * ms:.1f} ms, "
              f"disk part ~{statistics.median(disk) * ms:.2f} ms ({rounds} rounds, "
              f"load {os.getloadavg()[0]:.1f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-cluster", action="store_true", help="only the segment reading")
    parser.add_argument("--records", type=int, default=100_000, help="per partition, for the round")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    bench_segments(100_000, 10, 150)      # small batches: a busy acks=all queue workload
    bench_segments(20_000, 100, 16_000)   # larger batches, ~320 MB
    if not args.no_cluster:
        if os.geteuid() != 0:
            print("the round needs root (local cluster); skipped", file=sys.stderr)
            return 0
        bench_round(args.records, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
