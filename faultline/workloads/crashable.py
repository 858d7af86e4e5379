"""Producers that can crash: in a test whose nemesis crashes clients (the ``clients``
family), each producer of :mod:`.queue` runs in a child process of its own, so that a
crash is what it is for a real client, a SIGKILL mid-send. Without client crashes the
producers stay threads of the run's process (:class:`.queue.QueueWorkload`).
:class:`CrashableChild` is what every such client shares (its child, the pipe, crash,
restart, pause and resume); :mod:`.group_crashable` runs the group's consumers on it.

The child runs a :class:`.queue.QueueProducer` (or another producer client, e.g. the
transactional :class:`.txn.TxnProducer`: :class:`MakeProducer`) whose journal (:class:`PipeJournal`)
sends each batch of ops, stamped with ``time.monotonic_ns()``, down a socket, and
waits, for a batch with invokes, until the parent has journaled it at those times
(:meth:`HistoryWriter.append_at`) before it produces any of them: the contract of
:mod:`.queue` holds, an invoke is journaled before its message can reach a broker (and
so before a consumer of the run reads it). Process numbers and values come from
counters the child shares with the parent (:class:`.clients.ProcessIds`,
:class:`.clients.Values`), so they stay unique in the run.

A crash (:meth:`CrashableChild.crash`) kills the child, journals what the pipe still
held, then ends every send (or transaction) of the child still open as ``info`` with the
error :data:`.outcomes.CRASH_ERROR` (:func:`.outcomes.crashed_sends`,
:func:`.outcomes.crashed_transaction`). The producer stays down until
:meth:`CrashableChild.restart`, which starts a new child under a new process number:
a new client, whose producer id (with idempotence) is a new one too. A pause
(:meth:`CrashableChild.pause`) stops the child (SIGSTOP) until :meth:`CrashableChild.resume`.
A stop (:meth:`CrashableChild.stop`) has the child's client leave at once, without
settling (a group member closes: LeaveGroup), and it stays down until a restart too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Protocol

import orjson

from faultline.cluster.children import die_with_parent
from faultline.errors import FaultlineError
from faultline.history import HistoryWriter, OpType, PendingOp, Process, TimedOp
from faultline.spec import TestSpec
from faultline.workloads.clients import (
    _SPAWN,
    FIRST_OP_TIMEOUT_S,
    ClientLog,
    Journal,
    ProcessIds,
    SendCounts,
    Values,
)
from faultline.workloads.outcomes import crashed_sends, crashed_transaction
from faultline.workloads.queue import ProducerClient, QueueProducer, QueueWorkload

#: How long a crash or a restart waits for the child to be gone, or to start.
CHILD_TIMEOUT_S = 30.0

class CrashableQueueWorkload(QueueWorkload):
    """The queue workload with :class:`CrashableProducer` producers, which
    :meth:`crash_client` and :meth:`restart_client` address by index; the same contract."""

    def __init__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter, *,
                 client_log: ClientLog | None = None) -> None:
        self.history = history
        super().__init__(spec, bootstrap, history, client_log=client_log)

    def _producer(self, spec: TestSpec, bootstrap: str, index: int, rate: float,
                  client_log: ClientLog | None) -> ProducerClient:
        return CrashableProducer(spec, bootstrap, self.history, index, self.processes, self.values,
                                 rate=rate, index=index, client_log=client_log)

    @property
    def clients(self) -> int:
        """How many producers there are to crash, numbered from 0."""
        return len(self.producers)

    def crash_client(self, index: int) -> dict[str, Any]:
        """:meth:`CrashableProducer.crash` of producer ``index``."""
        return self.child("clients", index).crash()

    def restart_client(self, index: int) -> dict[str, Any]:
        """:meth:`CrashableProducer.restart` of producer ``index``."""
        return self.child("clients", index).restart()

    def start(self) -> None:
        """Start every client; returns once each child has journaled an op (the run's time
        limit counts from then: a child takes a second or more to start). Raises what
        ended a child first, or FaultlineError when one journals none within
        :data:`FIRST_OP_TIMEOUT_S`."""
        super().start()
        deadline = time.monotonic() + FIRST_OP_TIMEOUT_S
        for client in [*self.producers, *self.consumers]:
            if not isinstance(client, CrashableChild):
                continue
            if not client.first_op.wait(max(0.0, deadline - time.monotonic())):
                raise FaultlineError(f"{client.name} journaled no op within {FIRST_OP_TIMEOUT_S:.0f} s")
            if client.failure is not None:
                raise client.failure

    def child(self, role: str, index: int) -> CrashableChild:
        """Client ``index`` of ``role``: ``clients`` a producer, ``consumers`` a consumer
        (:data:`faultline.nemeses.clients.ROLES`); FaultlineError naming those there are
        when it is none, or runs in no child process."""
        clients: list[Any] = self.producers if role == "clients" else self.consumers
        kind = "producer" if role == "clients" else "consumer"
        if not 0 <= index < len(clients) or not isinstance(clients[index], CrashableChild):
            raise FaultlineError(f"no {kind} {index} runs in a child process: "
                                 f"{len(clients)} {kind}s, crashable: {self.children(role)}")
        child: CrashableChild = clients[index]
        return child

    def children(self, role: str) -> int:
        """How many clients of ``role`` run in child processes (:meth:`child`): every
        producer; every consumer of the group workload, none of the queue's."""
        clients: list[Any] = self.producers if role == "clients" else self.consumers
        return sum(isinstance(c, CrashableChild) for c in clients)


class MakeProducer(Protocol):
    """How a child makes its producer client: :class:`.queue.QueueProducer`'s signature."""

    def __call__(self, spec: TestSpec, bootstrap: str, journal: Journal, first_process: int,
                 processes: ProcessIds, values: Values, *, rate: float, index: int,
                 client_log: ClientLog | None) -> ProducerClient: ...


class PipeJournal(Journal):
    """A child's journal: each call is one message down ``conn``, ``[ns, [op, ...]]``,
    sent (in the kernel's socket) before it returns, so a kill after it loses nothing. A
    message with an invoke returns only once the run has journaled it (its answer on
    ``conn``): an invoke is in the history before its message can reach a broker, and so
    before any consumer of the run can read it. :meth:`now` is the history's clock, whose
    zero is ``t0`` on ``time.monotonic_ns()``'s."""

    __slots__ = ("_conn", "_t0")

    def __init__(self, conn: Connection, t0: int) -> None:
        super().__init__(None)
        self._conn = conn
        self._t0 = t0

    def now(self) -> int:
        return time.monotonic_ns() - self._t0

    def append(self, process: Process, type: OpType, f: str, value: Any = None,
               error: str | None = None) -> None:
        self.append_many([(process, type, f, value, error)])

    def append_many(self, ops: list[PendingOp]) -> None:
        if ops:
            self._conn.send_bytes(orjson.dumps([time.monotonic_ns(), ops]))
            if _invokes(ops):
                self._conn.recv_bytes()


def _invokes(ops: list[Any]) -> bool:
    return any(op[1] == "invoke" for op in ops)


class CrashableChild:
    """One client of the run in a child process of its own, journaling through a
    :class:`PipeJournal`: :meth:`run` on the workload's thread, :meth:`crash` (SIGKILL),
    :meth:`restart` (a new child under a new process number), :meth:`pause` (SIGSTOP),
    :meth:`resume` (SIGCONT) and :meth:`stop` (its client leaves). A subclass says what
    its child runs (:meth:`_target`), the shared counters' locks its child takes
    (:meth:`_locks`), and which of its ops a kill leaves open (:meth:`_count`,
    :meth:`_end_open`). See the module docstring."""

    def __init__(self, history: HistoryWriter, first_process: int, processes: ProcessIds,
                 name: str) -> None:
        self.history, self.processes, self.name = history, processes, name
        self.retired = 0
        self._first = first_process
        self._lock = threading.Lock()
        self._child: Any = None  # the live child process (multiprocessing's SpawnProcess)
        self._stop_child: Connection | None = None  # closed: the live child stops
        self._killed = False
        self._left = False  # asked to leave (stop): down once it has exited
        self._paused = False
        self._gone = threading.Event()  # the killed child's ops are journaled
        self._started = threading.Event()  # a (re)started child is running
        #: set once the first child journaled an op, or :meth:`run` ended (``failure``: why,
        #: when it raised)
        self.first_op = threading.Event()
        self.failure: BaseException | None = None
        self._restart = threading.Event()
        self._stopping = threading.Event()
        self._processes: list[Process] = [first_process]  # of the live child, in order

    def _target(self, conn: Connection, stop: Connection, first_process: int) -> tuple[Any, tuple[Any, ...]]:
        """The child's function and its arguments: it journals down ``conn`` as
        ``first_process`` until ``stop``'s other end closes."""
        raise NotImplementedError

    def _locks(self) -> tuple[Any, ...]:
        """The locks of the counters the child shares with the run (:attr:`ProcessIds.lock`)."""
        return (self.processes.lock,)

    def _count(self, ns: int, op: list[Any]) -> TimedOp:
        """Note one op of the child (for :meth:`_end_open`) and return it timed."""
        raise NotImplementedError

    def _end_open(self) -> None:
        """Journal every op the killed child left open, ``info`` with :data:`.outcomes.CRASH_ERROR`."""
        raise NotImplementedError

    def held(self) -> int | None:
        """How many partitions the live child's group member holds; None when no child
        runs. FaultlineError for a client that is no group member."""
        raise FaultlineError(f"{self.name} is no group member: it holds no partitions")

    def committed(self) -> int:
        """How many transactions the client, and each child that replaced it, committed
        (``txn`` ops journaled ``ok``); FaultlineError for a client that commits none."""
        raise FaultlineError(f"{self.name} is no transactional producer: it commits nothing")

    def run(self, stop: threading.Event) -> None:
        """Run a child until ``stop`` is set (then it completes its ops); a crashed one
        is replaced only by :meth:`restart`. FaultlineError if a child dies uncrashed."""

        def relay() -> None:
            stop.wait()
            with self._lock:
                self._stopping.set()
                if self._stop_child is not None:
                    self._stop_child.close()
            self._restart.set()

        threading.Thread(target=relay, name=f"faultline-{self.name}-stop".replace(" ", "-"),
                         daemon=True).start()
        try:
            self._run_children()
        except BaseException as e:
            self.failure = e
            raise
        finally:
            self.first_op.set()

    def _run_children(self) -> None:
        first = self._first
        while True:
            ours, theirs = _SPAWN.Pipe()  # ops this way, the answers to invokes back
            stop_theirs, stop_ours = _SPAWN.Pipe(duplex=False)  # closing ours stops the child
            target, args = self._target(theirs, stop_theirs, first)
            child = _SPAWN.Process(target=target, name=f"faultline-{self.name}".replace(" ", "-"),
                                   daemon=True, args=args)
            with self._lock:
                if self._stopping.is_set():
                    return
                child.start()
                self._child, self._stop_child = child, stop_ours
                self._killed, self._left, self._processes = False, False, [first]
            theirs.close()
            stop_theirs.close()
            self._started.set()
            self._read(ours)
            child.join()
            with self._lock:
                killed, left = self._killed, self._left
                self._child, self._stop_child = None, None
            stop_ours.close()
            if not killed and child.exitcode != 0:
                raise FaultlineError(f"{self.name} (process {first}) ended with exit "
                                     f"code {child.exitcode}")
            if not (killed or left):
                return
            if killed:
                self._end_open()
            self._gone.set()
            self._restart.wait()
            self._restart.clear()
            first = self.processes.take()

    def crash(self) -> dict[str, Any]:
        """Kill the child (SIGKILL, paused or not) and wait until its ops are journaled,
        the open ones ``info``; the history fields of the crash (``processes``: those the
        child used, ``pid``). FaultlineError when it is not running."""
        with self._lock:
            pid = self._running_pid()
            child = self._child
            self._killed, self._paused = True, False
            self._started.clear()
            self._gone.clear()
            processes = list(self._processes)
            # the counters' locks held: the child dies holding none (its one shared state)
            with contextlib.ExitStack() as held:
                for lock in self._locks():
                    held.enter_context(lock)
                os.kill(pid, signal.SIGKILL)
                if not wait([child.sentinel], CHILD_TIMEOUT_S):
                    raise FaultlineError(f"{self.name} (pid {pid}) did not die of SIGKILL")
        if not self._gone.wait(CHILD_TIMEOUT_S):
            raise FaultlineError(f"{self.name}'s ops were not journaled within "
                                 f"{CHILD_TIMEOUT_S:.0f} s of killing pid {pid}")
        return {"processes": processes, "pid": pid}

    def restart(self) -> dict[str, Any]:
        """Start a new child under a new process number after :meth:`crash` or :meth:`stop`;
        the history fields (``processes``: the new one). Nothing is started once the
        workload stops."""
        with self._lock:
            if not (self._killed or self._left):
                return {"processes": [], "result": f"{self.name} was neither crashed nor stopped"}
        if self._stopping.is_set():
            return {"processes": [], "result": "the workload is stopping: not restarted"}
        self._restart.set()
        if not self._started.wait(CHILD_TIMEOUT_S):
            raise FaultlineError(f"{self.name} did not restart within {CHILD_TIMEOUT_S:.0f} s")
        with self._lock:
            return {"processes": list(self._processes[:1])}

    def pause(self) -> dict[str, Any]:
        """Stop the child (SIGSTOP) until :meth:`resume`, once the kernel shows it stopped;
        the history fields (``processes``: those it used so far, ``pid``). FaultlineError
        when it is not running or already paused."""
        with self._lock:
            pid = self._running_pid()
            if self._paused:
                raise FaultlineError(f"{self.name} is paused already")
            # the counters' locks held until it is stopped: it stops holding none
            with contextlib.ExitStack() as held:
                for lock in self._locks():
                    held.enter_context(lock)
                os.kill(pid, signal.SIGSTOP)
                self._paused = True
                wait_stopped(pid, self.name)
            return {"processes": list(self._processes), "pid": pid}

    def stop(self) -> dict[str, Any]:
        """Have the child's client leave at once (no settling) and wait until the child has
        exited, its ops journaled; the history fields (``processes``: those it used,
        ``pid``). FaultlineError when it is not running, or is paused."""
        with self._lock:
            pid = self._running_pid()
            if self._paused:
                raise FaultlineError(f"{self.name} is paused: it cannot leave")
            assert self._stop_child is not None
            self._left = True
            self._started.clear()
            self._gone.clear()
            self._stop_child.send_bytes(b"leave")
        if not self._gone.wait(CHILD_TIMEOUT_S):
            raise FaultlineError(f"{self.name} (pid {pid}) did not leave within {CHILD_TIMEOUT_S:.0f} s")
        with self._lock:
            return {"processes": list(self._processes), "pid": pid}

    def resume(self) -> dict[str, Any]:
        """Continue the child :meth:`pause` stopped (SIGCONT); the history fields (``pid``,
        or a ``result`` saying it was not paused: crashed since, or never)."""
        with self._lock:
            if not self._paused or self._child is None:
                return {"result": f"{self.name} was not paused"}
            self._paused = False
            os.kill(self._child.pid, signal.SIGCONT)
            return {"pid": self._child.pid}

    def _running_pid(self) -> int:
        """The live child's pid (``_lock`` held); FaultlineError when none runs."""
        child = self._child
        if child is None or self._killed or self._left or child.pid is None:
            raise FaultlineError(f"{self.name} is not running")
        pid: int = child.pid
        return pid

    def _read(self, conn: Connection) -> None:
        """Journal the child's messages until its end of the pipe closes (it exited or
        was killed: what it sent before is still read). A message cut short by the kill
        is dropped: its invokes were never acted on (the journal goes first), and the
        ops its completions ended stay open, to end ``info``."""
        with contextlib.closing(conn):
            while True:
                try:
                    raw = conn.recv_bytes()
                except EOFError:
                    return
                except OSError:  # "got end of file during message"
                    with self._lock:
                        if self._killed:
                            return
                    raise
                ns, ops = orjson.loads(raw)
                self.history.append_at([self._timed(ns, op) for op in ops])
                if not self.first_op.is_set():  # set() takes a lock: once, not per batch
                    self.first_op.set()
                if _invokes(ops):
                    try:
                        conn.send_bytes(b"")
                    except OSError:  # the child was killed waiting: its ops end info
                        with self._lock:
                            if not self._killed:
                                raise

    def _timed(self, ns: int, op: list[Any]) -> TimedOp:
        if op[0] not in self._processes:
            self._processes.append(op[0])
            self.retired += 1
        return self._count(ns, op)


def wait_stopped(pid: int, name: str) -> None:
    """Return once ``pid`` is stopped (``T`` in /proc/PID/stat); FaultlineError after
    :data:`CHILD_TIMEOUT_S`."""
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    stat = Path(f"/proc/{pid}/stat")
    while stat.read_text().rpartition(")")[2].split()[0] != "T":
        if time.monotonic() > deadline:
            raise FaultlineError(f"{name} (pid {pid}) did not stop on SIGSTOP")
        time.sleep(0.001)


class CrashableProducer(CrashableChild):
    """One producer client of :mod:`.queue` in a child process; what
    :class:`.queue.QueueWorkload` drives of a producer (``run`` on its thread, the
    counts), plus what :class:`CrashableChild` does to a child. See the module docstring."""

    def __init__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter, first_process: int,
                 processes: ProcessIds, values: Values, *, rate: float, index: int,
                 client_log: ClientLog | None, make: MakeProducer = QueueProducer) -> None:
        super().__init__(history, first_process, processes, f"producer {index}")
        self.spec, self.bootstrap, self.make = spec, bootstrap, make
        self.values, self.rate, self.index = values, rate, index
        self.client_log_path = client_log.path if client_log is not None else None
        self.invoked = 0
        self.counts = SendCounts()
        self.commits = 0  # transactions journaled ok
        #: (process, the send's value; None: a transaction) -> (its op's f, value, invoke's
        #: history time), for every op invoked and not complete
        self._open: dict[tuple[Process, Any], tuple[str, Any, int]] = {}

    def crash(self) -> dict[str, Any]:
        """:meth:`CrashableChild.crash`, and ``sends``: how many sends it left open."""
        open_before = self.counts.info
        done = super().crash()
        return {**done, "sends": self.counts.info - open_before}

    def _target(self, conn: Connection, stop: Connection, first_process: int) -> tuple[Any, tuple[Any, ...]]:
        return _child_main, (conn, stop, self.spec, self.bootstrap, first_process, self.processes,
                             self.values, self.rate, self.index, self.client_log_path,
                             time.monotonic_ns() - self.history.now(), self.make)

    def _locks(self) -> tuple[Any, ...]:
        return (self.processes.lock, self.values.lock)

    def _count(self, ns: int, op: list[Any]) -> TimedOp:
        process, type, f, value, error = op
        key = (process, value.get("value"))
        if type == "invoke":
            self.invoked += 1
            self._open[key] = f, value, ns - time.monotonic_ns() + self.history.now()
        else:
            self._open.pop(key, None)
            setattr(self.counts, type, getattr(self.counts, type) + 1)
            if f == "txn" and type == "ok":
                self.commits += 1
        return ns, (process, type, f, value, error)

    def committed(self) -> int:
        return self.commits

    def _end_open(self) -> None:
        """Journal every send and transaction the killed child left open
        (:func:`.outcomes.crashed_sends`, :func:`.outcomes.crashed_transaction`)."""
        left = [(process, *op) for (process, _), op in self._open.items()]
        ops = crashed_sends((process, value) for process, f, value, _ in left if f == "send")
        ops += [crashed_transaction(process, value, invoked)
                for process, f, value, invoked in left if f == "txn"]
        self._open.clear()
        self.counts.info += len(ops)
        self.history.append_many(ops)


def child_started(stop: Connection, leave: threading.Event | None = None) -> threading.Event:
    """Set up a client's child process: it dies with the run (``PR_SET_PDEATHSIG``),
    leaves Ctrl-C to the run and logs nothing of faultline's; the event returned is set
    once ``stop``'s other end closes, or a message comes on it (:meth:`CrashableChild.stop`),
    which sets ``leave`` first."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's to handle
    logging.getLogger("faultline").addHandler(logging.NullHandler())
    logging.getLogger("faultline").propagate = False
    done = threading.Event()

    def relay() -> None:
        with contextlib.suppress(EOFError, OSError):
            stop.recv_bytes()  # raises EOFError when the parent closes its end
            if leave is not None:
                leave.set()
        done.set()

    threading.Thread(target=relay, daemon=True).start()
    return done


def _child_main(conn: Connection, stop: Connection, spec: TestSpec, bootstrap: str,
                first_process: int, processes: ProcessIds, values: Values, rate: float, index: int,
                client_log_path: Path | None, t0: int, make: MakeProducer) -> None:
    """A producer child (:func:`child_started`): the producer client ``make`` makes,
    journaling down ``conn`` until ``stop``'s other end closes; its library's lines go to
    the client log at ``client_log_path`` (``t0``: the history's zero)."""
    done = child_started(stop)
    log = (ClientLog(client_log_path, lambda: time.monotonic_ns() - t0)
           if client_log_path is not None else None)
    try:
        make(spec, bootstrap, PipeJournal(conn, t0), first_process, processes, values,
             rate=rate, index=index, client_log=log).run(done)
    finally:
        if log is not None:
            log.close()
        conn.close()
