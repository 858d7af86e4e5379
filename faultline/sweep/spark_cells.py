"""Cells across machines: a sweep's cells run as Spark tasks on a standalone cluster's workers.

::

    faultline sweep MATRIX.yaml --master spark://HOST:7077 --out /shared/sweeps/NAME

:class:`SparkCells` is the sweep's :class:`~faultline.sweep.runner.Workers`:

- Before anything is written (:meth:`SparkCells.check`): the master answers, its workers
  have joined, and on every executor the sweep directory is the driver's (it sees a probe
  file the driver made, and can write beside it; both files are gone after), it runs as
  root and it runs the driver's faultline (:func:`build`). The first failure is one line.
- One cell per worker at a time: a standalone worker starts one executor with all its
  cores, and every task of a cell asks for that many cores (a stage-level task resource
  profile: Spark's way, without dynamic allocation, to ask more than ``spark.task.cpus``).
  Workers whose cores differ so much that one could hold two cells are refused.
- Each cell is a job of its own, from a thread of this process, so that its result comes
  back when it ends and the driver, alone, records it in ``sweep.json``. The task runs the
  cell as a local sweep does (:func:`~faultline.sweep.runner.run_once` of
  :func:`~faultline.sweep.runner.run_isolated`), in a process that dies with the task
  (``PR_SET_PDEATHSIG``: SIGTERM, which tears its cluster down).
- A worker that dies mid-cell: Spark runs the task again (``spark.task.maxFailures``); the
  new attempt moves what an earlier one left in the run directory to
  ``SWEEP_DIR/set-aside/<cell id>/<UTC time, YYYYMMDDTHHMMSS.ffffffZ>/``, and only an
  attempt that ends returns a result: the cell is recorded once.
- Ctrl-C: every job is cancelled (each cell's process tears its cluster down) and the
  cells not ended stay ``pending``.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from importlib import metadata
from multiprocessing import Queue, parent_process
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from faultline.cluster.children import die_with_parent
from faultline.cluster.setup import Check
from faultline.cluster.waiting import wait_until
from faultline.errors import SetupError, SpecError
from faultline.spec import TestSpec
from faultline.sweep.manifest import MANIFEST_FILE, CellState, RanOn, utc_now
from faultline.sweep.matrix import Cell
from faultline.sweep.runner import Ending, one_line, record, run_in_child, run_isolated, run_once

if TYPE_CHECKING:
    from pyspark.resource import ResourceProfile
    from pyspark.sql import SparkSession

#: Settings of the session that runs cells: a cell runs once at a time (no speculative copy).
CONF: dict[str, str] = {"spark.speculation": "false"}
#: Where a task moves what an earlier attempt of its cell left.
SET_ASIDE_DIR = "set-aside"
#: Seconds the master's address gets to accept a connection.
CONNECT_TIMEOUT_S = 5.0
#: Seconds the first executor gets to register.
EXECUTORS_WAIT_S = 120.0
#: Seconds without a new executor after which every worker is taken to have joined.
SETTLE_S = 5.0
#: faultline's package directory.
PACKAGE = Path(__file__).resolve().parent.parent
#: What a standalone worker's JVM runs.
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_PROBE = ".faultline-probe-"
_MASTER = re.compile(r"spark://([^/,\s]+(?:,[^/,\s]+)*)/?")
#: A traceback's last line: the error raised.
_RAISED = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")


class StartSession(Protocol):
    """How a session starts: :func:`faultline.analysis.spark.session`'s signature, in part."""

    def __call__(self, master: str | None = ..., remote: str | None = ..., *, app: str = ...,
                 conf: dict[str, str] | None = ...) -> SparkSession: ...


def is_cluster(master: str | None) -> TypeGuard[str]:
    """Whether ``master`` is a standalone cluster's URL, the one kind that runs cells."""
    return master is not None and master.startswith("spark://")


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) of each master ``spark://HOST:PORT[,HOST:PORT...]`` names; SpecError
    for another URL."""
    m = _MASTER.fullmatch(master)
    parts = m.group(1).split(",") if m else []
    addresses = [(host.strip("[]"), int(port)) for host, _, port in (part.rpartition(":") for part in parts)
                 if host and port.isdigit() and 0 < int(port) < 65536]
    if not parts or len(addresses) != len(parts):
        raise SpecError(f"--master {master!r}: cells run on a Spark standalone cluster, spark://HOST:PORT")
    return addresses


def reach(master: str) -> None:
    """SetupError unless one of ``master``'s addresses accepts a connection."""
    why = ""
    for host, port in master_addresses(master):
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
            return
        except OSError as e:
            why = f"{host}:{port}: {e.strerror or e}"
    raise SetupError(f"the Spark master {master} does not answer ({why}); start it, or fix --master")


def build(root: Path = PACKAGE) -> str:
    """This faultline (its package directory ``root``): its version and a digest of its
    package's files, which every machine of a sweep must share."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return f"{metadata.version('kafka-faultline')}+{digest.hexdigest()[:12]}"


def worker_check(proc: Path = Path("/proc")) -> Check:
    """``faultline doctor``'s line about this machine as a Spark worker: every standalone
    worker running here (found in ``proc``) must run as root, as the cells it runs need; and
    which faultline and interpreter a driver must share with it (executors run the driver's
    interpreter path)."""
    shared = f"a driver needs faultline {build()} at {sys.executable}"
    workers = {}
    for d in proc.iterdir():
        try:
            if d.name.isdigit() and WORKER_CLASS in (d / "cmdline").read_bytes().decode(errors="replace"):
                workers[int(d.name)] = d.stat().st_uid
        except OSError:  # gone meanwhile
            continue
    if not workers:
        return Check("spark worker", True, f"none runs here; where one does, {shared}")
    others = {pid: uid for pid, uid in workers.items() if uid != 0}
    if others:
        pid, uid = min(others.items())
        return Check("spark worker", False, f"pid {pid} runs as uid {uid}; cells need root",
                     "start the Spark worker as root")
    return Check("spark worker", True, f"pid {', '.join(map(str, sorted(workers)))} as root; {shared}")


@dataclass(frozen=True, slots=True)
class Executor:
    """A registered executor: its host and its cores."""

    host: str
    cores: int


@dataclass(frozen=True, slots=True)
class Facts:
    """What the probe found on an executor: where it is, its uid, its :func:`build`, whether
    it sees the driver's probe file and why it could not write beside it (None: it could)."""

    host: str
    executor: str
    uid: int
    build: str
    sees: bool
    write_error: str | None


@dataclass(frozen=True, slots=True)
class _TaskEnding:
    """What a cell's task returns: how the run ended, when (the worker's clock), where, and
    how long it took (s)."""

    ending: Ending
    started: str
    ended: str
    ran_on: RanOn
    seconds: float


class SparkCells:
    """A standalone cluster running a sweep's cells (module docstring); ``spark`` is a
    session on its master."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._executors: list[Executor] = []
        self._profile: ResourceProfile | None = None

    @classmethod
    def connect(cls, master: str, start: StartSession) -> SparkCells:
        """A session on ``master`` (a ``spark://`` URL), started by ``start`` once the master
        answers (SetupError, one line, when it does not)."""
        reach(master)
        return cls(start(master, app="faultline-sweep", conf=CONF))

    @property
    def slots(self) -> int:
        """Cells at once: one per executor :meth:`check` found."""
        return max(1, len(self._executors))

    def check(self, sweep_dir: Path) -> None:
        """SetupError, one line, unless every executor can run cells into ``sweep_dir``
        (module docstring); writes nothing there."""
        executors = self._await_executors()
        self._executors, self._profile = executors, _cores_profile(cores_per_cell(executors))
        target = sweep_dir.resolve()
        while not target.exists():
            target = target.parent
        token = secrets.token_hex(16)
        try:
            fd, marker = tempfile.mkstemp(prefix=_PROBE, dir=target)
        except OSError as e:
            raise SetupError(f"cannot write {target}: {e.strerror or e}") from None
        try:
            os.write(fd, token.encode())
            os.close(fd)
            facts = self._probe(target, Path(marker).name, token)
        finally:
            os.unlink(marker)
        mine = build()
        for f in facts:
            problem = refusal(f, target, mine)
            if problem is not None:
                raise SetupError(problem)

    def run(self, cells: Sequence[tuple[Cell, CellState]], sweep_dir: Path,
            ended: Callable[[CellState, float], None]) -> None:
        """Run each cell as a job of its own (:class:`~faultline.sweep.runner.Workers`)."""
        sweep_dir = sweep_dir.resolve()
        if not cells:
            return
        sc = self._spark.sparkContext
        with ThreadPoolExecutor(max_workers=len(cells), thread_name_prefix="faultline-cell") as pool:
            running: dict[Future[_TaskEnding], CellState] = {
                pool.submit(self._job, cell, state, sweep_dir): state for cell, state in cells}
            try:
                while running:
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        state = running.pop(future)
                        seconds = _apply(state, future)
                        ended(state, seconds)
            except KeyboardInterrupt:
                sc.cancelAllJobs()
                raise

    def _job(self, cell: Cell, state: CellState, sweep_dir: Path) -> _TaskEnding:
        """One cell's Spark job, in a thread of its own: the task's ending."""
        sc = self._spark.sparkContext
        sc.setJobGroup(f"faultline-cell-{state.id}", f"cell {state.id}", interruptOnCancel=True)
        task: dict[str, Any] = {"id": state.id, "spec": cell.spec.to_json(),
                                "sweep_dir": str(sweep_dir), "run_dir": state.run_dir}
        endings: list[_TaskEnding] = (sc.parallelize([task], 1).withResources(self._cores())
                                      .mapPartitions(_cell_task).collect())
        return endings[0]

    def _cores(self) -> ResourceProfile:
        assert self._profile is not None, "check() first"
        return self._profile

    def _probe(self, target: Path, marker: str, token: str) -> list[Facts]:
        n = len(self._executors)
        rdd = self._spark.sparkContext.parallelize([(str(target), marker, token)] * n, n)
        try:
            facts: list[Facts] = (rdd.withResources(self._cores()).barrier().mapPartitions(_probe_task)
                                   .collect())
        except Exception as e:  # the workers could not run it: Spark's error, cut to its cause
            raise SetupError(f"the Spark workers could not run faultline: {failure(e)}") from None
        return facts

    def _executors_now(self) -> list[Executor]:
        """The executors registered now, from Spark's status store (what its REST API shows)."""
        jsc: Any = self._spark.sparkContext._jsc
        listed = jsc.sc().statusStore().executorList(True)
        out = []
        for i in range(listed.size()):
            e = listed.apply(i)
            if e.id() != "driver":
                out.append(Executor(str(e.hostPort()).rpartition(":")[0], int(e.totalCores())))
        return out

    def _await_executors(self) -> list[Executor]:
        """The executors once the first has registered and no new one for :data:`SETTLE_S`;
        SetupError when none did within :data:`EXECUTORS_WAIT_S`."""
        seen: list[Executor] = []
        since = time.monotonic()

        def settled() -> bool:
            nonlocal seen, since
            now = self._executors_now()
            if len(now) != len(seen):
                seen, since = now, time.monotonic()
            return bool(seen) and time.monotonic() - since >= SETTLE_S

        if not wait_until(settled, time.monotonic() + EXECUTORS_WAIT_S) and not seen:
            raise SetupError(f"no Spark worker took the sweep within {EXECUTORS_WAIT_S:.0f} s: start "
                             f"workers (README, \"Cells across machines\"), or free the master's cores")
        return seen


def cores_per_cell(executors: Sequence[Executor]) -> int:
    """The cores a cell's task asks for: the smallest executor's. SetupError when an executor
    has twice that or more (it would run two cells at once)."""
    small, big = min(executors, key=lambda e: e.cores), max(executors, key=lambda e: e.cores)
    if big.cores >= 2 * small.cores:
        raise SetupError(f"the Spark workers differ in size ({big.host} {big.cores} cores, {small.host} "
                         f"{small.cores}): one cell per worker needs workers of one size "
                         f"(start each with --cores N, the same N)")
    return small.cores


def refusal(facts: Facts, target: Path, mine: str) -> str | None:
    """Why the executor that found ``facts`` cannot run cells into ``target`` with this
    faultline (``mine``, :func:`build`), in one line; None when it can."""
    where = f"worker {facts.host} (executor {facts.executor})"
    if not facts.sees:
        return (f"{where} does not see {target} as this machine does: the sweep directory must be "
                f"on a filesystem every worker mounts at the same path")
    if facts.write_error is not None:
        return f"{where} cannot write {target}: {facts.write_error}"
    if facts.uid != 0:
        return f"{where} runs as uid {facts.uid}: cells need root; start its Spark worker as root"
    if facts.build != mine:
        return (f"{where} runs faultline {facts.build}, this machine {mine}: install the same "
                f"faultline on every machine (faultline doctor prints it)")
    return None


def _cores_profile(cores: int) -> ResourceProfile:
    from pyspark.resource import ResourceProfileBuilder, TaskResourceRequests

    return ResourceProfileBuilder().require(TaskResourceRequests().cpus(cores)).build


def _apply(state: CellState, future: Future[_TaskEnding]) -> float:
    """Record a job's end in ``state``; the seconds its run took (0 when Spark gave up)."""
    try:
        done = future.result()
    except Exception as e:  # the job failed: every attempt of its task did
        record(state, Ending("failed", error=f"Spark gave up on the cell's task: {failure(e)}"))
        return 0.0
    record(state, done.ending, done.ended)
    state.started, state.ran_on = done.started, done.ran_on
    return done.seconds


def failure(e: BaseException) -> str:
    """Spark's error ``e`` in one line: the error the Python traceback it carries ends with (a
    task's own), else the first Java exception's message (a lost executor), else its first line."""
    text = str(e)
    _, traceback, tail = text.rpartition("Traceback (most recent call last):")
    if traceback:
        raised = [line for line in tail.splitlines() if _RAISED.match(line)]
        if raised:
            return one_line(raised[-1])
    java = re.search(r"^\W*[\w.$]+Exception: (.+)$", text, re.MULTILINE)
    if java:
        return one_line(java.group(1))
    return one_line(text.strip().splitlines()[0] if text.strip() else type(e).__name__)


# On the executors.

def _executor_id() -> str:
    """This executor's id: a standalone worker runs it in ``<work dir>/<app id>/<executor id>``."""
    return Path.cwd().name


def _probe_task(rows: Iterable[tuple[str, str, str]]) -> Iterator[Facts]:
    for target, marker, token in rows:
        path = Path(target)
        try:
            sees = (path / marker).read_bytes() == token.encode()
        except OSError:
            sees = False
        write_error = None
        try:
            fd, mine = tempfile.mkstemp(prefix=_PROBE, dir=path)
            os.close(fd)
            os.unlink(mine)
        except OSError as e:
            write_error = e.strerror or str(e)
        yield Facts(socket.gethostname(), _executor_id(), os.geteuid(), build(), sees, write_error)


def _cell_task(rows: Iterable[dict[str, Any]]) -> Iterator[_TaskEnding]:
    """A cell's task: what an earlier attempt left set aside, the cell run as a local sweep
    runs it, and how it ended (module docstring). SetupError when this worker does not see
    the sweep (Spark tries the task again, up to its limit)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    for task in rows:
        sweep_dir = Path(task["sweep_dir"])
        if not (sweep_dir / MANIFEST_FILE).is_file():
            raise SetupError(f"{socket.gethostname()} does not see {sweep_dir / MANIFEST_FILE}")
        run_dir = sweep_dir / task["run_dir"]
        if run_dir.exists():  # an earlier attempt's, lost with its worker
            aside = sweep_dir / SET_ASIDE_DIR / task["id"] / datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
            aside.parent.mkdir(parents=True, exist_ok=True)
            run_dir.rename(aside)
        spec = TestSpec.from_mapping(task["spec"], source=f"cell {task['id']}")
        started, t0 = utc_now(), time.monotonic()
        ending = run_once(spec, run_dir, partial(run_isolated, target=_run_in_task_child))
        yield _TaskEnding(ending, started, utc_now(), RanOn(socket.gethostname(), _executor_id(), attempt),
                          time.monotonic() - t0)


def _run_in_task_child(spec: TestSpec, run_dir: Path, errors: Queue[str | None]) -> None:
    """The cell's process on a worker: :func:`~faultline.sweep.runner.run_in_child`, ended by
    SIGTERM (which tears its cluster down) when the task's process ends. Out of pyspark's
    process group, whose SIGHUP at an executor's end would kill it without a teardown."""
    os.setpgid(0, 0)
    die_with_parent(signal.SIGTERM)
    parent = parent_process()
    if parent is None or os.getppid() != parent.pid:  # it died before prctl: nobody waits for us
        return
    os.environ.pop("_SPARK_AUTH_SECRET", None)  # the executor's; a cell's processes need none
    run_in_child(spec, run_dir, errors)

