"""``faultline check RUN_DIR``: re-check a stored run from its files alone.

:func:`check_run` is what ``faultline run`` calls at the end: it reads ``test.json``
and ``history.jsonl``, runs the queue checker, and writes ``results.json``
atomically (a temporary file renamed over it), so a crash mid-write never leaves a
half-written verdict.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import orjson

from faultline.checkers.queue import check_rows
from faultline.checkers.result import UNKNOWN, Result, unknown_result
from faultline.checkers.whitebox import (
    BrokerFiles,
    check_white_box,
    partition_timeline,
    verdict_line,
)
from faultline.errors import FaultlineError, HistoryError
from faultline.history import ReadResult, iter_rows
from faultline.spec import TestSpec

#: Exit codes of ``faultline check`` (and ``faultline run``), by verdict.
EXIT_CODES: dict[Any, int] = {True: 0, False: 1, UNKNOWN: 2}


def check_run(run_dir: Path) -> Result:
    """Check a run directory (:func:`check_stored`) and write its ``results.json``;
    return the Result.

    On an unreadable ``test.json`` or history it writes a ``results.json`` saying
    ``valid: "unknown"`` and why, then raises the SpecError / HistoryError.
    """
    try:
        result = check_stored(run_dir)
    except FaultlineError as e:
        if Path(run_dir).is_dir():
            write_results(run_dir, unknown_result("unreadable-input", str(e)))
        raise
    write_results(run_dir, result)
    return result


def check_stored(run_dir: Path) -> Result:
    """The one check of a stored run, from its files alone; writes nothing.

    ``faultline check``, ``faultline run`` (through :func:`check_run`) and the report
    all judge a run here, so they cannot disagree. A cut last history line is tolerated
    (the verdict is then at most unknown). The broker's own state, when the run has it,
    sharpens the verdict: the metadata log's partition timeline (which faults hit which
    leader, which partitions elected a new one, when a node whose data was destroyed
    had caught up again) and the replicas' logs (a drain that stopped short of what
    every replica holds decides nothing past its end); see
    :func:`faultline.checkers.queue.check_rows`. The white-box invariants are added as
    ``white_box`` (:mod:`faultline.checkers.whitebox`), which never changes ``valid``;
    an unreadable white-box file is named in ``white_box.errors``.
    Raises SpecError / HistoryError for an unreadable ``test.json`` or history.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HistoryError(str(run_dir), None, "not a run directory")
    spec = TestSpec.load(run_dir / "test.json")
    history = run_dir / "history.jsonl"
    read = ReadResult()
    files = BrokerFiles.read(run_dir)
    result = check_rows(spec, iter_rows(history, read), truncated=read, source=str(history),
                        timeline=partition_timeline(files.metadata, spec.topic.name),
                        replicas=files.replicas)
    white = check_white_box(spec, files, result.to_json())
    if white is not None:
        result = replace(result, extra={**result.extra, "white_box": white})
    return result


def write_results(run_dir: Path, result: Result) -> Path:
    """Write ``results.json`` atomically (temp file, fsync, rename); return its path."""
    path = Path(run_dir) / "results.json"
    data = orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    fd, tmp = tempfile.mkstemp(prefix=".results.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
    """Check a stored run: read RUN_DIR's test.json and history.jsonl, write results.json.

    Exit 0 if valid, 1 if invalid, 2 if unknown or the input is unreadable.
    """
    result = check_run(run_dir)
    click.echo(summary(result))
    click.echo(f"wrote {run_dir / 'results.json'}")
    sys.exit(EXIT_CODES[result.valid])
