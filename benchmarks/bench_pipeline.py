"""Benchmark the Spark pipeline (``faultline analyze``'s) against the in-process checker.

    .venv/bin/python benchmarks/bench_pipeline.py                      # 10, 30, 100 runs
    .venv/bin/python benchmarks/bench_pipeline.py --runs 10 --lines 5000 --master 'local[2]'

For each count, a sweep directory of that many generated runs (:mod:`faultline.checkers.synthetic`,
about ``--lines`` history lines each, two cells: acks=all and acks=1, one run per seed)
is written to a temporary directory. Then, on the same runs:

- in-process: :func:`faultline.checkers.stored.check_stored` on each run, one after the
  other, in this process (what ``faultline check`` does per run);
- pipeline: :func:`faultline.analysis.pipeline.analyze` on a Spark session (``--master``,
  default ``local[*]``), the whole of it: ops ingest, the check on the executors, the
  latency and span aggregates, the runs / faults / anomalies / cells tables.

Prints history lines per second for both (wall clock; the machine may be shared) and the
pipeline's time per step. The session is started once and warmed up on a 2-run sweep
(JVM, Python workers, pyarrow), none of which is counted.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path

import orjson

from faultline.analysis.pipeline import analyze
from faultline.analysis.spark import session
from faultline.checkers.stored import check_stored
from faultline.checkers.synthetic import Shape, generate
from faultline.spec import ProducerSpec, TestSpec


class Steps:
    """Records how long each pipeline step took (the ``progress`` analyze reports to)."""

    def __init__(self) -> None:
        self.took: dict[str, float] = {}

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.took[what.split(":")[0]] = time.perf_counter() - start


def write_sweep(root: Path, runs: int, lines: int) -> int:
    """A sweep directory of ``runs`` generated runs; returns the history lines written."""
    probe = Shape(values=2000)
    per_value = sum(1 for _ in generate(probe)) / probe.values
    cells, total = [], 0
    for i in range(runs):
        acks = "all" if i % 2 == 0 else "1"
        cid = f"acks={acks},seed={i}"
        run_dir = root / "cells" / cid
        run_dir.mkdir(parents=True)
        spec = TestSpec(seed=i, producer=ProducerSpec(acks=acks, enable_idempotence=acks == "all"))
        (run_dir / "test.json").write_bytes(orjson.dumps(spec.to_json()))
        rows = generate(Shape(seed=i, values=int(lines / per_value), faults=4))
        with open(run_dir / "history.jsonl", "wb") as fh:
            while chunk := list(islice(rows, 50_000)):
                fh.write(b"".join(orjson.dumps(r) + b"\n" for r in chunk))
                total += len(chunk)
        cells.append({"id": cid, "axes": {"producer.acks": acks, "seed": i}, "status": "done",
                      "run_dir": f"cells/{cid}", "valid": None, "error": None,
                      "started": None, "ended": None})
    (root / "sweep.json").write_text(json.dumps({"version": 1, "name": f"bench{runs}",
                                                 "created": "2026-11-23T00:00:00Z", "cells": cells}))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, action="append", help="runs per sweep (repeatable) [10, 30, 100]")
    ap.add_argument("--lines", type=int, default=10_000, help="history lines per run [10000]")
    ap.add_argument("--master", default=None, help="Spark master [local[*]]")
    args = ap.parse_args()
    spark = session(args.master, conf={"spark.sql.shuffle.partitions": "4"})
    print(f"Spark {spark.version}, master {spark.sparkContext.master}, {args.lines} lines per run")
    with tempfile.TemporaryDirectory(prefix="fl-bench-pipeline-") as tmp:
        write_sweep(Path(tmp) / "sweep", 2, 1000)
        analyze(spark, [Path(tmp) / "sweep"], str(Path(tmp) / "out"))
    print(f"{'runs':>5} {'lines':>9} {'in-process':>14} {'pipeline':>14} {'ratio':>6}  pipeline steps (s)")
    for runs in args.runs or [10, 30, 100]:
        with tempfile.TemporaryDirectory(prefix="fl-bench-pipeline-") as tmp:
            root = Path(tmp) / "sweep"
            lines = write_sweep(root, runs, args.lines)
            start = time.perf_counter()
            for run_dir in sorted((root / "cells").iterdir()):
                check_stored(run_dir)
            local = time.perf_counter() - start
            steps = Steps()
            start = time.perf_counter()
            done = analyze(spark, [root], str(Path(tmp) / "out"), steps)  # type: ignore[arg-type]
            piped = time.perf_counter() - start
            assert done.history_lines == lines, (done.history_lines, lines)
            detail = ", ".join(f"{k} {v:.1f}" for k, v in steps.took.items())
            print(f"{runs:>5} {lines:>9} {lines / local:>10.0f} l/s {lines / piped:>10.0f} l/s "
                  f"{local / piped:>6.2f}  {detail}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
