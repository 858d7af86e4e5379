"""``faultline analyze SWEEP_DIR...``: the Spark pipeline, the comparison page and the
JUnit XML (:func:`faultline.analysis.outputs.analyze_sweeps`). Exit status
(:func:`faultline.analysis.junit.exit_code`): 0, 1 for a violation, 2 for an unknown or
failed cell (or unreadable input).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from faultline.analysis.outputs import analyze_sweeps


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
               f"in {o.seconds:.1f} s ({a.history_lines / max(o.seconds, 1e-9):.0f} lines/s); "
               f"the check itself {a.check_cpu_s:.1f} CPU-s on the executors")
    click.echo(f"tables: {Path(a.tables['runs']).parent}")
    click.echo(f"comparison: {o.comparison}")
    click.echo(f"junit: {o.junit}")
    sys.exit(o.exit_code)
