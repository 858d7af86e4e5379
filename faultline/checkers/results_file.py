"""A run directory checked in place: :func:`check_run` is what ``faultline check`` and
``faultline run`` (at its end) call. It checks the stored run
(:func:`~faultline.checkers.stored.check_stored`) and writes ``results.json``
atomically (a temporary file renamed over it), so a crash mid-write never leaves a
half-written verdict, and beside it the history's sends as columns from the same pass
(``history.sends.parquet``, :mod:`faultline.checkers.table`), which the report reads
instead of the history.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from faultline.checkers.result import Result, unknown_result
from faultline.checkers.stored import check_stored_table
from faultline.checkers.table import write_digest
from faultline.errors import FaultlineError
from faultline.history import FOLLOW_S
from faultline.rundir import (
    HISTORY_FILE,
    PLAIN_HISTORY_FILE,
    RESULTS_FILE,
    SENDS_FILE,
    TEST_FILE,
    find_history,
    history_identity,
    write_atomic,
)


def check_run(run_dir: Path, follow: Callable[[], bool] | None = None) -> Result:
    """Check a run directory (:func:`~faultline.checkers.stored.check_stored`) and write its
    ``results.json`` and ``history.sends.parquet``; return the Result. ``follow`` reads
    the history while its run still writes it (:func:`~faultline.checkers.stored.check_stored_table`).
    The results name the history they judged, as it was once read to its end
    (``history``: :func:`~faultline.rundir.history_identity`), for the report to refuse
    them beside another: with ``follow``, once it is closed, also when the checker
    failed before its end.

    On an unreadable ``test.json`` or history it writes a ``results.json`` saying
    ``valid: "unknown"`` and why (not in a directory that has neither: no run), then
    raises the SpecError / HistoryError; a FaultlineError naming both when that
    ``results.json`` cannot be written either.
    """
    run_dir = Path(run_dir)
    try:
        result, table = check_stored_table(run_dir, follow=follow)
    except FaultlineError as e:
        if any((run_dir / name).is_file() for name in (TEST_FILE, HISTORY_FILE, PLAIN_HISTORY_FILE)):
            try:
                write_results(run_dir, unknown_result("unreadable-input", str(e)))
            except FaultlineError as unwritten:  # the cause first: it is what to fix
                raise FaultlineError(f"{e}; and {unwritten}") from None
        raise  # a directory with none of a run's files (not a run) gets no results.json
    while follow is not None and not follow():  # a checker that failed stopped reading it
        time.sleep(FOLLOW_S)
    history = find_history(run_dir)
    result = dataclasses.replace(result, extra={**result.extra, "history": history_identity(history)})
    if table is not None:
        _give_back_freed_memory()
        write_digest(run_dir / SENDS_FILE, table, history)
    write_results(run_dir, result)
    return result


def _give_back_freed_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing
    where there is none), so that the digest's Parquet writer does not peak above the
    holes the check's pass left."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def write_results(run_dir: Path, result: Result) -> Path:
    """Write ``results.json`` atomically (:func:`~faultline.rundir.write_atomic`); return its path."""
    data = orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    return write_atomic(Path(run_dir) / RESULTS_FILE, data)
