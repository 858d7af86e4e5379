"""Producers that can crash: in a test whose nemesis crashes clients (the ``clients``
family), each producer of :mod:`.queue` runs in a child process of its own, so that a
crash is what it is for a real client, a SIGKILL mid-send. Without client crashes the
producers stay threads of the run's process (:class:`.queue.QueueWorkload`).

The child runs a :class:`.queue.QueueProducer` (or another producer client, e.g. the
transactional :class:`.txn.TxnProducer`: :class:`MakeProducer`) whose journal (:class:`PipeJournal`)
sends each batch of ops, stamped with ``time.monotonic_ns()``, down a socket, and
waits, for a batch with invokes, until the parent has journaled it at those times
(:meth:`HistoryWriter.append_at`) before it produces any of them: the contract of
:mod:`.queue` holds, an invoke is journaled before its message can reach a broker (and
so before a consumer of the run reads it). Process numbers and values come from
counters the child shares with the parent (:class:`.clients.ProcessIds`,
:class:`.clients.Values`), so they stay unique in the run.

A crash (:meth:`CrashableProducer.crash`) kills the child, journals what the pipe still
held, then ends every send (or transaction) of the child still open as ``info`` with the
error :data:`.outcomes.CRASH_ERROR` (:func:`.outcomes.crashed_sends`,
:func:`.outcomes.crashed_transaction`). The producer stays down until
:meth:`CrashableProducer.restart`, which starts a new child under a new process number:
a new client, whose producer id (with idempotence) is a new one too.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import threading
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Protocol

import orjson

from faultline.errors import FaultlineError
from faultline.history import HistoryWriter, OpType, PendingOp, Process, TimedOp
from faultline.spec import TestSpec
from faultline.workloads.clients import _SPAWN, ClientLog, Journal, ProcessIds, SendCounts, Values
from faultline.workloads.outcomes import crashed_sends, crashed_transaction
from faultline.workloads.queue import ProducerClient, QueueProducer, QueueWorkload

#: How long a crash or a restart waits for the child to be gone, or to start.
CHILD_TIMEOUT_S = 30.0

#: prctl(2): the signal the kernel sends this process when its parent dies.
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent dies; OSError if it refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


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
        return self._crashable(index).crash()

    def restart_client(self, index: int) -> dict[str, Any]:
        """:meth:`CrashableProducer.restart` of producer ``index``."""
        return self._crashable(index).restart()

    def _crashable(self, index: int) -> CrashableProducer:
        producer = self.producers[index]
        assert isinstance(producer, CrashableProducer)  # _producer makes no other
        return producer


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

    def __init__(self, conn: Connection, t0: int = 0) -> None:
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


class CrashableProducer:
    """One producer client of :mod:`.queue` in a child process; what
    :class:`.queue.QueueWorkload` drives of a producer (``run`` on its thread, the
    counts), plus :meth:`crash` and :meth:`restart`. See the module docstring."""

    def __init__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter, first_process: int,
                 processes: ProcessIds, values: Values, *, rate: float, index: int,
                 client_log: ClientLog | None, make: MakeProducer = QueueProducer) -> None:
        self.spec, self.bootstrap, self.history, self.make = spec, bootstrap, history, make
        self.processes, self.values, self.rate, self.index = processes, values, rate, index
        self.client_log_path = client_log.path if client_log is not None else None
        self.invoked = 0
        self.retired = 0
        self.counts = SendCounts()
        self._first = first_process
        self._lock = threading.Lock()
        self._child: Any = None  # the live child process (multiprocessing's SpawnProcess)
        self._stop_child: Connection | None = None  # closed: the live child stops
        self._killed = False
        self._gone = threading.Event()  # the killed child's sends are journaled
        self._started = threading.Event()  # a (re)started child is running
        self._restart = threading.Event()
        self._stopping = threading.Event()
        #: (process, the send's value; None: a transaction) -> (its op's f, value, invoke's
        #: history time), for every op invoked and not complete
        self._open: dict[tuple[Process, Any], tuple[str, Any, int]] = {}
        self._processes: list[Process] = []  # of the live child, in order

    def run(self, stop: threading.Event) -> None:
        """Run a child until ``stop`` is set (then it completes its sends); a crashed one
        is replaced only by :meth:`restart`. FaultlineError if a child dies uncrashed."""

        def relay() -> None:
            stop.wait()
            with self._lock:
                self._stopping.set()
                if self._stop_child is not None:
                    self._stop_child.close()
            self._restart.set()

        threading.Thread(target=relay, name=f"faultline-producer-{self.index}-stop", daemon=True).start()
        first = self._first
        while True:
            ours, theirs = _SPAWN.Pipe()  # ops this way, the answers to invokes back
            stop_theirs, stop_ours = _SPAWN.Pipe(duplex=False)  # closing ours stops the child
            child = _SPAWN.Process(
                target=_child_main, name=f"faultline-producer-{self.index}", daemon=True,
                args=(theirs, stop_theirs, self.spec, self.bootstrap, first, self.processes,
                      self.values, self.rate, self.index, self.client_log_path,
                      time.monotonic_ns() - self.history.now(), self.make))
            with self._lock:
                if self._stopping.is_set():
                    return
                child.start()
                self._child, self._stop_child = child, stop_ours
                self._killed, self._processes = False, [first]
            theirs.close()
            stop_theirs.close()
            self._started.set()
            self._read(ours)
            child.join()
            with self._lock:
                killed, self._child, self._stop_child = self._killed, None, None
            stop_ours.close()
            if not killed:
                if child.exitcode != 0:
                    raise FaultlineError(f"producer {self.index} (process {first}) ended with exit "
                                         f"code {child.exitcode}")
                return
            self._end_open()
            self._gone.set()
            self._restart.wait()
            self._restart.clear()
            first = self.processes.take()

    def crash(self) -> dict[str, Any]:
        """Kill the child (SIGKILL) and wait until its sends are journaled, the open ones
        ``info``; the history fields of the crash (``processes``: those the child used,
        ``pid``, ``sends``: how many it left open). FaultlineError when it is not running."""
        with self._lock:
            child = self._child
            if child is None or self._killed or child.pid is None:
                raise FaultlineError(f"producer {self.index} is not running")
            self._killed = True
            self._started.clear()
            self._gone.clear()
            pid, processes, open_before = child.pid, list(self._processes), self.counts.info
            # the counters' locks held: the child dies holding neither (its one shared state)
            with self.processes.lock, self.values.lock:
                os.kill(pid, signal.SIGKILL)
                if not wait([child.sentinel], CHILD_TIMEOUT_S):
                    raise FaultlineError(f"producer {self.index} (pid {pid}) did not die of SIGKILL")
        if not self._gone.wait(CHILD_TIMEOUT_S):
            raise FaultlineError(f"producer {self.index}'s sends were not journaled within "
                                 f"{CHILD_TIMEOUT_S:.0f} s of killing pid {pid}")
        return {"processes": processes, "pid": pid, "sends": self.counts.info - open_before}

    def restart(self) -> dict[str, Any]:
        """Start a new child under a new process number after :meth:`crash`; the history
        fields (``processes``: the new one). Nothing is started once the workload stops."""
        with self._lock:
            if not self._killed:
                return {"processes": [], "result": f"producer {self.index} was not crashed"}
        if self._stopping.is_set():
            return {"processes": [], "result": "the workload is stopping: not restarted"}
        self._restart.set()
        if not self._started.wait(CHILD_TIMEOUT_S):
            raise FaultlineError(f"producer {self.index} did not restart within {CHILD_TIMEOUT_S:.0f} s")
        with self._lock:
            return {"processes": list(self._processes[:1])}

    def _read(self, conn: Connection) -> None:
        """Journal the child's messages until its end of the pipe closes (it exited or
        was killed: what it sent before is still read). A message cut short by the kill
        is dropped: its invokes were never produced (the journal goes first), and the
        sends its completions ended stay open, to end ``info``."""
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
                self.history.append_at([self._count(ns, op) for op in ops])
                if _invokes(ops):
                    try:
                        conn.send_bytes(b"")
                    except OSError:  # the child was killed waiting: its sends end info
                        with self._lock:
                            if not self._killed:
                                raise

    def _count(self, ns: int, op: list[Any]) -> TimedOp:
        process, type, f, value, error = op
        if process not in self._processes:
            self._processes.append(process)
            self.retired += 1
        key = (process, value.get("value"))
        if type == "invoke":
            self.invoked += 1
            self._open[key] = f, value, ns - time.monotonic_ns() + self.history.now()
        else:
            self._open.pop(key, None)
            setattr(self.counts, type, getattr(self.counts, type) + 1)
        return ns, (process, type, f, value, error)

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


def _child_main(conn: Connection, stop: Connection, spec: TestSpec, bootstrap: str,
                first_process: int, processes: ProcessIds, values: Values, rate: float, index: int,
                client_log_path: Path | None, t0: int, make: MakeProducer) -> None:
    """A producer child: the producer client ``make`` makes, journaling down ``conn`` until
    ``stop``'s other end closes. The child dies with the run (``PR_SET_PDEATHSIG``); its
    library's lines go to the client log at ``client_log_path`` (``t0``: the history's zero)."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's to handle
    logging.getLogger("faultline").addHandler(logging.NullHandler())
    logging.getLogger("faultline").propagate = False
    log = (ClientLog(client_log_path, lambda: time.monotonic_ns() - t0)
           if client_log_path is not None else None)
    done = threading.Event()

    def relay() -> None:
        with contextlib.suppress(EOFError, OSError):
            stop.recv_bytes()  # nothing is sent: this returns when the parent closes its end
        done.set()

    threading.Thread(target=relay, daemon=True).start()
    try:
        make(spec, bootstrap, PipeJournal(conn, t0), first_process, processes, values,
             rate=rate, index=index, client_log=log).run(done)
    finally:
        if log is not None:
            log.close()
        conn.close()
