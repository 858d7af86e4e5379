"""What a run costs after its main phase, and on disk.

Runs ``faultline run`` (by default what ``make run`` runs: kills and partitions, 60 s)
and prints each phase's time, the four stages after the main phase the issue measures
(drain, broker state, check, report) against the main phase, the drain's records/s, and
the history's size: bytes per acknowledged send and MB per minute of main phase.

    flock /tmp/fl-cluster.lock .venv/bin/python benchmarks/bench_run.py
    flock /tmp/fl-cluster.lock .venv/bin/python benchmarks/bench_run.py -- --time-limit 30
    .venv/bin/python benchmarks/bench_run.py --output run.err --run-dir RUN_DIR  # a run already made

The times are the runner's own phase lines (``[  70.2s] draining``), which it prints
when its output is not a terminal; ``--output`` reads them from a file kept from such
a run.

Figures it gave (``make run``, 2 cores), behind the CPU priorities of docs/design.md's
"The run": the following check at the run's priority during the drain took the drain
from 2.9 s to 4.2-4.7 s, for a check 1.0-1.7 s shorter; left at nice 19 after the drain,
it lagged 18-46 s behind it; the drain's readers at the run's priority left the check
seconds behind the drain.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

PHASE = re.compile(r"^\[\s*([\d.]+)s\] (.+)$", re.MULTILINE)
#: stage -> (the phase it starts with, the phase that follows it)
STAGES = {
    "drain": ("draining", "collecting broker state"),
    "broker state": ("collecting broker state", "collecting node logs"),
    "check": ("checking", "report"),
    "report": ("report", "done"),
}
DEFAULT_ARGS = ["--nemesis", "kill,partition", "--time-limit", "60"]


def phases(output: str) -> dict[str, float]:
    """Phase name -> seconds since the run started, from the runner's phase lines."""
    return {m.group(2).split(" (")[0]: float(m.group(1)) for m in PHASE.finditer(output)}


def history_file(run_dir: Path) -> Path:
    for name in ("history.jsonl.zst", "history.jsonl"):
        if (run_dir / name).is_file():
            return run_dir / name
    raise SystemExit(f"{run_dir}: no history")


def report(output: str, run_dir: Path) -> None:
    at = phases(output)
    names = list(at)
    print("phases:")
    for a, b in itertools.pairwise(names):
        print(f"  {a:<26} {at[b] - at[a]:7.1f} s")
    main_s = at["healing"] - at["main phase"]
    stats = json.loads((run_dir / "results.json").read_text())["stats"]
    after = {stage: at[end] - at[start] for stage, (start, end) in STAGES.items()}
    total = sum(after.values())
    print(f"main phase {main_s:.1f} s; after it: " +
          ", ".join(f"{k} {v:.1f} s" for k, v in after.items()) +
          f"; together {total:.1f} s = {total / main_s:.0%} of the main phase (target <= 15%)")
    drained = stats.get("records_drained", 0)
    print(f"drain: {drained:,} records in {after['drain']:.1f} s = "
          f"{drained / max(after['drain'], 1e-9):,.0f} records/s (target >= 500k)")
    hist = history_file(run_dir)
    size, acked = hist.stat().st_size, stats["send"]["ok"]
    print(f"history: {hist.name} {size:,} B for {acked:,} acknowledged sends = "
          f"{size / max(acked, 1):.1f} B per send, {size / 1e6 / (main_s / 60):.1f} MB per minute "
          f"of main phase (target <= 60)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--output", type=Path, help="the stderr of a run already made")
    ap.add_argument("--run-dir", type=Path, help="with --output: that run's directory")
    ap.add_argument("--faultline", default=str(Path(sys.executable).parent / "faultline"))
    a, rest = ap.parse_known_args()  # the rest, after --, are faultline run's options
    if a.output:
        if a.run_dir is None:
            ap.error("--output needs the run directory")
        report(a.output.read_text(), a.run_dir)
        return
    args = [x for x in rest if x != "--"] or DEFAULT_ARGS
    proc = subprocess.run([a.faultline, "run", *args], capture_output=True, text=True, check=False)
    run = re.search(r"^run:\s+(\S+)", proc.stdout, re.MULTILINE)
    if run is None:
        raise SystemExit(f"faultline run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    print(proc.stdout.strip())
    report(proc.stderr, Path(run.group(1)))


if __name__ == "__main__":
    main()
