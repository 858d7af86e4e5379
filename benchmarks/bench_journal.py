"""What journaling costs: the same producers, once journaling every send and once not.

The history is written as a run writes it (``history.jsonl.zst``; ``--plain`` for
``history.jsonl``). Same cluster, same settings, same duration; rounds alternate the
order (journaled first, then raw first) so that a cluster warming up or filling up
does not favour one side. Acknowledged throughput is the number of ``ok`` sends completed within
the window divided by its length. The ratio is taken per round (a journaled window and the
raw one beside it) and reported as the median over rounds with its range, since the
cluster's own rate drifts between rounds by more than journaling costs. Target:
journaled >= 80% of raw.

First, without a cluster: the CPU time ``append_many`` costs the thread that calls it,
per op (a client's own thread: what journaling takes from the workload's interpreter,
whatever the machine's noise; the frame writer's work is not in it).

Memory: the resident set size of this process and of its frame writer (the child
that compresses the history) is sampled every second while journaling; a
``--memory-s`` run journals for that long and compares the first and last quarter,
which stay level when the history streams to disk.

    .venv/bin/python benchmarks/bench_journal.py                  # starts a local cluster (root)
    .venv/bin/python benchmarks/bench_journal.py --bootstrap 127.0.0.1:9092 --nodes 1
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from faultline.history import HistoryWriter, PendingOp, history_lines
from faultline.rundir import HISTORY_FILE, PLAIN_HISTORY_FILE
from faultline.spec import KafkaSpec, TestSpec, TopicSpec, WorkloadSpec
from faultline.workloads.clients import Values
from faultline.workloads.queue import QueueWorkload


def rss_mb(history: HistoryWriter | None) -> float:
    """The resident set size in MiB (Linux) of this process and, journaling to a
    compressed history, of its frame writer (the child that compresses it)."""
    pids = ["self"] + ([str(history._writer.pid)] if history and history._writer else [])
    total = 0.0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024
    return total


def append_cost_ns(batches: int = 4000, per_batch: int = 50) -> float:
    """CPU ns per op that ``append_many`` costs its calling thread, journaling send
    completions in batches as a producer does."""
    batch: list[PendingOp] = [(0, "ok", "send", {"topic": "fl-queue", "partition": i % 3,
                                                  "value": i, "offset": i}, None)
                              for i in range(per_batch)]
    with tempfile.TemporaryDirectory(prefix="fl-bench-") as tmp:
        history = HistoryWriter(Path(tmp) / HISTORY_FILE)
        t = time.thread_time_ns()
        for _ in range(batches):
            history.append_many(batch)
        cost = (time.thread_time_ns() - t) / (batches * per_batch)
        history.close()
    return cost


@dataclass
class Sample:
    journaled: bool
    seconds: float
    ok: int
    lines: int = 0
    bytes: int = 0  # of the history file
    rss: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.ok / self.seconds


def measure(spec: TestSpec, bootstrap: str, seconds: float, journaled: bool, values: Values,
            workdir: Path, suffix: str = HISTORY_FILE.split(".", 1)[1]) -> Sample:
    """Run the producers for ``seconds``; count the acks that arrived within the window."""
    path = workdir / f"history-{time.monotonic_ns()}.{suffix}"
    history = HistoryWriter(path) if journaled else None
    workload = QueueWorkload(spec, bootstrap, history, values=values)
    sample = Sample(journaled, seconds, 0)
    stop = threading.Event()

    def sampler() -> None:
        while not stop.wait(1.0):
            sample.rss.append(rss_mb(history))

    t = threading.Thread(target=sampler, daemon=True)
    try:
        t.start()
        workload.start()
        t0 = time.monotonic()
        time.sleep(seconds)
        sample.ok = workload.stats().ok
        sample.seconds = time.monotonic() - t0
        workload.stop()
    finally:
        stop.set()
        t.join()
        if history is not None:
            history.close()
            sample.lines = sum(1 for _ in history_lines(path))
            sample.bytes = path.stat().st_size
            path.unlink()
    return sample


@contextlib.contextmanager
def cluster_bootstrap(args: argparse.Namespace, spec: TestSpec) -> Iterator[str]:
    """The bootstrap servers of the cluster to measure against, with the topic created."""
    if args.bootstrap:
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        admin = AdminClient({"bootstrap.servers": args.bootstrap})
        t = spec.topic
        futures = admin.create_topics([NewTopic(t.name, t.partitions, t.replication_factor,
                                                config={"min.insync.replicas":
                                                        str(t.min_insync_replicas)})])
        for f in futures.values():
            with contextlib.suppress(Exception):  # it may exist from an earlier run
                f.result()
        time.sleep(2)
        yield args.bootstrap
        return
    from faultline.cluster.local.cluster import LocalCluster

    with LocalCluster(spec) as cluster:
        cluster.create_topic(spec.topic)
        yield cluster.bootstrap_servers()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=15.0, help="length of each window")
    ap.add_argument("--rounds", type=int, default=6, help="journaled/raw pairs")
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--heap-mb", type=int, default=384)
    ap.add_argument("--memory-s", type=float, default=0.0,
                    help="then journal this long and report RSS drift (0: skip)")
    ap.add_argument("--bootstrap", help="use this running cluster instead of starting one")
    ap.add_argument("--plain", action="store_true",
                    help=f"journal to {PLAIN_HISTORY_FILE}, not {HISTORY_FILE} as a run does")
    args = ap.parse_args()
    # librdkafka's routine warnings (PID retries while a cluster warms up) are noise here.
    logging.getLogger("faultline.rdkafka").setLevel(logging.ERROR)

    rf = min(3, args.nodes)
    spec = TestSpec(
        name="bench-journal",
        kafka=KafkaSpec(nodes=args.nodes, heap_mb=args.heap_mb),
        topic=TopicSpec(name=f"fl-bench-{int(time.time())}", partitions=args.partitions,
                        replication_factor=rf, min_insync_replicas=min(2, rf)),
        workload=WorkloadSpec(producers=args.producers, consumers=0, rate=0.0),
    )
    print(f"append_many in the calling thread: {append_cost_ns():.0f} ns CPU per op", flush=True)
    p = spec.producer
    print(f"config: {args.nodes} node(s), {args.partitions} partitions, rf {rf}, "
          f"acks={p.acks}, idempotence={p.enable_idempotence}, max.in.flight={p.max_in_flight}, "
          f"linger.ms={p.linger_ms}, {args.producers} producers, "
          f"{args.seconds:.0f} s windows x {args.rounds} rounds", flush=True)
    values = Values()
    samples: list[Sample] = []
    with tempfile.TemporaryDirectory(prefix="fl-bench-") as tmp, \
            cluster_bootstrap(args, spec) as bootstrap:
        work = Path(tmp)
        suffix = (PLAIN_HISTORY_FILE if args.plain else HISTORY_FILE).split(".", 1)[1]
        measure(spec, bootstrap, 5.0, False, values, work)  # warm-up, discarded
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for journaled in order:
                s = measure(spec, bootstrap, args.seconds, journaled, values, work, suffix)
                samples.append(s)
                print(f"  round {r + 1} {'journaled' if journaled else 'raw      '}: "
                      f"{s.rate:9.0f} acked sends/s"
                      + (f"  ({s.lines} history lines, {s.bytes / max(s.ok, 1):.1f} B per acked send, "
                         f"RSS max {max(s.rss):.0f} MiB)"
                         if journaled and s.rss else ""), flush=True)
        long: Sample | None = None
        if args.memory_s > 0:
            long = measure(spec, bootstrap, args.memory_s, True, values, work, suffix)

    journaled_rate = statistics.mean(s.rate for s in samples if s.journaled)
    raw_rate = statistics.mean(s.rate for s in samples if not s.journaled)
    ratios = [a.rate / b.rate if a.journaled else b.rate / a.rate
              for a, b in zip(samples[::2], samples[1::2], strict=True)]
    ratio = statistics.median(ratios)
    print(f"acknowledged throughput ({suffix}): journaled {journaled_rate:.0f}/s, raw {raw_rate:.0f}/s "
          f"(means); journaled / raw per round: median {ratio:.1%}, range {min(ratios):.1%}"
          f"-{max(ratios):.1%} over {len(ratios)} rounds (target >= 80%)")
    if long is not None and len(long.rss) >= 8:
        q = len(long.rss) // 4
        first, last = statistics.mean(long.rss[:q]), statistics.mean(long.rss[-q:])
        print(f"memory over {long.seconds:.0f} s journaling ({long.ok} acked sends, "
              f"{long.lines} lines): RSS first quarter {first:.1f} MiB, last quarter "
              f"{last:.1f} MiB, max {max(long.rss):.1f} MiB, drift {last - first:+.1f} MiB")
    return 0 if ratio >= 0.8 else 1


if __name__ == "__main__":
    sys.exit(main())
