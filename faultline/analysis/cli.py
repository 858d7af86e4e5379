"""``faultline analyze SWEEP_DIR...``: the Spark pipeline, the comparison page and the JUnit XML.

:func:`analyze_sweeps` is the whole of it, for ``faultline analyze`` and ``faultline
nightly``: it writes ``<out>/tables/`` (Parquet: runs, ops, faults, anomalies,
observations, cells), ``<out>/comparison.html`` and ``<out>/junit.xml`` (the newest
sweep's cells); ``out`` defaults to ``analysis/`` in the newest sweep directory given.
Exit status (:func:`faultline.analysis.junit.exit_code`): 0, 1 for a violation, 2 for an
unknown or failed cell (or unreadable input).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console

from faultline.analysis.comparison import write_comparison
from faultline.analysis.evidence import with_targeted
from faultline.analysis.junit import exit_code, write_junit
from faultline.analysis.pipeline import Analysis, analyze
from faultline.analysis.spark import Progress, session
from faultline.analysis.sweepdir import read_sweeps

JUNIT_FILE = "junit.xml"


@dataclass(frozen=True, slots=True)
class Outputs:
    """What :func:`analyze_sweeps` made, how long it took (s) and the exit status it implies."""

    analysis: Analysis
    comparison: Path
    junit: Path
    exit_code: int
    seconds: float


def analyze_sweeps(sweep_dirs: tuple[Path, ...] | list[Path], out: Path | None = None,
                   master: str | None = None, remote: str | None = None,
                   console: Console | None = None, judge: Path | None = None) -> Outputs:
    """Analyze ``sweep_dirs`` (the trend runs across all of them; the grid shows the newest
    night) into ``out``; junit.xml and the exit status are about the sweep ``judge`` (one of
    ``sweep_dirs``; default the newest). HistoryError, before Spark starts, for a directory
    that is not a sweep."""
    sweeps = read_sweeps(sweep_dirs)
    judged = sweeps[-1] if judge is None else next(
        s for s in sweeps if s.path.resolve() == Path(judge).resolve())
    out = (out or sweeps[-1].path / "analysis").resolve()
    console = console or Console(stderr=True)
    started = time.monotonic()
    with console.status("starting Spark"):
        spark = session(master, remote)
    with Progress(spark, console) as progress:
        result = analyze(spark, [s.path for s in sweeps], str(out), progress)
        with progress.step("comparison.html and junit.xml"):
            cells = with_targeted(result.cells, result.runs)
            page = write_comparison(cells, out, [s.id for s in sweeps])
            judged_cells = [c for c in cells if c["sweep"] == judged.id]
            junit = write_junit(out / JUNIT_FILE, judged_cells)
    return Outputs(result, page, junit, exit_code(judged_cells), time.monotonic() - started)


@click.command("analyze")
@click.argument("sweep_dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where the tables, comparison.html and junit.xml go [default: NEWEST_SWEEP/analysis]")
@click.option("--master", default=None, help="Spark master URL [default: local[*]]")
@click.option("--remote", default=None, help="Spark Connect URL (sc://host:port); wins over --master")
def analyze_command(sweep_dirs: tuple[Path, ...], out: Path | None, master: str | None,
                    remote: str | None) -> None:
    """Analyze sweeps on Spark: Parquet tables, the checker per run on executors, per-cell
    aggregates with the trend across the sweeps given, comparison.html and junit.xml.

    Exit 0 when every cell of the newest sweep is clean or lost only what its guarantees
    permit, 1 for a violation, 2 for an unknown or failed cell."""
    o = analyze_sweeps(sweep_dirs, out, master, remote)
    a = o.analysis
    checked = len(a.results)
    click.echo(f"{checked} runs checked ({len(a.runs) - checked} not), {a.history_lines} history lines "
               f"in {o.seconds:.1f} s ({a.history_lines / max(o.seconds, 1e-9):.0f} lines/s)")
    click.echo(f"tables: {Path(a.tables['runs']).parent}")
    click.echo(f"comparison: {o.comparison}")
    click.echo(f"junit: {o.junit}")
    sys.exit(o.exit_code)
