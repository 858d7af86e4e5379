"""The one check of a stored run: the checkers its workload names, composed by name.

As Jepsen's ``checker/compose``: each :class:`Checker` checks the stored run
(:class:`StoredRun`) and returns what it found (:class:`Checked`: a Result whose ``valid``
is true, false or unknown, with its reasons); :func:`compose` runs the named ones in order
and merges them into the run's one Result. A checker is added by one line in
:data:`CHECKERS` and its name in its workload's (:data:`faultline.spec.WORKLOAD_CHECKERS`).

``faultline check``, ``faultline run`` and the report all judge a run through
:func:`check_stored`, so they cannot disagree; the Spark pipeline does too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from faultline.checkers import groups
from faultline.checkers.faults_seen import Timeline
from faultline.checkers.group_end import (
    group_end,
    group_partition,
    offsets_nodes,
    offsets_timeline,
    partition_nodes,
)
from faultline.checkers.group_history import GroupReader
from faultline.checkers.guarantees import GuaranteeConfig, TransactionConfig, offsets_config
from faultline.checkers.queue import BrokerState, check_rows_table
from faultline.checkers.result import UNKNOWN, Result, merge_valid, unknown_result
from faultline.checkers.table import HistoryDigest
from faultline.checkers.transactions import check_transactions, txn_history
from faultline.checkers.txn_log import final_stable_offsets, partition_logs
from faultline.checkers.verdict import QueueFacts
from faultline.checkers.whitebox import (
    BrokerFiles,
    check_replicas_agree,
    check_white_box,
    final_isr,
    partition_timeline,
)
from faultline.errors import HistoryError, SpecError
from faultline.history import HistoryFile, ReadResult
from faultline.rundir import (
    CLIENT_LOG_FILE,
    CLUSTER_FILE,
    TEST_FILE,
    find_history,
    read_jsonl,
)
from faultline.spec import WORKLOAD_CHECKERS, TestSpec
from faultline.targeted import OFFSETS_TOPIC


@dataclass(frozen=True, slots=True)
class Checked:
    """What one checker found: its ``result`` (``valid``, the ``unknown`` entries saying why
    it is not true, the fields it gives results.json), the facts it judged the history by,
    for the checkers after it, and the history's sends as columns when it read them."""

    result: Result
    facts: QueueFacts | None = None
    table: HistoryDigest | None = None


class StoredRun:
    """A run directory being checked: its spec, its history's rows (to be read once, by the
    first checker), and its broker state and client log, read when first asked for: after
    the history, as a followed run writes them before it closes its history. When its
    workload's checkers include ``group``, the group checker's reader
    (:class:`~faultline.checkers.group_history.GroupReader`) reads the rows as the first checker
    does."""

    def __init__(self, run_dir: Path, spec: TestSpec, rows: Iterable[dict[str, Any]],
                 read: ReadResult, source: str) -> None:
        self.group: GroupReader | None = None
        if "group" in spec.workload.checkers:
            self.group = GroupReader(spec.topic.name, spec.topic.partitions)
            rows = self.group.tap(rows)
        self.run_dir, self.spec, self.rows, self.read, self.source = run_dir, spec, rows, read, source
        #: Why ``client-log.jsonl`` could not be read (then it is not used), once read.
        self.client_log_error: str | None = None
        self._files: BrokerFiles | None = None
        self._timeline: tuple[Timeline | None] | None = None

    def files(self) -> BrokerFiles:
        """The run's white-box files, read once."""
        if self._files is None:
            self._files = BrokerFiles.read(self.run_dir)
        return self._files

    def broker_state(self) -> BrokerState:
        """What the queue checker reads of the broker state and client log
        (:func:`~faultline.checkers.queue.check_rows`)."""
        files = self.files()
        client_log: list[dict[str, Any]] = []
        if (self.run_dir / CLIENT_LOG_FILE).is_file():
            try:
                client_log = read_jsonl(self.run_dir / CLIENT_LOG_FILE)
            except HistoryError as e:
                self.client_log_error = str(e)
        return BrokerState(self.timeline(), files.replicas, client_log)

    def timeline(self) -> Timeline | None:
        """The test topic's partition states from the metadata log, to place them among the
        history's ops; None without a readable log, and None when the spec sets brokers'
        clocks apart (``nemesis.skews_clocks``): the log's times are then the active
        controller's wall clock, off by as much as its clock was told, so they witness no
        order against the history (docs/design.md, "Clock faults"). Built once."""
        if self._timeline is None:
            self._timeline = (None if self.spec.nemesis.skews_clocks
                              else partition_timeline(self.files().metadata, self.spec.topic.name),)
        return self._timeline[0]


class Checker(Protocol):
    """A checker of a stored run, given what the checkers before it found (in order).

    Raises HistoryError for a history it cannot read; any other exception is its own
    failure, which :func:`compose` makes an ``unknown`` verdict, never a pass.
    """

    def __call__(self, run: StoredRun, earlier: Sequence[Checked]) -> Checked: ...


def check_queue(run: StoredRun, earlier: Sequence[Checked]) -> Checked:
    """The queue checker (:func:`~faultline.checkers.queue.check_rows`) over the run's
    history, with its broker state and client log. The client log, when it cannot be read,
    is named in ``client_log_error`` and not used."""
    result, table, facts = check_rows_table(run.spec, run.rows, truncated=run.read, source=run.source,
                                            broker=run.broker_state)
    if run.client_log_error is not None:
        result = replace(result, extra={**result.extra, "client_log_error": run.client_log_error})
    return Checked(result, facts, table)


def check_brokers(run: StoredRun, earlier: Sequence[Checked]) -> Checked:
    """The white-box invariants (:mod:`faultline.checkers.whitebox`) over the run's broker
    files, judged by the facts an earlier checker judged the history by; nothing without
    both. They give results.json's ``white_box`` (an unreadable file named in its
    ``errors``); where one is violated (and the guarantees do not permit it) while the
    history was found valid, the two disagree and the verdict is unknown
    (``broker-state-disagrees``)."""
    facts = next((c.facts for c in earlier if c.facts is not None), None)
    white = None if facts is None else check_white_box(run.spec, run.files(), facts)
    if white is None:
        return Checked(Result(valid=True))
    result = Result(valid=True, extra={"white_box": white})
    if merge_valid(*(c.result.valid for c in earlier)) is not True or white["valid"] is not False:
        return Checked(result)
    broken = [i["name"] for i in white["invariants"] if i["violations"]]
    return Checked(_undecided(result, "broker-state-disagrees",
                              f"the history shows nothing forbidden, but the brokers' own state broke "
                              f"{', '.join(broken)} (white_box): the two disagree, so the run is not "
                              "known valid"))


def check_txn(run: StoredRun, earlier: Sequence[Checked]) -> Checked:
    """The transaction checker (:mod:`faultline.checkers.transactions`) over the run's history,
    with the metadata log's timeline, the replicas' logs and the observed last stable
    offsets when the run has them, and the ``__consumer_offsets`` partition of the
    read-process-write group with its nodes by the metadata log
    (:func:`~faultline.checkers.group_end.group_partition`)."""
    history, files, topic = txn_history(run.spec, run.rows, run.source), run.files(), run.spec.topic
    placed = offsets_timeline(files.metadata)
    offsets = group_partition(run.spec.rpw_group_id, placed)
    rpw_offsets = offsets_partition_of(run.spec, offsets, partition_nodes(offsets, placed), placed)
    return Checked(check_transactions(run.spec, history, TransactionConfig.from_spec(run.spec),
                                      truncated=run.read.truncated, timeline=run.timeline(),
                                      offsets=rpw_offsets,
                                      logs=partition_logs(files.replicas or (), topic.name,
                                                          topic.replication_factor),
                                      stable=final_stable_offsets(files.observations or (), topic.name)))


def offsets_partition_of(spec: TestSpec, partition: int | None, nodes: frozenset[str] | None,
                      placed: Timeline | None) -> groups.OffsetsPartition:
    """A group's ``__consumer_offsets`` partition (None: not known) and the ``nodes`` holding
    it, with its states in the :func:`offsets_timeline` ``placed`` (none where the spec
    sets brokers' clocks apart, as :meth:`StoredRun.timeline`) and its commits' guarantees,
    at the replication factor the log gives it where it does (the broker's own record)."""
    logged = None if placed is None or partition is None else placed.get((OFFSETS_TOPIC, partition))
    config = offsets_config(spec)
    if logged and logged[-1].replicas:
        config = replace(config, replication_factor=len(logged[-1].replicas))
    return groups.OffsetsPartition(partition, nodes, None if spec.nemesis.skews_clocks else logged, config)


def check_group(run: StoredRun, earlier: Sequence[Checked]) -> Checked:
    """The consumer-group checker (:mod:`faultline.checkers.groups`) over the run's history,
    as its reader read it beside an earlier checker (:class:`StoredRun`), judged by the
    config that checker judged the history by and by the faults in each instance's window
    (the history's nemesis actions, with the metadata log's timeline when there is one, and
    the nodes holding the group's ``__consumer_offsets`` partition,
    :func:`~faultline.checkers.group_end.offsets_nodes`); ``unknown`` without that config.
    Beside it, ``group.json``'s replicas of that partition must agree below their HW
    (``group.offsets_log``, :func:`~faultline.checkers.whitebox.check_replicas_agree`;
    permitted after a fault witnessed destroying data on one of them); where they do not while the group's
    history shows nothing forbidden, the group is unknown (``broker-state-disagrees``)."""
    facts = next((c.facts for c in earlier if c.facts is not None), None)
    if facts is None:
        return Checked(unknown_result("checker-error", "the group checker needs the queue "
                                                       "checker's facts, and it gave none"))
    if run.group is None:
        return Checked(unknown_result("checker-error", "the group checker reads the history beside "
                                                       "the first checker, for a workload whose "
                                                       "checkers name it, and this one's do not"))
    g, topic = run.group.done(), run.spec.topic.name
    end = group_end(run.run_dir, run.spec.group_id, topic)
    metadata = run.files().metadata
    placed = offsets_timeline(metadata)
    windows = groups.FaultWindows(g.actions, topic, run.timeline(), offsets_partition_of(
        run.spec, end.offsets_partition, offsets_nodes(end, placed), placed))
    table = next((c.table for c in earlier if c.table is not None), None)
    result = groups.judge(g, facts.config, windows, run.spec.consumer.commit != "sync", end=end.offsets,
                          static=run.spec.consumer.static,
                          classic=run.spec.consumer.group_protocol == "classic",
                          sends=None if table is None else table.sends, commits=end.commits)
    if end.offsets_replicas is None or end.offsets_partition is None:
        return Checked(result)
    lost, assumed = windows.destroyed(0, 2**63)
    log = check_replicas_agree(end.offsets_replicas, OFFSETS_TOPIC, {},
                               {end.offsets_partition} if lost is not None and not assumed else set(),
                               None if metadata is None else final_isr(metadata, OFFSETS_TOPIC))
    disagrees = result.valid is True and log.violations > 0
    extra = {**result.extra, "group": {
        **result.extra["group"], "valid": UNKNOWN if disagrees else result.valid,
        "offsets_log": {"partition": end.offsets_partition, **log.to_json()}}}
    result = replace(result, extra=extra)
    if not disagrees:
        return Checked(result)
    return Checked(_undecided(result, "broker-state-disagrees",
                              f"the group's history shows nothing forbidden, but the replicas of "
                              f"{OFFSETS_TOPIC} partition {end.offsets_partition}, which holds its "
                              "commits, disagree below their HW (group.offsets_log) and no fault "
                              "destroyed data: the two disagree, so the group is not known valid"))


#: checker name -> the checker.
CHECKERS: Mapping[str, Checker] = {
    "queue": check_queue,
    "white-box": check_brokers,
    "txn": check_txn,
    "group": check_group,
}


def compose(names: Sequence[str], run: StoredRun, checkers: Mapping[str, Checker] = CHECKERS) -> Checked:
    """Run the ``checkers`` of ``names`` over ``run`` in order, each given what those before
    it found, and merge what they found: the first one's result is the run's, with every
    later one's anomaly counts, examples, ``permitted``, ``violations`` and ``unknown``
    entries added, its fields (``extra``) too (a field two give as objects merged key by
    key), and ``valid`` merged, false over unknown over true
    (:func:`~faultline.checkers.result.merge_valid`); the first facts and sends' columns
    any gave. A checker that fails (anything but HistoryError, or MemoryError, which are
    raised) is an ``unknown`` verdict saying so."""
    done: list[Checked] = []
    for name in names:
        try:
            done.append(checkers[name](run, done))
        except (HistoryError, MemoryError):  # the history's fault, or the machine's: no verdict
            raise
        except Exception as e:  # a checker bug must never pass a run
            done.append(Checked(unknown_result("checker-error", f"the {name} checker failed: "
                                                                f"{type(e).__name__}: {e}")))
    counts: dict[str, int] = {}
    examples: dict[str, list[Mapping[str, Any]]] = {}
    extra: dict[str, Any] = {}
    for c in done:
        for name, n in c.result.anomaly_counts.items():
            counts[name] = counts.get(name, 0) + n
        for name, kept in c.result.anomalies.items():
            examples.setdefault(name, []).extend(kept)
        for k, v in c.result.extra.items():
            extra[k] = {**extra[k], **v} if isinstance(v, dict) and isinstance(extra.get(k), dict) else v
    results = [c.result for c in done]
    result = replace(done[0].result, valid=merge_valid(*(r.valid for r in results)),
                     anomaly_counts=counts, anomalies=examples,
                     permitted=list(dict.fromkeys(a for r in results for a in r.permitted)),
                     violations=list(dict.fromkeys(a for r in results for a in r.violations)),
                     unknown=[u for r in results for u in r.unknown], extra=extra)
    return Checked(result, next((c.facts for c in done if c.facts is not None), None),
                   next((c.table for c in done if c.table is not None), None))


def check_stored(run_dir: Path, rows: Iterable[dict[str, Any]] | None = None, *,
                 truncated: bool = False) -> Result:
    """The one check of a stored run, from its files alone; writes nothing.
    :func:`check_stored_table` says how."""
    return check_stored_table(run_dir, rows, truncated=truncated)[0]


def check_stored_table(run_dir: Path, rows: Iterable[dict[str, Any]] | None = None, *,
                       truncated: bool = False,
                       follow: Callable[[], bool] | None = None) -> tuple[Result, HistoryDigest | None]:
    """The one check of a stored run, from its files alone: its workload's checkers
    (:func:`compose`), and from the same pass over the history its sends as columns (None
    when the checker failed); writes nothing.

    ``rows``, when given, are the run's history rows read elsewhere (the Spark pipeline
    reads them back from its ``ops`` table, :mod:`faultline.analysis.check`) instead of
    its history file, with ``truncated`` saying whether that file's last line was cut;
    every other file still comes from ``run_dir``, and the check is the same.
    ``follow``, without ``rows``, reads the history while its run still writes it, until
    ``follow()`` says it is closed (:func:`faultline.history.history_lines`); the other
    files are read after the history, so they must be written before it is closed, as
    :func:`faultline.run.runner.run_test` does.

    A cut last history line is tolerated (the verdict is then at most unknown). The
    broker's own state, when the run has it, sharpens the verdict: the metadata log's
    partition timeline (which faults hit which leader, which partitions elected a new
    one, when a node whose data was destroyed had caught up again) and the replicas'
    logs (a drain that stopped short of what every replica holds decides nothing past
    its end); see :func:`faultline.checkers.queue.check_rows`, :func:`check_queue` and
    :func:`check_brokers`. Whichever checkers ran, the verdict is unknown where the broker
    state the run should have cannot be read or was not all collected
    (``broker-state-unreadable``), or where anomalies were judged with eligible leader
    replicas on (or off) while ``cluster.json`` says the cluster ran the other way
    (``broker-state-disagrees``): that state can forbid what was permitted without it, or
    set aside what was counted. Raises SpecError / HistoryError for an unreadable
    ``test.json`` or history, and SpecError for a workload that has no checker.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HistoryError(str(run_dir), None, "not a run directory")
    spec = TestSpec.load(run_dir / TEST_FILE)
    history = find_history(run_dir)
    read = ReadResult(truncated=truncated)
    if not spec.workload.checkers:
        raise SpecError(f"no checker for workload {spec.workload.name!r}; "
                        f"checkers: {', '.join(WORKLOAD_CHECKERS)}")
    if rows is None:
        rows = HistoryFile(str(history), read, follow)
    run = StoredRun(run_dir, spec, rows, read, str(history))
    checked = compose(spec.workload.checkers, run)
    files = run.files()
    return _elr_disagreeing(_undecided_without(checked.result, files), spec, files), checked.table


def _undecided_without(result: Result, files: BrokerFiles) -> Result:
    """``result``, unknown if the run has a metadata log or replicas file the check
    needed and could not read, or could not collect one (:func:`check_queue` says why)."""
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
    leader replicas (every checker judges by :meth:`GuaranteeConfig.from_spec`) where
    ``cluster.json`` says the cluster ran the other way: what the guarantees permit
    depends on it (``broker-state-disagrees``)."""
    said = files.eligible_leader_replicas
    judged = GuaranteeConfig.from_spec(spec).eligible_leader_replicas
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
