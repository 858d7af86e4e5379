"""``faultline check RUN_DIR``: re-check a stored run from its files alone
(:func:`faultline.checkers.results_file.check_run`) and say the verdict."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from faultline.checkers.result import UNKNOWN, Result
from faultline.checkers.results_file import check_run
from faultline.checkers.whitebox import verdict_line

#: Exit codes of ``faultline check`` (and ``faultline run``), by verdict.
EXIT_CODES: dict[Any, int] = {True: 0, False: 1, UNKNOWN: 2}


def summary(result: Result) -> str:
    """A few lines for a terminal: verdict, counts seen, violations, unknowns."""
    verdict = "VALID" if result.valid is True else "INVALID" if result.valid is False else "UNKNOWN"
    send = result.stats.get("send", {})
    lines = [f"{verdict}: {send.get('ok', 0)} ok, {send.get('fail', 0)} fail, "
             f"{send.get('info', 0)} info sends"]
    seen = [f"{k} {n}" for k, n in result.anomaly_counts.items() if n]
    lines.append("anomalies: " + (", ".join(seen) if seen else "none"))
    if result.violations:
        lines.append("violations (not permitted): " + ", ".join(result.violations))
    white = result.extra.get("white_box")
    if isinstance(white, dict):
        lines.append(f"white-box invariants: {verdict_line(white)}")
        lines += [f"white-box input unreadable: {e}" for e in white.get("errors") or ()]
    for u in result.unknown:
        if u.get("affects_verdict"):
            where = f" {u['topic']}/{u['partition']}" if "topic" in u else ""
            lines.append(f"unknown: {u.get('kind')}{where}")
    return "\n".join(lines)


@click.command("check")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
def check(run_dir: Path) -> None:
    """Check a stored run: read RUN_DIR's test.json and history, write results.json.

    Exit 0 if valid, 1 if invalid, 2 if unknown or the input is unreadable.
    """
    result = check_run(run_dir)
    click.echo(summary(result))
    click.echo(f"wrote {run_dir / 'results.json'}")
    sys.exit(EXIT_CODES[result.valid])
