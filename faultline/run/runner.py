"""One test run, start to finish, in the order of docs/design.md's "The run": ``test.json``
(and ``cluster.json`` saying the broker state is not collected, until it is) before
anything starts; cluster up; the observer; the main phase; heal; quiescence (bounded);
drain; broker state; node configs and logs; teardown (always: also on errors and
Ctrl-C); check (done while the run goes on: :class:`_LiveCheck`) and report.
``results/latest`` points at the newest run directory as soon as it exists. The verdict
decides the exit code: 0 valid, 1 invalid, 2 unknown or error.

Seams for the parts written elsewhere: ``cluster_factory`` (default:
:func:`~faultline.cluster.backends.cluster_for`), the workload
(:func:`~faultline.workloads.workload_for`), ``nemesis_factory`` (default:
:func:`_nemesis_package`), the verdict (:func:`faultline.checkers.results_file.check_run`) and the
report (:func:`_report`).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

import orjson
from rich.console import Console
from rich.live import Live
from rich.text import Text

from faultline.brokerstate.collect import collect_broker_state, mark_uncollected
from faultline.brokerstate.group_state import collect_group_state
from faultline.brokerstate.observe import KafkaSource, Observer, host_data_dirs
from faultline.brokerstate.quiescence import wait_quiescent
from faultline.checkers.result import Valid
from faultline.cluster.backends import cluster_for
from faultline.cluster.children import die_with_parent
from faultline.cluster.protocol import Cluster
from faultline.errors import FaultlineError
from faultline.history import NEMESIS, HistoryWriter, Op, OpType, Process
from faultline.nemeses.clients import CrashableClients, TakesClients
from faultline.nemeses.schedule import ScheduledFault
from faultline.rundir import (
    CLIENT_LOG_FILE,
    HISTORY_FILE,
    NODES_DIR,
    OBSERVATIONS_FILE,
    TEST_FILE,
    new_run_dir,
)
from faultline.spec import TestSpec
from faultline.workloads import MakeWorkload, Workload, workload_for
from faultline.workloads.clients import ClientLog, WorkloadStats
from faultline.workloads.drain import PartitionDrain, drain

#: How long, after the heal, every partition gets to become quiescent.
RECOVERY_TIMEOUT_S = 60.0
#: How long the drain may spend on one partition.
DRAIN_TIMEOUT_S = 60.0
_log = logging.getLogger(__name__)
_T = TypeVar("_T")


class NemesisSchedule(Protocol):
    """What the runner needs of a nemesis (:class:`faultline.nemeses.package.NemesisPackage`).

    ``run`` applies faults until the ``time.monotonic()`` deadline ``until``,
    journaling each as ``nemesis`` ops; ``heal_all`` stops ``run`` and undoes every
    fault, also when called from another thread; ``active`` lists the faults held now;
    ``main_phase_over`` says the schedule ended the main phase (a targeted ``end``).
    """

    def setup(self) -> None: ...

    def run(self, until: float, history: HistoryWriter) -> None: ...

    def heal_all(self, history: HistoryWriter | None = None) -> None: ...

    @property
    def active(self) -> Sequence[ScheduledFault]: ...

    @property
    def main_phase_over(self) -> bool: ...


ClusterFactory = Callable[[TestSpec], Cluster]
NemesisFactory = Callable[[TestSpec, Cluster], NemesisSchedule]
WorkloadFactory = MakeWorkload


@dataclass(slots=True)
class RunOutcome:
    """What a finished run left: where, the verdict, and the numbers worth printing."""

    run_dir: Path
    valid: Valid | None
    stats: WorkloadStats
    recovered: bool = False
    drains: list[PartitionDrain] = field(default_factory=list)
    report: Path | None = None
    error: str | None = None
    #: results.json's ``white_box.summary`` with its verdict, when the run had broker state
    white_box: str | None = None

    def lines(self) -> list[str]:
        """What a person reads of the outcome, one line each: where, the sends, the drain's
        and the run's errors, the verdict, the white-box line and the report."""
        s = self.stats
        out = [f"run:     {self.run_dir}",
               f"sends:   ok {s.ok}  fail {s.fail}  info {s.info}   "
               f"polls {s.polls} ({s.polled_records} records)"]
        if not self.recovered and self.error is None:
            out.append("cluster: some partition did not become quiescent after the heal")
        out += [f"drain:   partition {d.partition} incomplete: {d.error}"
                for d in self.drains if not d.complete]
        if self.error is not None:
            out.append(f"error:   {self.error}")
        verdict = {True: "valid", False: "INVALID", "unknown": "unknown", None: "not checked"}
        out.append(f"verdict: {verdict[self.valid]}")
        if self.white_box is not None:
            out.append(f"broker:  white-box invariants {self.white_box}")
        if self.report is not None:
            out.append(f"report:  {self.report}")
        return out

    @property
    def exit_code(self) -> int:
        """0 valid, 1 invalid, 2 unknown, not checked, or failed."""
        if self.error is not None or self.valid is None or self.valid == "unknown":
            return 2
        return 0 if self.valid is True else 1


def _nemesis_package(spec: TestSpec, cluster: Cluster) -> NemesisSchedule:
    """The spec's targeted schedule when it has one, else its seeded mix of faults."""
    from faultline.nemeses.package import NemesisPackage
    from faultline.nemeses.scripted import ScriptedPackage

    if spec.nemesis.schedule:
        return ScriptedPackage.from_spec(spec, cluster)
    return NemesisPackage.from_spec(spec, cluster)


def run_test(spec: TestSpec, *, results: Path = Path("results"),
             console: Console | None = None,
             cluster_factory: ClusterFactory | None = None,
             nemesis_factory: NemesisFactory = _nemesis_package,
             run_dir: Path | None = None,
             end_main_phase: threading.Event | None = None) -> RunOutcome:
    """Run ``spec`` once, as the module docstring describes, and return the outcome.

    The run directory is a new ``results/<name>/<timestamp>/``, or ``run_dir`` when given
    (created here, with its parents; it must not exist yet; ``results/latest`` is then
    left alone): a sweep puts each cell's run where its manifest says. Setting
    ``end_main_phase`` ends the main phase before ``spec.time_limit_s`` (a hand-driven
    session's ``faultline cluster down``); the run then goes on as at its time limit.

    Contract: ``test.json`` is on disk before the cluster starts, and ``cluster.json``
    saying the broker state is not collected, until it is (after the drain): a run that
    ends before, however (Ctrl-C, a kill, an error), is checked afterwards as at most
    unknown, never as a run that had no broker state to collect. The cluster is torn
    down before this returns, whatever happened; a :class:`FaultlineError` on the way
    (cluster did not start, a fault could not be healed) ends the run early, is kept
    in ``outcome.error`` and gives exit code 2, with whatever was journaled left in
    the run directory. KeyboardInterrupt tears down and propagates: no verdict.
    """
    factory = cluster_factory or cluster_for(spec)  # unknown names: before any file
    make_workload = workload_for(spec)
    console = console or Console(stderr=True)
    if run_dir is None:
        run_dir = new_run_dir(results, spec.name)
    else:
        run_dir.mkdir(parents=True)
    spec = replace(spec, start_wall_ms=time.time_ns() // 1_000_000)
    (run_dir / TEST_FILE).write_bytes(orjson.dumps(spec.to_json(), option=orjson.OPT_INDENT_2))
    mark_uncollected(spec, run_dir, "the run ended before collecting it (interrupted, killed or failed)")
    outcome = RunOutcome(run_dir, None, WorkloadStats())
    progress = _Progress(console, spec)
    with _client_log(run_dir / "faultline.log"), progress:
        history = _TrackingHistory(run_dir / HISTORY_FILE)
        with _LiveCheck(run_dir) as live:
            try:
                _lifecycle(spec, run_dir, history, progress, outcome, factory, make_workload,
                           nemesis_factory, end_main_phase or threading.Event(), live.hurry)
            except FaultlineError as e:
                outcome.error = str(e)
                _log.error("run failed: %s", e)
            finally:
                history.close()
            if outcome.error is None:
                progress.phase("checking")
                outcome.valid, outcome.white_box = live.verdict()
                progress.phase("report")
                outcome.report = live.report()
        progress.phase("done")
    return outcome


def _lifecycle(spec: TestSpec, run_dir: Path, history: _TrackingHistory, progress: _Progress,
               outcome: RunOutcome, cluster_factory: ClusterFactory,
               make_workload: WorkloadFactory, nemesis_factory: NemesisFactory,
               end_main_phase: threading.Event, drained: Callable[[], None]) -> None:
    progress.phase("starting cluster")
    with cluster_factory(spec) as cluster:
        for rid in getattr(cluster, "removed_leftovers", ()):  # a backend that cleaned up says so
            progress.say(f"removed leftovers of crashed run {rid}")
        progress.phase("creating topic")
        cluster.create_topic(spec.topic)
        bootstrap = cluster.bootstrap_servers()
        with _observing(spec, cluster, run_dir / OBSERVATIONS_FILE, history):
            _main_phase_and_drain(spec, cluster, bootstrap, history, progress, outcome,
                                  make_workload, nemesis_factory, end_main_phase, drained)

        progress.phase("collecting broker state")
        collect_broker_state(cluster, spec, run_dir)
        if spec.workload.name == "group":
            collect_group_state(cluster, spec, run_dir)

        progress.phase("collecting node logs")
        try:
            cluster.collect(run_dir / NODES_DIR)
        except (OSError, FaultlineError) as e:
            _log.warning("collecting node logs failed: %s", e)
        progress.phase("teardown")


def _main_phase_and_drain(spec: TestSpec, cluster: Cluster, bootstrap: str,
                          history: _TrackingHistory, progress: _Progress, outcome: RunOutcome,
                          make_workload: WorkloadFactory, nemesis_factory: NemesisFactory,
                          end_main_phase: threading.Event, drained: Callable[[], None]) -> None:
    """Workload and nemesis for ``time_limit_s`` (or until ``end_main_phase`` is set or the
    schedule ends the main phase), heal,
    recover, drain; fills ``outcome``. ``drained`` is called once the drain is done (not
    after an error or Ctrl-C, when no verdict is waited for)."""
    topic = spec.topic.name
    nemesis = nemesis_factory(spec, cluster)
    nemesis.setup()
    client_log = ClientLog(history.path.parent / CLIENT_LOG_FILE, history.now)
    workload = make_workload(spec, bootstrap, history, client_log=client_log)
    if isinstance(workload, CrashableClients) and isinstance(nemesis, TakesClients):
        nemesis.bind_clients(workload)
    progress.attach(workload, nemesis, history)
    healed = False
    try:
        progress.phase("starting the clients")
        workload.start()  # the time limit counts from clients issuing ops
        deadline = time.monotonic() + spec.time_limit_s
        nemesis_thread = threading.Thread(target=nemesis.run, args=(deadline, history),
                                          name="faultline-nemesis", daemon=True)
        progress.main_phase(deadline)
        nemesis_thread.start()
        while (time.monotonic() < deadline and workload.running and not end_main_phase.is_set()
               and not nemesis.main_phase_over):
            end_main_phase.wait(min(0.25, max(0.0, deadline - time.monotonic())))
        workload.request_stop()
        progress.phase("healing")
        nemesis.heal_all(history)
        healed = True
        nemesis_thread.join(timeout=30)
        progress.phase("completing sends")
        workload.stop()
    finally:
        if not healed:  # an error or Ctrl-C: heal, give the clients a moment, go on
            workload.request_stop()
            with contextlib.suppress(FaultlineError):
                nemesis.heal_all(history)
            with contextlib.suppress(Exception):
                workload.stop(timeout=5.0)
        client_log.close()
    outcome.stats = workload.stats()
    progress.detach()

    progress.phase("waiting for quiescence")
    started = time.monotonic()
    quiescence = wait_quiescent(cluster, topic, spec.topic.partitions, RECOVERY_TIMEOUT_S)
    outcome.recovered = quiescence.done
    _log.info("after %.1f s, quiescent at log end %s", time.monotonic() - started,
              ", ".join(f"{topic}/{p}: {end}" for p, end in sorted(quiescence.ends.items())) or "-")
    for p, why in quiescence.reasons.items():
        _log.warning("%s/%d not quiescent after %.0f s: %s", topic, p, RECOVERY_TIMEOUT_S, why)

    progress.phase("draining")
    outcome.drains = drain(spec, bootstrap, history, workload.processes,
                           {**quiescence.reasons, **quiescence.ends}, timeout_s=DRAIN_TIMEOUT_S)
    drained()


@contextlib.contextmanager
def _observing(spec: TestSpec, cluster: Cluster, path: Path, history: HistoryWriter) -> Iterator[None]:
    """Run the white-box observer around the block. It never fails the run: an error
    starting or stopping it is logged, and the block runs all the same."""
    observer: Observer | None = None
    try:
        observer = Observer(path, history.now, spec.topic.name, spec.topic.partitions,
                            KafkaSource(cluster.bootstrap_servers()), host_data_dirs(cluster),
                            lso=spec.workload.name == "txn")
        observer.start()
    except Exception as e:
        _log.error("the observer did not start: %s", e)
    try:
        yield
    finally:
        if observer is not None:
            try:
                observer.stop()
            except Exception as e:
                _log.error("stopping the observer failed: %s", e)


class _LiveCheck:
    """The run's check and report, done while the run goes on.

    A child process (:func:`_check_following`), at the lowest CPU priority while the
    test and its drain go on, so that they keep the machine (:meth:`hurry` then gives it
    the run's), reads the history as the run writes it, so that after the
    run only its tail (the drain) and the decisions remain to do. It
    is :func:`~faultline.checkers.results_file.check_run` itself, the history followed until
    :meth:`verdict` says it is closed: the same check as ``faultline check`` of the run
    directory afterwards, which reads the same bytes and the same broker state (the
    run writes that before it closes the history). Then it builds the report
    (:func:`_report`, :meth:`report`), whose code it imported while the run went on.
    Should the child fail, the run is checked, or reported, the ordinary way, after it.
    Leaving the block stops the child.
    """

    def __init__(self, run_dir: Path) -> None:
        ctx = multiprocessing.get_context("spawn")  # not fork: this process runs threads
        self.run_dir = run_dir
        self._closed = ctx.Event()
        self._answers, child_end = ctx.Pipe(duplex=False)
        self._child = ctx.Process(target=_check_following, name="faultline-check", daemon=True,
                                  args=(run_dir, os.getpid(), self._closed, child_end))
        self._child.start()
        child_end.close()

    def hurry(self) -> None:
        """Give the child the run's own CPU priority; called once the drain is done, not
        before (docs/design.md, "The run", says why). Needs root (CAP_SYS_NICE); without
        it the child stays at nice 19."""
        pid = self._child.pid
        if pid is not None:
            with contextlib.suppress(OSError):  # not permitted, or the child is gone
                os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0))

    def verdict(self) -> tuple[Valid, str | None]:
        """The verdict and white-box line (:func:`_check`), once the history is closed."""
        self._closed.set()
        return self._from_child("checking", lambda: _check(self.run_dir))

    def report(self) -> Path | None:
        """The report's path, or None when it could not be built (:func:`_report`); after
        :meth:`verdict`."""
        return self._from_child("reporting", lambda: _report(self.run_dir))

    def _from_child(self, what: str, otherwise: Callable[[], _T]) -> _T:
        """What the child sends next; should it end without, ``otherwise()``, here."""
        try:
            return self._answers.recv()  # type: ignore[no-any-return]
        except EOFError:
            self._child.join()
            _log.warning("%s while the run went on failed (exit code %s); %s now", what,
                         self._child.exitcode, what)
            return otherwise()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._child.is_alive():
            self._child.terminate()
        self._child.join()
        self._answers.close()


def _check_following(run_dir: Path, parent: int, closed: Any, answers: Any) -> None:
    """The child of :class:`_LiveCheck` (``parent``: the run's pid): check the run as its
    history grows, send the verdict, then build the report and send its path (the
    report's code, which takes most of a second to import, imported first, while the
    run goes on); what it logs goes to the run's ``faultline.log``, as the parent's does.
    Ctrl-C is the parent's to handle: it ends the child. Should the parent die without
    (SIGKILL), the kernel kills the child with it (``PR_SET_PDEATHSIG``: a child at the
    lowest priority on a busy machine would take long to notice), and no verdict is
    written."""
    die_with_parent()
    if os.getppid() != parent:
        return  # the run died before the line above: nothing to check
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(19)
    import faultline.report.page  # noqa: F401 - not after the run, when it is waited for

    with _client_log(run_dir / "faultline.log"):
        answers.send(_check(run_dir, follow=closed.is_set))
        answers.send(_report(run_dir))


def _check(run_dir: Path, follow: Callable[[], bool] | None = None) -> tuple[Valid, str | None]:
    """The checker's verdict and its white-box line (``None`` without broker state); the
    checker writes ``results.json`` (also when it fails). ``follow``: see
    :func:`~faultline.checkers.results_file.check_run`."""
    from faultline.checkers.results_file import check_run
    from faultline.checkers.whitebox import verdict_line

    try:
        result = check_run(run_dir, follow)
    except FaultlineError as e:
        _log.error("checking %s failed: %s", run_dir, e)
        return "unknown", None
    white = result.extra.get("white_box")
    if not isinstance(white, dict):
        return result.valid, None
    return result.valid, verdict_line(white)


def _report(run_dir: Path) -> Path | None:
    """THE single call site of the HTML report (report.html). A report that cannot be
    built, for any reason (a report bug too), is logged and does not change the verdict."""
    try:
        from faultline.report.page import build_report

        return build_report(run_dir)
    except Exception as e:  # the verdict is written already: a report bug must not undo it
        _log.exception("building the report failed: %s", e)
        return None


@contextlib.contextmanager
def _client_log(path: Path) -> Iterator[None]:
    """Send the ``faultline`` loggers (client libraries, cluster, nemesis) to ``path``
    for the run, instead of the terminal the progress line lives on."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("faultline")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        handler.close()


class _TrackingHistory(HistoryWriter):
    """The run's HistoryWriter, remembering the last nemesis op for the progress line."""

    __slots__ = ("last_fault",)

    def __init__(self, path: Path) -> None:
        HistoryWriter.__init__(self, path)
        self.last_fault = "none"

    def append(self, process: Process, type: OpType, f: str, value: Any = None,
               error: str | None = None) -> Op:
        op = HistoryWriter.append(self, process, type, f, value, error)
        if process == NEMESIS:
            nodes = value.get("nodes") if isinstance(value, dict) else None
            self.last_fault = f + (f" {nodes}" if nodes else "") + (" (failed)" if error else "")
        return op


class LiveLine:
    """One rich live line, redrawn from :meth:`_render`, while the ``with`` block runs, when
    ``console`` is a terminal; elsewhere ``_live`` stays None and the subclass prints lines."""

    def __init__(self, console: Console, refresh_per_second: float) -> None:
        self._console = console
        self._refresh = refresh_per_second
        self._live: Live | None = None

    def _render(self) -> Text:
        raise NotImplementedError

    def __enter__(self) -> Self:
        if self._console.is_terminal:
            self._live = Live(get_renderable=self._render, console=self._console,
                              refresh_per_second=self._refresh, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None


class _Progress(LiveLine):
    """The live status line: phase, elapsed, sends ok/fail/info, polls, current fault.

    On a terminal it is one rich live line; elsewhere each phase is printed once.
    """

    def __init__(self, console: Console, spec: TestSpec) -> None:
        super().__init__(console, refresh_per_second=4)
        self._spec = spec
        self._phase = "starting"
        self._t0 = time.monotonic()
        self._deadline: float | None = None
        self._workload: Workload | None = None
        self._nemesis: NemesisSchedule | None = None
        self._history: _TrackingHistory | None = None
        self._stats = WorkloadStats()

    def phase(self, name: str) -> None:
        self._phase = name
        if self._live is None:
            self._console.print(f"[{time.monotonic() - self._t0:6.1f}s] {name}",
                                highlight=False)

    def say(self, line: str) -> None:
        """One line of its own, above the live line on a terminal."""
        self._console.print(line, highlight=False)

    def main_phase(self, deadline: float) -> None:
        self._deadline = deadline
        self.phase(f"main phase ({self._spec.time_limit_s:.0f} s)")

    def attach(self, workload: Workload, nemesis: NemesisSchedule,
               history: _TrackingHistory) -> None:
        self._workload, self._nemesis, self._history = workload, nemesis, history

    def detach(self) -> None:
        if self._workload is not None:
            self._stats = self._workload.stats()
        self._workload = None

    def _render(self) -> Text:
        s = self._workload.stats() if self._workload is not None else self._stats
        fault = "none"
        if self._nemesis is not None and self._history is not None:
            active = self._nemesis.active
            fault = ", ".join(a.kind for a in active) if active else "none"
            fault += f"  (last: {self._history.last_fault})"
        now = time.monotonic()
        t = Text()
        t.append(f"{self._phase:<22}", style="bold")
        t.append(f" {now - self._t0:6.1f}s ")
        if self._deadline is not None and self._workload is not None:
            main_s = self._spec.time_limit_s - max(0.0, self._deadline - now)
            t.append(f"(main {main_s:4.0f}/{self._spec.time_limit_s:.0f}s) ")
        t.append("sends ")
        t.append(f"ok {s.ok}", style="green")
        t.append(" ")
        t.append(f"fail {s.fail}", style="red" if s.fail else "")
        t.append(" ")
        t.append(f"info {s.info}", style="yellow" if s.info else "")
        t.append(f"  polls {s.polls} ({s.polled_records} records)  fault: {fault}")
        return t
