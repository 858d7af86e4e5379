"""What an analysis of sweeps writes: the Spark pipeline's tables, the comparison page
and the JUnit XML.

:func:`analyze_sweeps` is the whole of it, for ``faultline analyze`` and ``faultline
nightly``: it writes ``<out>/tables/`` (Parquet: runs, ops, faults, anomalies,
observations, cells), ``<out>/comparison.html`` and ``<out>/junit.xml`` (the newest
sweep's cells); ``out`` defaults to ``analysis/`` in the newest sweep directory given.
Exit status (:func:`faultline.analysis.junit.exit_code`): 0, 1 for a violation, 2 for an
unknown or failed cell (or unreadable input).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

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
