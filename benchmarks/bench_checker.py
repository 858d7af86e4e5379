"""Benchmark the queue checker end to end (parsing included) on generated histories.

    .venv/bin/python benchmarks/bench_checker.py            # 1M and 10M lines
    .venv/bin/python benchmarks/bench_checker.py --lines 200000 --lines 2000000

Each history comes from :mod:`faultline.checkers.synthetic` (a correct log: 2 to 3
lines per distinct value, polls of up to 10 records, one consumer), written to a
temporary run directory, plain or (``--compressed``) as zstd frames as a run writes
it. ``faultline check``'s own function, ``check_run`` (which also writes the sends'
columns, ``history.sends.parquet``), then runs in a fresh child process, so its peak
RSS is the checker's alone. Prints lines/s by wall clock and by CPU time (the machine
may be shared), records/s, and peak RSS per distinct value: above a baseline, the
interpreter with the checker imported, its compiled code loaded and Arrow once used
(its first use costs ~45 MB, whatever the history's size), and, from two sizes, as the slope between them.

``--stages`` also prints, per history, what each stage of the check costs per line
(CPU time, the better of two tries). Each stage is timed as one more pass over the
history, doing what the pass before did and one stage more: reading the lines, the
engine's feed (the compiled scanner and feed, and the reader's checks of the other
lines), the decisions. A stage's cost is its pass's less the one before; the rest
(the sends' table, ``results.json``) is the whole check's less the last pass.

The child's time includes loading the checker's compiled code from numba's cache
(about a second, once per process; the first compile after a change takes ~15 s:
``faultline setup`` does it, and so does a first run of this benchmark).

Figures it gave: handing the C heap's free pages back before the digest's Parquet
writer (``faultline.checkers.results_file._give_back_freed_memory``) took the peak RSS at 10M
lines from 358-374 MB to 351 MB, in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable
from itertools import islice
from pathlib import Path

import orjson
import zstandard

from faultline.checkers.synthetic import Row, Shape, generate
from faultline.rundir import HISTORY_FILE, PLAIN_HISTORY_FILE
from faultline.spec import TestSpec


def shape_for(lines: int, seed: int) -> Shape:
    """A Shape giving about ``lines`` history lines."""
    probe = Shape(seed=seed, values=20_000, producers=4, consumers=1, poll_batch=10,
                  fail=0.01, info=0.01, faults=10, drain_batch=2000)
    per_value = sum(1 for _ in generate(probe)) / probe.values
    return Shape(seed=seed, values=int(lines / per_value), producers=4, consumers=1,
                 poll_batch=10, fail=0.01, info=0.01, faults=10, drain_batch=2000)


def write_run(run_dir: Path, rows: Iterable[Row], compressed: bool = False) -> int:
    """Write test.json and the history's ``rows``, plain or as a run writes it (zstd
    frames); return the number of lines."""
    (run_dir / "test.json").write_bytes(orjson.dumps(TestSpec().to_json()))
    n = 0
    rows = iter(rows)
    zstd = zstandard.ZstdCompressor(level=3, write_checksum=True)
    with open(run_dir / (HISTORY_FILE if compressed else PLAIN_HISTORY_FILE), "wb") as fh:
        while chunk := list(islice(rows, 10_000)):
            data = b"".join(orjson.dumps(r) + b"\n" for r in chunk)
            fh.write(zstd.compress(data) if compressed else data)
            n += len(chunk)
    return n


def peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: Linux carries ru_maxrss over
    fork + exec, so a child would report its parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(run_dir: Path) -> None:
    """Run check_run and print its figures as JSON (called in a fresh process)."""
    from faultline.checkers.results_file import check_run

    wall, cpu = time.perf_counter(), time.process_time()
    result = check_run(run_dir)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({
        "valid": result.valid, "lines": result.stats["ops"],
        "records": result.stats["records_polled"] + result.stats["records_drained"],
        "values": sum(result.stats["send"].values()) + result.stats["send_open"],
        "wall_s": wall, "cpu_s": cpu,
        "maxrss_mb": peak_rss_mb()}))


def stages(run_dir: Path) -> None:
    """Print what each stage of the check costs per line (see the module's docstring)."""
    from faultline.checkers import queue
    from faultline.history import HistoryFile, ReadResult, history_blocks

    spec = TestSpec.load(run_dir / "test.json")
    history = str(run_dir / PLAIN_HISTORY_FILE)

    def feed() -> queue.Engine:
        engine = queue.Engine(spec, "history")
        engine.feed_file(HistoryFile(history, ReadResult()))
        return engine

    passes: list[tuple[str, Callable[[], object]]] = [
        ("reading the lines", lambda: deque(history_blocks(run_dir), 0)),
        ("the engine's feed", feed),
        ("the decisions", lambda: feed().finish(False, None, queue.BrokerState())),
    ]
    from faultline.checkers.results_file import check_run

    passes.append(("the table and results.json", lambda: check_run(run_dir)))
    lines = sum(block.count(b"\n") for block in history_blocks(run_dir))
    check_run(run_dir)  # what it imports and loads on first use (Parquet, compiled code)
    before = 0.0
    for name, work in passes:
        cpu = min(_cpu(work) for _ in range(2))
        print(f"  {name:<28} {(cpu - before) / lines * 1e6:6.2f} us/line", flush=True)
        before = cpu
    print(f"  {'the whole check':<28} {before / lines * 1e6:6.2f} us/line")


def _cpu(work: Callable[[], object]) -> float:
    """The CPU time ``work()`` takes."""
    cpu = time.process_time()
    work()
    return time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, action="append",
                    help="history size in lines (repeatable; default 1M and 10M)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compressed", action="store_true",
                    help=f"write {HISTORY_FILE} as a run does (default: {PLAIN_HISTORY_FILE})")
    ap.add_argument("--stages", action="store_true",
                    help="also print each stage's cost per line (more passes: slower)")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--stages-of", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.baseline:
        import pyarrow as pa

        import faultline.checkers.results_file  # noqa: F401 - what the child imports
        from faultline.checkers.queue import warm

        pa.table({"warm": [1]})  # Arrow's first use, as the child's Parquet table makes it
        with tempfile.TemporaryDirectory(prefix="fl-bench-") as tmp:
            warm(Path(tmp))  # the compiled code loaded, as the child's check loads it
        print(peak_rss_mb())
        return
    if args.child:
        child(args.child)
        return
    if args.stages_of:
        stages(args.stages_of)
        return
    baseline = subprocess.run([sys.executable, __file__, "--baseline"], check=True,
                              capture_output=True, text=True)
    base_mb = float(baseline.stdout)
    print(f"baseline RSS of the interpreter with the checker imported, its compiled code loaded and "
          f"Arrow used: {base_mb:.0f} MB")
    print(f"{'lines':>11} {'values':>10} {'wall s':>7} {'cpu s':>7} {'lines/s wall':>13} "
          f"{'lines/s cpu':>12} {'records/s cpu':>13} {'peak RSS MB':>11} {'B/value':>8}")
    peaks: list[tuple[int, float]] = []  # (values, peak RSS MB) of each size
    for lines in args.lines or [1_000_000, 10_000_000]:
        with tempfile.TemporaryDirectory(prefix="fl-bench-") as tmp:
            run_dir = Path(tmp)
            t = time.perf_counter()
            n = write_run(run_dir, generate(shape_for(lines, args.seed)), args.compressed)
            gen_s = time.perf_counter() - t
            out = subprocess.run([sys.executable, __file__, "--child", str(run_dir)],
                                 check=True, capture_output=True, text=True)
            r = json.loads(out.stdout)
            assert r["valid"] is True, r
            per_value = (r["maxrss_mb"] - base_mb) * 2**20 / max(1, r["values"])
            peaks.append((r["values"], r["maxrss_mb"]))
            print(f"{n:>11,} {r['values']:>10,} {r['wall_s']:>7.1f} {r['cpu_s']:>7.1f} "
                  f"{n / r['wall_s']:>13,.0f} {n / r['cpu_s']:>12,.0f} "
                  f"{r['records'] / r['cpu_s']:>13,.0f} {r['maxrss_mb']:>11,.0f} "
                  f"{per_value:>8,.0f}   (generated in {gen_s:.0f}s)", flush=True)
            if args.stages:
                subprocess.run([sys.executable, __file__, "--stages-of", str(run_dir)], check=True)
    (v0, m0), (v1, m1) = min(peaks), max(peaks)
    if v1 > v0:
        print(f"peak RSS per value between {v0:,} and {v1:,} values: "
              f"{(m1 - m0) * 2**20 / (v1 - v0):.0f} B")


if __name__ == "__main__":
    main()
