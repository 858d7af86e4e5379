"""``faultline report RUN_DIR``: (re)build a stored run's ``report.html``.

The report reads only the run's files (see :func:`faultline.report.page.build_report`),
so it can be rebuilt any time, e.g. after ``faultline check`` re-checked the run. A
directory that is not a readable run is one line on stderr and exit code 2.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from faultline.report.page import build_report


@click.command("report")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
def report(run_dir: Path) -> None:
    """Write RUN_DIR/report.html from RUN_DIR's test.json, history and results.json.

    Prints the report's path. Exit 0 once written; 2 if RUN_DIR is not a readable run.
    """
    started = time.perf_counter()
    path = build_report(run_dir)
    size = path.stat().st_size / 1e6
    click.echo(f"wrote {path} ({size:.1f} MB in {time.perf_counter() - started:.1f} s)", err=True)
    click.echo(str(path))
