"""``faultline analyze SWEEP_DIR...``: the Spark pipeline, the comparison page and the JUnit XML.

Writes ``<out>/tables/`` (Parquet: runs, ops, faults, anomalies, observations, cells),
``<out>/comparison.html`` and ``<out>/junit.xml``; ``out`` defaults to ``analysis/`` in
the newest sweep directory given. Exit 0 when no cell has a violation or an unknown or
failed run, 1 for a violation, 2 for an unknown or failed cell (or unreadable input).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
from rich.console import Console

from faultline.analysis.comparison import write_comparison
from faultline.analysis.junit import exit_code, write_junit
from faultline.analysis.pipeline import analyze as run_pipeline
from faultline.analysis.spark import Progress, session
from faultline.analysis.sweepdir import read_sweeps

JUNIT_FILE = "junit.xml"


@click.command("analyze")
@click.argument("sweep_dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where the tables, comparison.html and junit.xml go [default: NEWEST_SWEEP/analysis]")
@click.option("--master", default=None, help="Spark master URL [default: local[*]]")
@click.option("--remote", default=None, help="Spark Connect URL (sc://host:port); wins over --master")
def analyze(sweep_dirs: tuple[Path, ...], out: Path | None, master: str | None, remote: str | None) -> None:
    """Analyze sweeps on Spark: Parquet tables, the checker per run on executors, per-cell
    aggregates with the trend across the sweeps given, comparison.html and junit.xml."""
    sweeps = read_sweeps(sweep_dirs)  # a bad directory fails here, before Spark starts
    out = (out or sweeps[-1].path / "analysis").resolve()
    console = Console(stderr=True)
    started = time.monotonic()
    with console.status("starting Spark"):
        spark = session(master, remote)
    with Progress(spark, console) as progress:
        result = run_pipeline(spark, [s.path for s in sweeps], str(out), progress)
        with progress.step("comparison.html and junit.xml"):
            page = write_comparison(result.cells, out, [s.id for s in sweeps])
            latest = max((str(c["created"]) for c in result.cells), default="")
            tonight = [c for c in result.cells if str(c["created"]) == latest]
            junit = write_junit(out / JUNIT_FILE, tonight)
    took = time.monotonic() - started
    click.echo(f"{len(result.runs)} runs, {result.history_lines} history lines in {took:.1f} s "
               f"({result.history_lines / max(took, 1e-9):.0f} lines/s)")
    click.echo(f"tables: {out / 'tables'}")
    click.echo(f"comparison: {page}")
    click.echo(f"junit: {junit}")
    sys.exit(exit_code(tonight))
