"""The one check of a stored run: its workload's checker, then the white box.

``faultline check``, ``faultline run`` and the report all judge a run through
:func:`check_stored`, so they cannot disagree; the Spark pipeline will too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from faultline.checkers.faults_seen import Timeline
from faultline.checkers.queue import check_rows_table
from faultline.checkers.result import Result, unknown_result
from faultline.checkers.table import HistoryTable
from faultline.checkers.whitebox import BrokerFiles, check_white_box, partition_timeline
from faultline.errors import HistoryError, SpecError
from faultline.history import ReadResult, iter_rows
from faultline.rundir import CLIENT_LOG_FILE, TEST_FILE, find_history, read_jsonl
from faultline.spec import TestSpec


class Checker(Protocol):
    """A workload's checker: a stored run's history rows in, a Result out, and from the
    same pass the history's sends as columns (:class:`~faultline.checkers.table.HistoryTable`).

    ``truncated`` is filled by the rows' reader once they are exhausted; ``source``
    names the history in errors; ``timeline`` and ``replicas`` are the broker's own
    state when the run has it, ``client_log`` the client library's lines (empty
    without); :func:`~faultline.checkers.queue.check_rows` says how the queue checker
    uses them. Raises HistoryError for a malformed op; any other
    exception is the checker's own failure, which :func:`check_stored` turns into an
    ``unknown`` verdict, never a pass.
    """

    def __call__(self, spec: TestSpec, rows: Iterable[dict[str, Any]], *, truncated: ReadResult,
                 source: str, timeline: Timeline | None,
                 replicas: Sequence[dict[str, Any]] | None,
                 client_log: Iterable[dict[str, Any]]) -> tuple[Result, HistoryTable | None]: ...


#: workload name (``spec.workload.name``) -> its checker.
CHECKERS: Mapping[str, Checker] = {
    "queue": check_rows_table,
}


def check_stored(run_dir: Path, rows: Iterable[dict[str, Any]] | None = None, *,
                 truncated: bool = False) -> Result:
    """The one check of a stored run, from its files alone; writes nothing.
    :func:`check_stored_table` says how."""
    return check_stored_table(run_dir, rows, truncated=truncated)[0]


def check_stored_table(run_dir: Path, rows: Iterable[dict[str, Any]] | None = None, *,
                       truncated: bool = False) -> tuple[Result, HistoryTable | None]:
    """The one check of a stored run, from its files alone, and from the same pass over
    the history its sends as columns (None when the checker failed); writes nothing.

    ``rows``, when given, are the run's history rows read elsewhere (the Spark pipeline
    reads them back from its ``ops`` table, :mod:`faultline.analysis.check`) instead of
    its history file, with ``truncated`` saying whether that file's last line was cut;
    every other file still comes from ``run_dir``, and the check is the same.

    ``faultline check``, ``faultline run`` (through :func:`check_run`) and the report
    all judge a run here, so they cannot disagree. A cut last history line is tolerated
    (the verdict is then at most unknown). The broker's own state, when the run has it,
    sharpens the verdict: the metadata log's partition timeline (which faults hit which
    leader, which partitions elected a new one, when a node whose data was destroyed
    had caught up again) and the replicas' logs (a drain that stopped short of what
    every replica holds decides nothing past its end); see
    :func:`faultline.checkers.queue.check_rows`. The client log (``client-log.jsonl``,
    when there is one) lines the client's own account up with duplicates; one that
    cannot be read is named in ``client_log_error`` and not used. The white-box invariants are added as
    ``white_box`` (:mod:`faultline.checkers.whitebox`), which never changes ``valid``;
    an unreadable white-box file is named in ``white_box.errors``. A checker that fails
    (anything but HistoryError) gives ``valid: "unknown"`` saying so, never a pass.
    Raises SpecError / HistoryError for an unreadable ``test.json`` or history, and
    SpecError for a workload that has no checker.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HistoryError(str(run_dir), None, "not a run directory")
    spec = TestSpec.load(run_dir / TEST_FILE)
    history = find_history(run_dir)
    read = ReadResult(truncated=truncated)
    checker = CHECKERS.get(spec.workload.name)
    if checker is None:
        raise SpecError(f"no checker for workload {spec.workload.name!r}; checkers: {', '.join(CHECKERS)}")
    files = BrokerFiles.read(run_dir)
    client_log: list[dict[str, Any]] = []
    client_log_error = None
    if (run_dir / CLIENT_LOG_FILE).is_file():
        try:
            client_log = read_jsonl(run_dir / CLIENT_LOG_FILE)
        except HistoryError as e:
            client_log_error = str(e)
    if rows is None:
        rows = iter_rows(history, read)
    try:
        result, table = checker(spec, rows, truncated=read, source=str(history),
                                timeline=partition_timeline(files.metadata, spec.topic.name),
                                replicas=files.replicas, client_log=client_log)
    except HistoryError:
        raise
    except Exception as e:  # a checker bug must never pass a run
        return unknown_result("checker-error", f"the {spec.workload.name} checker failed: "
                                               f"{type(e).__name__}: {e}"), None
    if client_log_error is not None:
        result = replace(result, extra={**result.extra, "client_log_error": client_log_error})
    white = check_white_box(spec, files, result.to_json())
    if white is not None:
        result = replace(result, extra={**result.extra, "white_box": white})
    return result, table


