"""The Java client's producers, crashable: in a test whose nemesis crashes clients (the
``clients`` family) with ``workload.client: java``, each producer runs in a JVM of its own
and the consumers (if any) in one more, so that a crash is what it is for a real client, a SIGKILL
of that producer's JVM mid-send. Without client crashes every client shares one JVM
(:class:`.java_client.JavaQueueWorkload`).

The JVMs take process numbers and values from one file the harness takes from too
(:class:`SharedCounters`), so both stay unique in the run. A producer JVM waits, after
printing each invoke, until the run has journaled it (:mod:`.java_client`'s protocol):
with the consumers in another JVM, whose lines another thread journals, nothing else
would keep a read of a value from reaching the history before the value's invoke.

A crash (:meth:`CrashableJavaQueueWorkload.crash_client`) kills the JVM, journals what
it printed, then ends every send (or transaction) of it still open as
:func:`.outcomes.crashed_sends` (:func:`.outcomes.crashed_transaction`) says. The producer
stays down until :meth:`~CrashableJavaQueueWorkload.restart_client` starts a new JVM under
a new process number: a new client, whose producer id (with idempotence) is a new one too,
its ``transactional.id`` (txn workload) the same. A pause
(:meth:`~CrashableJavaQueueWorkload.pause_client`) stops the JVM (SIGSTOP) until
:meth:`~CrashableJavaQueueWorkload.resume_client`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from faultline.errors import FaultlineError
from faultline.history import HistoryWriter
from faultline.spec import TestSpec
from faultline.workloads.clients import ClientLog, ProcessIds
from faultline.workloads.crashable import CHILD_TIMEOUT_S, wait_stopped
from faultline.workloads.java_client import JavaProgram, JavaQueueWorkload
from faultline.workloads.outcomes import crashed_sends, crashed_transaction

_COUNTER = struct.Struct(">q")


class SharedCounters:
    """The run's next process number and next value, in a file of two big-endian signed
    64-bit integers that the Java programs take from too (``FaultlineClient.take``):
    each take holds an fcntl lock on the file, which the kernel drops when its holder
    dies, so a JVM killed while taking leaves no lock held. The file is unlinked at once:
    the JVMs open it as :attr:`path`, this process's descriptor in ``/proc``, and nothing
    of it is left once the descriptor is closed, or this process dies."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()  # fcntl locks are the process's: one thread at a time

    @classmethod
    def create(cls, first_process: int) -> SharedCounters:
        """New counters: processes from ``first_process``, values from 0."""
        fd, name = tempfile.mkstemp(prefix="faultline-counters-")
        os.unlink(name)
        os.pwrite(fd, _COUNTER.pack(first_process) + _COUNTER.pack(0), 0)
        return cls(fd)

    @property
    def path(self) -> str:
        """Where another process of the same user opens the file while this one runs."""
        return f"/proc/{os.getpid()}/fd/{self._fd}"

    def take_process(self, n: int = 1) -> int:
        """``n`` process numbers never handed out before (0: none): the first of them."""
        with self.held():
            [first] = _COUNTER.unpack(os.pread(self._fd, _COUNTER.size, 0))
            os.pwrite(self._fd, _COUNTER.pack(first + n), 0)
            return int(first)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The file's lock, held in the block: no JVM takes meanwhile."""
        with self._lock:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the file (and so free it); no take after."""
        os.close(self._fd)


class CrashableJavaQueueWorkload(JavaQueueWorkload):
    """The Java client's queue workload with a JVM per producer, which :meth:`crash_client`,
    :meth:`restart_client`, :meth:`pause_client` and :meth:`resume_client` address by
    index, and one for the consumers; the same contract as
    :class:`.java_client.JavaQueueWorkload`."""

    #: A JVM per client starts in a third of the time with C1 only and one GC thread
    #: (docs/design.md, "Java client crashes").
    jvm_options = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

    def __init__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter, *,
                 client_log: ClientLog | None = None) -> None:
        super().__init__(spec, bootstrap, history, client_log=client_log)
        self._counters: SharedCounters | None = None  # made by start()
        w = spec.workload
        self._consumers = [JavaProgram(range(w.producers, w.producers + w.consumers))] if w.consumers else []
        self._producers = [JavaProgram((i,), i, acks=True) for i in range(w.producers)]
        self._programs = [*self._consumers, *self._producers]
        self._lock = threading.Lock()
        self._stopping = False

    @property
    def clients(self) -> int:
        """How many producers there are to crash, numbered from 0."""
        return len(self._producers)

    def start(self) -> None:
        """The counters' file, then every JVM and the threads that journal its output;
        returns once each of their clients has printed an op."""
        w = self.spec.workload
        self._counters = SharedCounters.create(w.producers + w.consumers)
        for program in self._consumers:
            self._start(program, [*self._args(), "role=consumers", *self._shared()])
        for index, program in enumerate(self._producers):
            self._start_producer(index, program)
        self._await_ready(self._programs)

    def _shared(self) -> list[str]:
        assert self._counters is not None  # start() made them
        return [f"counters={self._counters.path}"]

    def _start_producer(self, index: int, program: JavaProgram) -> None:
        self._start(program, [*self._args(), "role=producer", f"index={index}",
                              f"first_process={program.processes[0]}", *self._shared()])

    def child(self, role: str, index: int) -> JavaProducer:
        """Producer ``index`` (``role`` ``clients``), as
        :class:`faultline.nemeses.clients.ChildClients` hands it out; FaultlineError for
        the consumers, which share one JVM, or an index of none."""
        if role != "clients":
            raise FaultlineError("the Java client's consumers share one JVM: none crashes or "
                                 "pauses alone; that needs the librdkafka client")
        if not 0 <= index < len(self._producers):
            raise FaultlineError(f"no producer {index}: {len(self._producers)} producers")
        return JavaProducer(self, index)

    def children(self, role: str) -> int:
        """How many clients of ``role`` :meth:`child` hands out: every producer, no consumer."""
        return len(self._producers) if role == "clients" else 0

    def _running(self, index: int) -> subprocess.Popen[bytes]:
        """Producer ``index``'s live JVM (``_lock`` held); FaultlineError when none runs."""
        program = self._producers[index]
        proc = program.proc
        if program.killed or proc is None or proc.poll() is not None:
            raise FaultlineError(f"producer {index} is not running")
        return proc

    def crash_client(self, index: int) -> dict[str, Any]:
        """SIGKILL producer ``index``'s JVM (paused or not) and wait until what it printed
        is journaled, its open sends and transactions ``info``; the history fields of the
        crash (``processes``: those it used, ``pid``, ``sends``: how many sends and
        transactions it left open). FaultlineError when it is not running."""
        with self._lock:
            program = self._producers[index]
            proc = self._running(index)
            program.killed, program.paused = True, False
            proc.kill()
        try:
            proc.wait(CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise FaultlineError(f"producer {index} (pid {proc.pid}) did not die of SIGKILL") from None
        for t in program.threads:
            t.join(CHILD_TIMEOUT_S)
            if t.is_alive():
                raise FaultlineError(f"producer {index}'s output was not journaled within "
                                     f"{CHILD_TIMEOUT_S:.0f} s of killing pid {proc.pid}")
        program.close_stdin()
        ops = crashed_sends(program.open.values())
        ops += [crashed_transaction(process, value, invoked)
                for process, (value, invoked) in program.txns.items()]
        program.open.clear()
        program.txns.clear()
        program.stats.info += len(ops)
        self.history.append_many(ops)
        return {"processes": list(program.processes), "pid": proc.pid, "sends": len(ops)}

    def restart_client(self, index: int) -> dict[str, Any]:
        """Start a new JVM for producer ``index`` under a new process number after
        :meth:`crash_client`; the history fields (``processes``: the new one). Nothing is
        started once the workload stops."""
        with self._lock:
            if not self._producers[index].killed:
                return {"processes": [], "result": f"producer {index} was not crashed"}
            if self._stopping:
                return {"processes": [], "result": "the workload is stopping: not restarted"}
            assert self._counters is not None  # a crash follows start()
            first = self._counters.take_process()
            program = JavaProgram((first,), first, acks=True)
            self._start_producer(index, program)  # then listed: running never sees it unstarted
            self._producers[index] = program
            self._programs.append(program)
            return {"processes": list(program.processes)}

    def pause_client(self, index: int) -> dict[str, Any]:
        """Stop producer ``index``'s JVM (SIGSTOP) until :meth:`resume_client`, once the
        kernel shows it stopped, holding no lock of the counters; the history fields
        (``processes``: those it used so far, ``pid``). FaultlineError when it is not
        running or already paused."""
        with self._lock:
            program = self._producers[index]
            proc = self._running(index)
            if program.paused:
                raise FaultlineError(f"producer {index} is paused already")
            assert self._counters is not None  # a running JVM follows start()
            with self._counters.held():
                os.kill(proc.pid, signal.SIGSTOP)
                program.paused = True
                wait_stopped(proc.pid, f"producer {index}")
            return {"processes": list(program.processes), "pid": proc.pid}

    def resume_client(self, index: int) -> dict[str, Any]:
        """Continue the JVM :meth:`pause_client` stopped (SIGCONT); the history fields
        (``pid``, or a ``result`` saying it was not paused: crashed since, or never)."""
        with self._lock:
            program = self._producers[index]
            if not program.paused or program.proc is None:
                return {"result": f"producer {index} was not paused"}
            program.paused = False
            os.kill(program.proc.pid, signal.SIGCONT)
            return {"pid": program.proc.pid}

    def request_stop(self) -> None:
        """Every JVM stops issuing ops; no crashed producer is restarted after."""
        with self._lock:
            self._stopping = True
            super().request_stop()

    def stop(self, timeout: float | None = None) -> None:
        """As :meth:`.java_client.JavaQueueWorkload.stop`; then the counters are closed, and
        :attr:`processes` goes on from where they ended."""
        try:
            super().stop(timeout)
        finally:
            if self._counters is not None:
                self.processes = ProcessIds(self._counters.take_process(0))
                self._counters.close()
                self._counters = None


class JavaProducer:
    """Producer ``index`` of a :class:`CrashableJavaQueueWorkload`, as the clients nemesis
    addresses one client (:class:`faultline.nemeses.clients.ClientChild`)."""

    def __init__(self, workload: CrashableJavaQueueWorkload, index: int) -> None:
        self.workload, self.index = workload, index

    def crash(self) -> dict[str, Any]:
        return self.workload.crash_client(self.index)

    def restart(self) -> dict[str, Any]:
        return self.workload.restart_client(self.index)

    def pause(self) -> dict[str, Any]:
        return self.workload.pause_client(self.index)

    def resume(self) -> dict[str, Any]:
        return self.workload.resume_client(self.index)
