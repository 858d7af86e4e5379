"""What crashable producers cost: acknowledged sends per second of the queue workload with
its producers as threads of the run (every test without client crashes) and as child
processes (a test that crashes clients, :mod:`faultline.workloads.crashable`).

Starts a local cluster (root; 3 nodes, a topic of 3 partitions), then, ``--rounds``
times, runs each workload (2 producers as fast as they go, 1 consumer) into a
compressed history: ``--warmup`` seconds, then ``--seconds`` measured, then stops it,
and prints sends/s and how long the stop took.

    flock /tmp/fl-cluster.lock .venv/bin/python benchmarks/bench_crashable.py
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from faultline.cluster.local.cluster import LocalCluster
from faultline.history import HistoryWriter
from faultline.spec import TestSpec, TopicSpec, WorkloadSpec
from faultline.workloads.crashable import CrashableQueueWorkload
from faultline.workloads.queue import QueueWorkload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    args = ap.parse_args()
    spec = replace(TestSpec(), name="bench-crashable", topic=TopicSpec(name="bench-crashable"),
                   workload=WorkloadSpec(producers=2, consumers=1))
    with LocalCluster(spec) as cluster, tempfile.TemporaryDirectory() as tmp:
        cluster.create_topic(spec.topic)
        for round_ in range(args.rounds):
            for cls in (QueueWorkload, CrashableQueueWorkload):
                history = HistoryWriter(Path(tmp) / f"{cls.__name__}-{round_}.jsonl.zst")
                workload = cls(spec, cluster.bootstrap_servers(), history)
                workload.start()
                time.sleep(args.warmup)
                ok, started = workload.stats().ok, time.monotonic()
                time.sleep(args.seconds)
                rate = (workload.stats().ok - ok) / (time.monotonic() - started)
                stopping = time.monotonic()
                workload.stop()
                history.close()
                print(f"{cls.__name__:24} round {round_}: {rate:8.0f} acknowledged sends/s, "
                      f"stopped in {time.monotonic() - stopping:.1f} s", flush=True)


if __name__ == "__main__":  # the producers' children are spawned: they import this module
    main()
