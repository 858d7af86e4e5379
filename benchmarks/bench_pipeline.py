"""Benchmark the Spark pipeline (``faultline analyze``'s) per stage, against the in-process checker.

    .venv/bin/python benchmarks/bench_pipeline.py                          # 8 runs of 1,000,000 lines
    .venv/bin/python benchmarks/bench_pipeline.py --runs 4 --lines 250000 --master 'local[2]'
    .venv/bin/python benchmarks/bench_pipeline.py --master spark://127.0.0.1:7077 --count-pid WORKER_PID

A sweep directory of ``--runs`` runs (:mod:`faultline.checkers.synthetic`, about ``--lines``
history lines each, two cells: acks=all and acks=1, one run per seed; see
:func:`write_sweep`) is written to a temporary directory. Then, on those runs:

- in-process: :func:`faultline.checkers.stored.check_stored` on each run, one after the
  other, in this process (what ``faultline check`` does per run);
- pipeline: :func:`faultline.analysis.pipeline.analyze` on a Spark session of each
  ``--master`` (default ``local[1]`` and ``local[2]``), the whole of it, ``--repeat``
  times, and each of its steps (``check``: each run's check and, in the same task, its
  history read again into its ``ops`` partition and its observations into theirs), and
  the check alone in those tasks (the executors' CPU in ``check_run``,
  :attr:`~faultline.analysis.pipeline.Analysis.check_cpu_s`).

Each figure is history lines per second: wall clock (``l/s``), and over the CPU time of
this process and all it started, the JVM and Spark's Python workers included (``l/cpu-s``,
the rate per core, which a machine shared with others disturbs less); on a standalone
cluster started on this machine, its executors are its worker's: ``--count-pid`` the
worker (and the master) for them to count. Medians of the repeats. The goals: the check
at 1 M lines/s per core or more, the whole pipeline at 500 k, and the pipeline's wall
rate twice as high on ``local[2]`` as on ``local[1]``.
Each session is warmed up on a 2-run sweep (JVM, Python workers, compiled code) first,
which is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any, Literal

import orjson

from faultline.analysis.pipeline import analyze
from faultline.analysis.spark import session
from faultline.checkers.queue import warm
from faultline.checkers.stored import check_stored
from faultline.checkers.synthetic import Shape, generate
from faultline.spec import ProducerSpec, TestSpec

_TICK = os.sysconf("SC_CLK_TCK")


#: Processes whose trees' CPU time is counted besides this one's (``--count-pid``).
COUNTED: list[int] = []


def cpu_seconds() -> float:
    """The CPU time (user + system) of this process and every process under it, also those
    ended and waited for, and of the trees of :data:`COUNTED`."""
    parent: dict[int, int] = {}
    used: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parent[int(entry)] = int(fields[1])
        used[int(entry)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    mine, todo = 0, [os.getpid(), *COUNTED]
    while todo:
        pid = todo.pop()
        mine += used.get(pid, 0)
        todo += [p for p, pp in parent.items() if pp == pid]
    return mine / _TICK


class Steps:
    """Records each pipeline step's wall and CPU seconds (the ``progress`` analyze reports to)."""

    def __init__(self) -> None:
        self.took: dict[str, tuple[float, float]] = {}

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), cpu_seconds()
        yield
        self.took[what.split(":")[0]] = (time.perf_counter() - wall, cpu_seconds() - cpu)


def write_sweep(root: Path, runs: int, lines: int) -> int:
    """A sweep directory of ``runs`` runs of about ``lines`` history lines each; returns the
    history lines written. Two histories are generated (seeds 0 and 1, the cells' first
    runs); the other runs' are copies of them, which the pipeline reads like any other."""
    probe = Shape(values=2000)
    per_value = sum(1 for _ in generate(probe)) / probe.values
    cells: list[dict[str, Any]] = []
    total = 0
    for i in range(runs):
        acks: Literal["1", "all"] = "all" if i % 2 == 0 else "1"
        cid = f"acks={acks},seed={i}"
        run_dir = root / "cells" / cid
        run_dir.mkdir(parents=True)
        spec = TestSpec(seed=i, producer=ProducerSpec(acks=acks, enable_idempotence=acks == "all"))
        (run_dir / "test.json").write_bytes(orjson.dumps(spec.to_json()))
        if i < 2:
            rows = generate(Shape(seed=i, values=int(lines / per_value), faults=4))
            with open(run_dir / "history.jsonl", "wb") as fh:
                while chunk := list(islice(rows, 50_000)):
                    fh.write(b"".join(orjson.dumps(r) + b"\n" for r in chunk))
        else:
            shutil.copy(root / "cells" / str(cells[i % 2]["id"]) / "history.jsonl", run_dir / "history.jsonl")
        total += (run_dir / "history.jsonl").read_bytes().count(b"\n")
        cells.append({"id": cid, "axes": {"producer.acks": acks, "seed": i}, "status": "done",
                      "run_dir": f"cells/{cid}", "valid": None, "error": None,
                      "started": None, "ended": None})
    (root / "sweep.json").write_text(json.dumps({"version": 1, "name": f"bench{runs}",
                                                 "created": "2026-11-23T00:00:00Z", "cells": cells}))
    return total


def rate(lines: int, seconds: float) -> str:
    """``lines`` per second in thousands; ``-`` for no time (a process's CPU time is counted
    only once it is waited for: a figure can lack some)."""
    return f"{lines / seconds / 1000:>7.0f} k" if seconds >= 0.01 else f"{'-':>9}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=8, help="runs in the sweep [8]")
    ap.add_argument("--lines", type=int, default=1_000_000, help="history lines per run [1000000]")
    ap.add_argument("--master", action="append", help="Spark master (repeatable) [local[1], local[2]]")
    ap.add_argument("--repeat", type=int, default=3, help="pipeline runs per master [3]")
    ap.add_argument("--count-pid", type=int, action="append", default=[],
                    help="also count the CPU time of this process and those under it (repeatable): a "
                         "standalone master's and worker's, whose executors are not this process's")
    args = ap.parse_args()
    COUNTED.extend(args.count_pid)
    with tempfile.TemporaryDirectory(prefix="fl-bench-pipeline-") as tmp:
        warm(Path(tmp))
        root = Path(tmp) / "sweep"
        lines = write_sweep(root, args.runs, args.lines)
        write_sweep(Path(tmp) / "warm", 2, 1000)
        wall, cpu = time.perf_counter(), cpu_seconds()
        for run_dir in sorted((root / "cells").iterdir()):
            check_stored(run_dir)
        wall, in_process = time.perf_counter() - wall, cpu_seconds() - cpu
        print(f"{args.runs} runs, {lines} history lines; in-process check: {rate(lines, wall)} l/s "
              f"{rate(lines, in_process)} l/cpu-s")
        print("goals: check >= 1000 k l/cpu-s, pipeline >= 500 k l/cpu-s, local[2] twice local[1]")
        medians: dict[str, dict[str, tuple[float, float]]] = {}
        for master in args.master or ["local[1]", "local[2]"]:
            spark = session(master)
            analyze(spark, [Path(tmp) / "warm"], str(Path(tmp) / "out-warm"))
            took: dict[str, list[tuple[float, float]]] = {}
            checks: list[float] = []
            for _ in range(args.repeat):
                steps = Steps()
                wall, cpu = time.perf_counter(), cpu_seconds()
                done = analyze(spark, [root], str(Path(tmp) / "out"), steps)  # type: ignore[arg-type]
                steps.took["pipeline"] = (time.perf_counter() - wall, cpu_seconds() - cpu)
                assert done.history_lines == lines, (done.history_lines, lines)
                checks.append(done.check_cpu_s)
                for k, v in steps.took.items():
                    took.setdefault(k, []).append(v)
            spark.stop()
            print(f"{master}:")
            mine = medians[master] = {k: (statistics.median(w for w, _ in v),
                                          statistics.median(c for _, c in v)) for k, v in took.items()}
            for k, (w, c) in mine.items():
                print(f"  {k:<32} {w:6.2f} s {rate(lines, w)} l/s {rate(lines, c)} l/cpu-s", flush=True)
            share = in_process / mine["check"][1]
            print(f"  the check step's l/cpu-s (ops written too): {share:.2f} of the in-process check's")
            print(f"  the check itself, in its tasks: {rate(lines, statistics.median(checks))} l/cpu-s "
                  "(the executors' CPU in check_run alone)")
        if len(medians) > 1:
            first = next(iter(medians.values()))
            for step in first:
                print(f"wall speed-up, {step}: " + ", ".join(
                    f"{m} {first[step][0] / medians[m][step][0]:.2f}x" for m in medians))

if __name__ == "__main__":
    main()
