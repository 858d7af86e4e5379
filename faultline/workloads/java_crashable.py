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
it printed, then ends every send of it still open as :func:`.outcomes.crashed_sends`
says. The producer stays down until :meth:`~CrashableJavaQueueWorkload.restart_client`
starts a new JVM under a new process number: a new client, whose producer id (with
idempotence) is a new one too.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import tempfile
import threading
from typing import Any

from faultline.errors import FaultlineError
from faultline.history import HistoryWriter
from faultline.spec import TestSpec
from faultline.workloads.clients import ClientLog, ProcessIds
from faultline.workloads.crashable import CHILD_TIMEOUT_S
from faultline.workloads.java_client import JavaProgram, JavaQueueWorkload
from faultline.workloads.outcomes import crashed_sends

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
        with self._lock:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
            try:
                [first] = _COUNTER.unpack(os.pread(self._fd, _COUNTER.size, 0))
                os.pwrite(self._fd, _COUNTER.pack(first + n), 0)
                return int(first)
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the file (and so free it); no take after."""
        os.close(self._fd)


class CrashableJavaQueueWorkload(JavaQueueWorkload):
    """The Java client's queue workload with a JVM per producer, which :meth:`crash_client`
    and :meth:`restart_client` address by index, and one for the consumers; the same
    contract as :class:`.java_client.JavaQueueWorkload`."""

    #: A JVM per client starts in a third of the time with C1 only and one GC thread
    #: (docs/design.md, "Java client crashes").
    jvm_options = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

    def __init__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter, *,
                 client_log: ClientLog | None = None) -> None:
        super().__init__(spec, bootstrap, history, client_log=client_log)
        self._counters: SharedCounters | None = None  # made by start()
        self._consumers = [JavaProgram()] if spec.workload.consumers else []  # a JVM for them all
        self._producers = [JavaProgram(i, acks=True) for i in range(spec.workload.producers)]
        self._programs = [*self._consumers, *self._producers]
        self._lock = threading.Lock()
        self._stopping = False

    @property
    def clients(self) -> int:
        """How many producers there are to crash, numbered from 0."""
        return len(self._producers)

    def start(self) -> None:
        """The counters' file, then every JVM and the threads that journal its output."""
        w = self.spec.workload
        self._counters = SharedCounters.create(w.producers + w.consumers)
        for program in self._consumers:
            self._start(program, [*self._args(), "role=consumers", *self._shared()])
        for index, program in enumerate(self._producers):
            self._start_producer(index, program)

    def _shared(self) -> list[str]:
        assert self._counters is not None  # start() made them
        return [f"counters={self._counters.path}"]

    def _start_producer(self, index: int, program: JavaProgram) -> None:
        self._start(program, [*self._args(), "role=producer", f"index={index}",
                              f"first_process={program.processes[0]}", *self._shared()])

    def crash_client(self, index: int) -> dict[str, Any]:
        """SIGKILL producer ``index``'s JVM and wait until what it printed is journaled,
        its open sends ``info``; the history fields of the crash (``processes``: those it
        used, ``pid``, ``sends``: how many it left open). FaultlineError when it is not
        running."""
        with self._lock:
            program = self._producers[index]
            proc = program.proc
            if program.killed or proc is None or proc.poll() is not None:
                raise FaultlineError(f"producer {index} is not running")
            program.killed = True
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
        program.open.clear()
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
            program = JavaProgram(self._counters.take_process(), acks=True)
            self._start_producer(index, program)  # then listed: running never sees it unstarted
            self._producers[index] = program
            self._programs.append(program)
            return {"processes": list(program.processes)}

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
