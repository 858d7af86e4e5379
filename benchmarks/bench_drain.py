"""The drain's speed: records per second read back and journaled, on a filled topic.

Starts a local cluster (root) as a run has it (3 nodes, the default topic), fills the
topic with ``--records`` decimal values from a plain producer (not measured), then
runs the run's own :func:`faultline.workloads.drain.drain` into a compressed history,
``--rounds`` times, and prints each round's seconds and records/s by wall clock and
by CPU time, this process's and its children's (the drain's readers, the frame writer;
the machine may be shared). Target (issue 13): 500 k/s.

    flock /tmp/fl-cluster.lock .venv/bin/python benchmarks/bench_drain.py
    .venv/bin/python benchmarks/bench_drain.py --bootstrap 127.0.0.1:9092 --records 0
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from faultline.history import HistoryWriter
from faultline.rundir import HISTORY_FILE
from faultline.spec import TestSpec
from faultline.workloads.clients import ProcessIds
from faultline.workloads.drain import drain


@contextlib.contextmanager
def cluster_bootstrap(args: argparse.Namespace, spec: TestSpec) -> Iterator[str]:
    """The bootstrap servers to measure against, with the topic created."""
    if args.bootstrap:
        yield args.bootstrap
        return
    from faultline.cluster.local.cluster import LocalCluster

    with LocalCluster(spec) as cluster:
        cluster.create_topic(spec.topic)
        yield cluster.bootstrap_servers()


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """Write ``records`` values, round-robin over the partitions, acks=all."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000})
    for v in range(records):
        while True:
            try:
                p.produce(topic, str(v).encode(), partition=v % partitions)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(120):
        sys.exit("bench_drain: the fill did not complete in 120 s")


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int | str]:
    """Each partition's high watermark, the end the drain reads to."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-drain"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        c.close()


def cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=2_000_000, help="values to write first")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bootstrap", help="use this running cluster (topic already there)")
    args = ap.parse_args()
    spec = TestSpec()
    topic, partitions = spec.topic.name, spec.topic.partitions
    with cluster_bootstrap(args, spec) as bootstrap, tempfile.TemporaryDirectory() as tmp:
        t = time.monotonic()
        fill(bootstrap, topic, partitions, args.records)
        ends = log_ends(bootstrap, topic, partitions)
        total = sum(int(e) for e in ends.values())
        print(f"filled {args.records:,} records in {time.monotonic() - t:.1f} s; "
              f"the topic holds {total:,}")
        for r in range(args.rounds):
            history = HistoryWriter(Path(tmp) / f"{r}-{HISTORY_FILE}")
            wall, cpu = time.monotonic(), cpu_s()
            drains = drain(spec, bootstrap, history, ProcessIds(0), ends, timeout_s=300)
            history.close()
            wall, cpu = time.monotonic() - wall, cpu_s() - cpu
            read = sum(d.records for d in drains)
            assert all(d.complete for d in drains), drains
            print(f"round {r + 1}: {read:,} records in {wall:.2f} s: {read / wall:,.0f} records/s "
                  f"(CPU {cpu:.2f} s: {read / cpu:,.0f} records/CPU-s)")


if __name__ == "__main__":
    main()
