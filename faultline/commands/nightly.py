"""``faultline nightly CONFIG.yaml``: a night of a team's matrix, its analysis and its verdict.

::

    RESULTS/nightly/<YYYY-MM-DD>/sweep/       the night's sweep (faultline sweep; resumable)
    RESULTS/nightly/<YYYY-MM-DD>/analysis/    faultline analyze over every night's sweep found
                                              under RESULTS/nightly/ up to this one (the trend),
                                              this night newest: tables/, comparison.html, junit.xml

``CONFIG.yaml`` is a sweep matrix (``faultline sweep``'s). The sweep's manifest names the
night (``--date``, default today), which the analysis labels it with whenever it ran (after
midnight, or days later). Rerunning the same night resumes its sweep (the finished cells
are kept) and analyzes again. Exit status: 0 when every cell
of the night is clean or lost only what its guarantees permit, 1 for a violation, 2 for a
cell unknown or errored (as ``faultline analyze`` says of the night's cells, also when a
later night exists: ``--date`` resumes an earlier one; junit.xml is the night's too; a
sweep that did not run every cell is 2 even if the analysis of what ran is clean).

``--master spark://HOST:PORT`` runs the night's cells on that standalone cluster's workers
as ``faultline sweep --master`` does, then the analysis in the same Spark session; another
master (``local[N]``, ``yarn``, ...) or ``--remote`` is the analysis's alone.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console

from faultline.analysis.outputs import analyze_sweeps
from faultline.analysis.spark import session
from faultline.analysis.sweepdir import SWEEP_FILE, is_date
from faultline.sweep.matrix import load_matrix
from faultline.sweep.runner import run_matrix
from faultline.sweep.spark_cells import SparkCells, is_cluster

SWEEP_DIR = "sweep"
ANALYSIS_DIR = "analysis"


def night_sweeps(nightly: Path, until: str) -> list[Path]:
    """Every night's sweep directory under ``nightly`` that has a manifest, up to and
    including night ``until``, oldest first (the night directories are dates, so their
    names sort by time): a rerun of an older night is the newest of its own analysis."""
    return sorted(p.parent for p in nightly.glob(f"*/{SWEEP_DIR}/{SWEEP_FILE}")
                  if p.parent.parent.name <= until)


def exit_status(sweep_status: int, analysis_status: int) -> int:
    """1 for a violation either saw, else 2 for anything unknown, failed or not run, else 0."""
    statuses = {sweep_status, analysis_status}
    return 1 if 1 in statuses else 2 if 2 in statuses else 0


@click.command("nightly")
@click.argument("config", metavar="CONFIG.yaml",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="the results directory; nights go to RESULTS/nightly/<date>/")
@click.option("--date", "night", default=None, metavar="YYYY-MM-DD",
              help="the night's name [default: today, UTC]")
@click.option("--master", default=None,
              help="Spark master URL; spark://HOST:PORT runs the cells there too [default: local[*]]")
@click.option("--remote", default=None, help="Spark Connect URL (sc://host:port); wins over --master")
def nightly(config: Path, results: Path, night: str | None, master: str | None,
            remote: str | None) -> None:
    """Run a night: the sweep of CONFIG.yaml, the Spark pipeline over every night so far,
    comparison.html (with the trend) and junit.xml. Exit 0 clean, 1 a violation, 2 a cell
    unknown or errored."""
    if night is None:
        night = datetime.now(UTC).strftime("%Y-%m-%d")
    elif not is_date(night):  # zero-padded: the nights sort by name (night_sweeps)
        raise click.BadParameter(f"{night!r} is not a date YYYY-MM-DD", param_hint="--date")
    matrix = load_matrix(config)
    console = Console(stderr=True)
    night_dir = results / "nightly" / night
    workers = SparkCells.connect(master, session) if is_cluster(master) else None
    manifest = run_matrix(matrix, night_dir / SWEEP_DIR, console, night, workers)
    out = analyze_sweeps(night_sweeps(results / "nightly", night), night_dir / ANALYSIS_DIR,
                         master, remote, console, judge=night_dir / SWEEP_DIR)
    click.echo(f"night:      {night_dir}")
    click.echo(f"cells:      done {manifest.count('done')}  failed {manifest.count('failed')}"
               f"  of {len(manifest.cells)}")
    click.echo(f"comparison: {out.comparison}")
    click.echo(f"junit:      {out.junit}")
    sys.exit(exit_status(manifest.exit_code, out.exit_code))
