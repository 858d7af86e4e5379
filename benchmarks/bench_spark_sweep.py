"""Benchmark a sweep here against the same sweep on a Spark standalone cluster of this machine.

    flock /tmp/fl-cluster.lock .venv/bin/python benchmarks/bench_spark_sweep.py
    flock /tmp/fl-cluster.lock .venv/bin/python benchmarks/bench_spark_sweep.py --seeds 2 --time-limit 20

The matrix: acks 1 / all x ``--seeds`` seeds of one-node cells of ``--time-limit`` s at a
modest rate. It is swept twice with ``faultline sweep`` (root; a process each): here, one
cell after another, and with ``--master`` through a standalone master and ``--workers``
one-core workers (tests/spark_standalone.py), so that many cells at once, each its own
Kafka cluster. Prints each sweep's wall time (the command's, from start to exit: for the
cluster, the Spark driver's start and the workers' probe included) and the cells' own
times from sweep.json; the standalone cluster's own start is printed, not counted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

from faultline.sweep.manifest import CellState, load
from tests.spark_standalone import start, stop_leftovers


def sweep(config: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> float:
    """Run ``faultline sweep`` (this benchmark ends unless it exits 0); its wall time in seconds."""
    t0 = time.perf_counter()
    command = [sys.executable, "-m", "faultline", "sweep", str(config), "--out", str(out), *extra]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"faultline sweep {' '.join(extra)} exited {done.returncode}:\n{done.stderr}")
    return time.perf_counter() - t0


def cell_times(out: Path) -> str:
    manifest = load(out)
    assert manifest is not None, f"no sweep.json in {out}"

    def seconds(c: CellState) -> float:
        assert c.started is not None and c.ended is not None, f"cell {c.id} did not end"
        return (datetime.fromisoformat(c.ended) - datetime.fromisoformat(c.started)).total_seconds()

    return ", ".join(f"{c.id} {seconds(c):.0f} s" for c in manifest.cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=8.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    matrix = {"name": "bench-spark-sweep",
              "defaults": {"time_limit_s": args.time_limit, "kafka": {"nodes": 1, "heap_mb": 384},
                           "topic": {"replication_factor": 1, "min_insync_replicas": 1},
                           "workload": {"rate": 300}},
              "axes": {"acks": ["1", "all"], "seeds": list(range(1, args.seeds + 1))}}
    with tempfile.TemporaryDirectory(prefix="bench-spark-sweep-") as tmp:
        base = Path(tmp)
        config = base / "matrix.yaml"
        config.write_text(yaml.safe_dump(matrix))
        cells = 2 * args.seeds
        print(f"{cells} cells of {args.time_limit:.0f} s (one node, 300 sends/s)")
        here = sweep(config, base / "here")
        print(f"here:    {here:6.1f} s wall, one cell after another ({cell_times(base / 'here')})")
        stop_leftovers()
        t0 = time.perf_counter()
        cluster = start(base / "spark", args.workers)
        up = time.perf_counter() - t0
        try:
            there = sweep(config, base / "there", "--master", cluster.master, env=cluster.driver_env())
        finally:
            cluster.stop()
        print(f"cluster: {there:6.1f} s wall, {args.workers} workers of one core "
              f"({cell_times(base / 'there')}); the standalone cluster took {up:.0f} s to start, not counted")
        print(f"ratio:   {there / here:.2f} of the time here")


if __name__ == "__main__":
    main()
