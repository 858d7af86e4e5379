"""The one check of a stored run: its workload's checker, then the white box.

``faultline check``, ``faultline run`` and the report all judge a run through
:func:`check_stored`, so they cannot disagree; the Spark pipeline will too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from faultline.checkers.guarantees import elr_enabled
from faultline.checkers.queue import BrokerState, check_rows_table
from faultline.checkers.result import UNKNOWN, Result, unknown_result
from faultline.checkers.table import HistoryDigest
from faultline.checkers.whitebox import BrokerFiles, check_white_box, partition_timeline
from faultline.errors import HistoryError, SpecError
from faultline.history import HistoryFile, ReadResult
from faultline.rundir import (
    CLIENT_LOG_FILE,
    CLUSTER_FILE,
    TEST_FILE,
    find_history,
    read_jsonl,
)
from faultline.spec import TestSpec


class Checker(Protocol):
    """A workload's checker: a stored run's history rows in, a Result out, and from the
    same pass the history's sends as columns (:class:`~faultline.checkers.table.HistoryDigest`).

    ``truncated`` is filled by the rows' reader once they are exhausted; ``source``
    names the history in errors; ``broker``, called once the rows are exhausted, always (and
    not before: a followed history's run writes its broker state before it closes the
    history), gives the broker's own state when the run has it and the client library's
    lines; :func:`~faultline.checkers.queue.check_rows` says how the queue checker
    uses them. Raises HistoryError for a malformed op; any other
    exception is the checker's own failure, which :func:`check_stored` turns into an
    ``unknown`` verdict, never a pass.
    """

    def __call__(self, spec: TestSpec, rows: Iterable[dict[str, Any]], *, truncated: ReadResult,
                 source: str, broker: Callable[[], BrokerState]) -> tuple[Result, HistoryDigest | None]: ...


#: workload name (``spec.workload.name``) -> its checker.
CHECKERS: Mapping[str, Checker] = {
    "queue": check_rows_table,
}


@dataclass(slots=True)
class _RunState:
    """A run's broker state and client log, read when the checker asks for them (once
    it has read the history); what was read stays here for the white box."""

    run_dir: Path
    spec: TestSpec
    files: BrokerFiles | None = None
    client_log_error: str | None = None

    def __call__(self) -> BrokerState:
        self.files = BrokerFiles.read(self.run_dir)
        client_log: list[dict[str, Any]] = []
        if (self.run_dir / CLIENT_LOG_FILE).is_file():
            try:
                client_log = read_jsonl(self.run_dir / CLIENT_LOG_FILE)
            except HistoryError as e:
                self.client_log_error = str(e)
        return BrokerState(partition_timeline(self.files.metadata, self.spec.topic.name),
                           self.files.replicas, client_log)


def check_stored(run_dir: Path, rows: Iterable[dict[str, Any]] | None = None, *,
                 truncated: bool = False) -> Result:
    """The one check of a stored run, from its files alone; writes nothing.
    :func:`check_stored_table` says how."""
    return check_stored_table(run_dir, rows, truncated=truncated)[0]


def check_stored_table(run_dir: Path, rows: Iterable[dict[str, Any]] | None = None, *,
                       truncated: bool = False,
                       follow: Callable[[], bool] | None = None) -> tuple[Result, HistoryDigest | None]:
    """The one check of a stored run, from its files alone, and from the same pass over
    the history its sends as columns (None when the checker failed); writes nothing.

    ``rows``, when given, are the run's history rows read elsewhere (the Spark pipeline
    reads them back from its ``ops`` table, :mod:`faultline.analysis.check`) instead of
    its history file, with ``truncated`` saying whether that file's last line was cut;
    every other file still comes from ``run_dir``, and the check is the same.
    ``follow``, without ``rows``, reads the history while its run still writes it, until
    ``follow()`` says it is closed (:func:`faultline.history.history_lines`); the other
    files are read after the history, so they must be written before it is closed, as
    :func:`faultline.run.runner.run_test` does.

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
    ``white_box`` (:mod:`faultline.checkers.whitebox`); where it is violated (and the
    guarantees do not permit it) while the history found nothing forbidden, the two
    disagree and ``valid`` is unknown (``broker-state-disagrees``); an unreadable
    white-box file is named in ``white_box.errors``. Anomalies judged with eligible
    leader replicas on (or off) by the Kafka version, where ``cluster.json`` says the
    cluster ran the other way, are not known permitted or forbidden: ``valid`` is unknown
    (``broker-state-disagrees``). But a metadata log, replicas or observations file the
    run has and the check could not read or that does not conform to its schema (the
    file and line named), or one ``cluster.json`` says
    could not be collected (``broker_state_errors``), makes ``valid`` unknown
    (``broker-state-unreadable``), whatever it was: what the file says can forbid a
    loss the check permitted without it, or set aside one it counted. A checker that fails
    (anything but HistoryError, or MemoryError, which is raised) gives ``valid: "unknown"``
    saying so, never a pass.
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
    if rows is None:
        rows = HistoryFile(str(history), read, follow)
    state = _RunState(run_dir, spec)
    try:
        result, table = checker(spec, rows, truncated=read, source=str(history), broker=state)
    except (HistoryError, MemoryError):  # the history's fault, or the machine's: no verdict to save
        raise
    except Exception as e:  # a checker bug must never pass a run
        return unknown_result("checker-error", f"the {spec.workload.name} checker failed: "
                                               f"{type(e).__name__}: {e}"), None
    if state.client_log_error is not None:
        result = replace(result, extra={**result.extra, "client_log_error": state.client_log_error})
    assert state.files is not None, "a checker calls broker once it has read the rows"
    result = _undecided_without(result, state.files)
    result = _elr_disagreeing(result, spec, state.files)
    white = check_white_box(spec, state.files, result.to_json())
    if white is not None:
        result = _disagreeing(replace(result, extra={**result.extra, "white_box": white}), white)
    return result, table


def _disagreeing(result: Result, white: dict[str, Any]) -> Result:
    """``result``, unknown if the history found nothing forbidden while the brokers' own
    state broke an invariant the guarantees do not permit to break (``white_box``): one of
    the two is wrong, so the run is not known valid (``broker-state-disagrees``)."""
    if result.valid is not True or white.get("valid") is not False:
        return result
    broken = [i["name"] for i in white.get("invariants") or () if i.get("violations")]
    return _undecided(result, "broker-state-disagrees",
                      f"the history shows nothing forbidden, but the brokers' own state broke "
                      f"{', '.join(broken)} (white_box): the two disagree, so the run is not known valid")


def _undecided_without(result: Result, files: BrokerFiles) -> Result:
    """``result``, unknown if the run has a metadata log or replicas file the check
    needed and could not read, or could not collect one (check_stored_table says why)."""
    unread = [f"{name} could not be read" for name in files.unreadable]
    problems = list(files.errors) if unread else []
    if files.uncollected:
        unread.append("the broker state was not all collected")
        problems += files.uncollected
    if not unread:
        return result
    return _undecided(result, "broker-state-unreadable",
                      f"{' and '.join(unread)} ({'; '.join(problems)}): the broker's own state might "
                      "forbid what the check permitted without it, or set aside what it counted")


def _elr_disagreeing(result: Result, spec: TestSpec, files: BrokerFiles) -> Result:
    """``result``, unknown if it saw an anomaly and was judged with or without eligible
    leader replicas (by the Kafka version, :func:`~faultline.checkers.guarantees.elr_enabled`)
    where ``cluster.json`` says the cluster ran the other way: what the guarantees permit
    depends on it (``broker-state-disagrees``)."""
    said, judged = files.eligible_leader_replicas, elr_enabled(spec.kafka.version)
    if said is None or said == judged or not any(result.anomaly_counts.values()):
        return result
    word = {True: "on", False: "off"}
    return _undecided(result, "broker-state-disagrees",
                      f"the anomalies were judged with eligible leader replicas {word[judged]} (Kafka "
                      f"{spec.kafka.version}), but the cluster's metadata log says they were "
                      f"{word[said]} ({CLUSTER_FILE}): what the guarantees permit depends on it, so "
                      "the verdict is not known")


def _undecided(result: Result, kind: str, why: str) -> Result:
    """``result`` made unknown by an ``unknown`` entry of ``kind`` that affects the verdict."""
    entry = {"kind": kind, "why": why, "affects_verdict": True}
    return replace(result, valid=UNKNOWN, unknown=[*result.unknown, entry])


