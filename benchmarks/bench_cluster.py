"""Cluster start-up and teardown time, each backend side by side.

    .venv/bin/python benchmarks/bench_cluster.py [--backends local,docker] [--nodes 3]
                                                 [--warm 3] [--no-cds]

*cold*: the first start in a fresh process (the jars are cached, the OS page cache is
as it is); *warm*: the starts after it, median. Ready means every broker registered and
unfenced and a produce/consume round trip through the proxies worked. Teardown is
``stop()``: every JVM (container), Toxiproxy, namespace, link (network) and the state
gone. The docker backend needs a running engine and its image (``faultline setup
--backend docker``).

The machine is shared, so next to wall time it prints the CPU seconds the JVMs used to
get ready (independent of other load) and the load average. Targets: a 3-node cluster
ready in <= 20 s, teardown <= 5 s. Needs root.

Figures it gave: the class-data archive (``--no-cds`` against the default,
``faultline.cluster.kafka_dist.cds_archive``) roughly halves the CPU a broker needs to
start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Literal, cast

from faultline.cluster.backends import cluster_for
from faultline.errors import FaultlineError
from faultline.spec import KafkaSpec, TestSpec, TopicSpec


def _cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _once(spec: TestSpec) -> tuple[float, float, float, dict[str, float]]:
    """(ready s, teardown s, JVM CPU s to ready, per-step timings)."""
    cluster = cluster_for(spec)(spec)
    t0 = time.monotonic()
    try:
        cluster.start()
        ready = time.monotonic() - t0
        cpu = sum(_cpu_seconds(n.pid) for n in cluster.nodes)
        steps = dict(cluster.startup_timings)
    finally:
        t1 = time.monotonic()
        cluster.stop()
        teardown = time.monotonic() - t1
    return ready, teardown, cpu, steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="local,docker", help="comma-separated backends")
    parser.add_argument("--nodes", type=int, default=3, choices=(1, 3, 5))
    parser.add_argument("--warm", type=int, default=3, help="warm starts after the cold one")
    parser.add_argument("--heap-mb", type=int, default=512)
    parser.add_argument("--no-cds", action="store_true", help="without the class-data archive")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_cluster: needs root (network namespaces)", file=sys.stderr)
        return 2
    if args.no_cds:
        os.environ["FAULTLINE_CDS"] = "0"
    rf = min(3, args.nodes)
    spec = TestSpec(name="bench", kafka=KafkaSpec(nodes=args.nodes, heap_mb=args.heap_mb),
                    topic=TopicSpec(replication_factor=rf, min_insync_replicas=min(2, rf)))  # fmt: skip
    print(f"{args.nodes}-node cluster, heap {args.heap_mb} MB, {os.cpu_count()} cores, "
          f"class-data archive {'off' if args.no_cds else 'on (if built)'}")  # fmt: skip
    summary = []
    for backend in args.backends.split(","):
        bspec = replace(spec, backend=cast(Literal["local", "docker"], backend))
        rows = []
        for i in range(1 + args.warm):
            load = os.getloadavg()[0]
            try:
                ready, teardown, cpu, steps = _once(bspec)
            except FaultlineError as e:
                print(f"{backend}: {e}", flush=True)
                break
            rows.append((ready, teardown, cpu))
            kind = "cold" if i == 0 else f"warm{i}"
            detail = " ".join(f"{k} {v:.1f}" for k, v in steps.items())
            print(f"{backend:>6} {kind:>5}: ready {ready:5.1f} s  teardown {teardown:4.1f} s  "
                  f"JVM CPU to ready {cpu:5.1f} s  load {load:4.1f}  [{detail}]", flush=True)  # fmt: skip
        if rows:
            warm = [r[0] for r in rows[1:]] or [rows[0][0]]
            summary.append((backend, rows[0][0], statistics.median(warm),
                            statistics.median(r[1] for r in rows)))  # fmt: skip
    print(f"\n{'backend':<8} {'cold start-up':>14} {'warm start-up':>14} {'teardown':>9}")
    for backend, cold, warm_median, teardown in summary:
        print(f"{backend:<8} {cold:12.1f} s {warm_median:12.1f} s {teardown:7.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
