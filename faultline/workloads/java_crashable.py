"""The Java client's producers, crashable: in a test whose nemesis crashes clients (the
``clients`` family) with ``workload.client: java``, each producer runs in a JVM of its own
and the consumers (if any) in one more, so that a crash is what it is for a real client, a SIGKILL
of that producer's JVM mid-send. Without client crashes every client shares one JVM
(:class:`.java_client.JavaQueueWorkload`). The group workload's members run in a JVM each
too (:attr:`CrashableJavaQueueWorkload.member_jvms`, :mod:`.java_group`).

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
:meth:`~CrashableJavaQueueWorkload.resume_client`. A member's crash ends its open op (a
poll or a commit) ``info`` with :data:`.outcomes.CRASH_ERROR`, as
:mod:`.group_crashable`'s; a stop (:meth:`~CrashableJavaQueueWorkload.stop_client`) has it
leave the group at once, its JVM exit, until a restart starts a new member in its slot.
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
from faultline.history import HistoryWriter, PendingOp
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
    role and index, and one for the consumers (one per consumer with
    :attr:`member_jvms`, which :meth:`stop_client` has leave too); the same contract as
    :class:`.java_client.JavaQueueWorkload`."""

    #: A JVM per client starts in a third of the time with C1 only and one GC thread
    #: (docs/design.md, "Java client crashes").
    jvm_options = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
    #: True: each consumer runs in a JVM of its own (a group member, which crashes, pauses
    #: and leaves alone); false: the consumers share one.
    member_jvms = False

    def __init__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter, *,
                 client_log: ClientLog | None = None) -> None:
        super().__init__(spec, bootstrap, history, client_log=client_log)
        self._counters: SharedCounters | None = None  # made by start()
        w = spec.workload
        consumers = range(w.producers, w.producers + w.consumers)
        #: role (``clients``: the producers, ``consumers``) -> its JVMs by index, each
        #: replaced in its slot by its restart
        self._slots: dict[str, list[JavaProgram]] = {
            "clients": [JavaProgram((i,), i, acks=True) for i in range(w.producers)],
            "consumers": [JavaProgram((p,), p) for p in consumers] if self.member_jvms else []}
        self._consumers = [JavaProgram(consumers)] if consumers and not self.member_jvms else []
        self._programs = [*self._consumers, *self._slots["consumers"], *self._slots["clients"]]
        self._lock = threading.Lock()
        self._stopping = False

    @property
    def clients(self) -> int:
        """How many producers there are to crash, numbered from 0."""
        return len(self._slots["clients"])

    def start(self) -> None:
        """The counters' file, then every JVM and the threads that journal its output;
        returns once each of their clients has printed an op."""
        w = self.spec.workload
        self._counters = SharedCounters.create(w.producers + w.consumers)
        for program in self._consumers:
            self._start(program, [*self._args(), "role=consumers", *self._shared()])
        for role, programs in self._slots.items():
            for index, program in enumerate(programs):
                self._start_slot(role, index, program)
        self._await_ready(self._programs)

    def _shared(self) -> list[str]:
        assert self._counters is not None  # start() made them
        return [f"counters={self._counters.path}"]

    def _start_slot(self, role: str, index: int, program: JavaProgram) -> None:
        self._start(program, [*self._args(), f"role={_NAMES[role]}", f"index={index}",
                              f"first_process={program.processes[0]}", *self._shared()])

    def child(self, role: str, index: int) -> JavaChild:
        """Client ``index`` of ``role`` (``clients``: a producer; ``consumers``: a member
        with :attr:`member_jvms`), as :class:`faultline.nemeses.clients.ChildClients` hands
        it out; FaultlineError for consumers that share one JVM, or an index of none."""
        if role == "consumers" and not self.member_jvms:
            raise FaultlineError("the Java client's consumers share one JVM: none crashes or "
                                 "pauses alone; that needs the group workload")
        programs = self._slots[role]
        if not 0 <= index < len(programs):
            raise FaultlineError(f"no {_NAMES[role]} {index}: {len(programs)} {_NAMES[role]}s")
        return JavaChild(self, role, index)

    def children(self, role: str) -> int:
        """How many clients of ``role`` :meth:`child` hands out."""
        return len(self._slots.get(role, ()))

    def _running(self, role: str, index: int) -> tuple[JavaProgram, subprocess.Popen[bytes]]:
        """The program of ``role``'s client ``index`` and its live JVM (``_lock`` held);
        FaultlineError when none runs."""
        program = self._slots[role][index]
        proc = program.proc
        if program.killed or program.left or proc is None or proc.poll() is not None:
            raise FaultlineError(f"{_NAMES[role]} {index} is not running")
        return program, proc

    def crash_client(self, index: int, role: str = "clients") -> dict[str, Any]:
        """SIGKILL the JVM of ``role``'s client ``index`` (paused or not) and wait until
        what it printed is journaled, its open ops ``info`` (:meth:`_crashed_ops`); the
        history fields of the crash (``processes``: those it used, ``pid``, and of a
        producer ``sends``: how many sends and transactions it left open).
        FaultlineError when it is not running."""
        with self._lock:
            program, proc = self._running(role, index)
            program.killed, program.paused = True, False
            proc.kill()
        self._exited(program, f"{_NAMES[role]} {index}", "die of SIGKILL")
        ops = self._crashed_ops(program)
        program.stats.info += len(ops)
        self.history.append_many(ops)
        done: dict[str, Any] = {"processes": list(program.processes), "pid": proc.pid}
        return {**done, "sends": len(ops)} if role == "clients" else done

    def _exited(self, program: JavaProgram, name: str, doing: str) -> None:
        """Wait until ``program``'s JVM has exited (``doing``: what it was told to do) and
        what it printed is journaled; close its stdin. FaultlineError past
        :data:`CHILD_TIMEOUT_S`."""
        assert program.proc is not None  # it ran
        try:
            program.proc.wait(CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise FaultlineError(f"{name} (pid {program.proc.pid}) did not {doing} within "
                                 f"{CHILD_TIMEOUT_S:.0f} s") from None
        for t in program.threads:
            t.join(CHILD_TIMEOUT_S)
            if t.is_alive():
                raise FaultlineError(f"{name}'s output was not journaled within "
                                     f"{CHILD_TIMEOUT_S:.0f} s of the end of pid {program.proc.pid}")
        program.close_stdin()

    def _crashed_ops(self, program: JavaProgram) -> list[PendingOp]:
        """The ops ``program``'s killed JVM left open, ended as a crash ends them (its sends
        by :func:`.outcomes.crashed_sends`, its transactions by
        :func:`.outcomes.crashed_transaction`), no longer open."""
        ops = crashed_sends(program.open.values())
        ops += [crashed_transaction(process, value, invoked)
                for process, (value, invoked) in program.txns.items()]
        program.open.clear()
        program.txns.clear()
        return ops

    def restart_client(self, index: int, role: str = "clients") -> dict[str, Any]:
        """Start a new JVM for ``role``'s client ``index`` under a new process number, in
        its slot, after :meth:`crash_client` or :meth:`stop_client`; the history fields
        (``processes``: the new one). Nothing is started once the workload stops."""
        with self._lock:
            old = self._slots[role][index]
            if not (old.killed or old.left):
                return {"processes": [], "result": f"{_NAMES[role]} {index} was not crashed or stopped"}
            if self._stopping:
                return {"processes": [], "result": "the workload is stopping: not restarted"}
            assert self._counters is not None  # a crash follows start()
            first = self._counters.take_process()
            program = JavaProgram((first,), first, acks=old.acks)
            program.commits = old.commits  # the slot's count goes on
            self._start_slot(role, index, program)  # then listed: running never sees it unstarted
            self._slots[role][index] = program
            self._programs.append(program)
            return {"processes": list(program.processes)}

    def held(self, index: int, role: str = "consumers") -> int | None:
        """How many partitions member ``index``'s live JVM holds, by its own journal
        (:attr:`JavaProgram.held`); None when it is not running (crashed or stopped).
        FaultlineError for a producer, which is no group member."""
        if role != "consumers":
            raise FaultlineError(f"{_NAMES[role]} {index} is no group member: it holds no partitions")
        with self._lock:
            try:
                program, _ = self._running(role, index)
            except FaultlineError:
                return None
            return len(program.held)

    def committed(self, index: int, role: str = "clients") -> int:
        """How many transactions producer ``index`` and the JVMs it replaced committed
        (:attr:`JavaProgram.commits`); FaultlineError for a member, which commits none."""
        if role != "clients":
            raise FaultlineError(f"{_NAMES[role]} {index} is no transactional producer: it commits nothing")
        with self._lock:
            return self._slots[role][index].commits

    def pause_client(self, index: int, role: str = "clients") -> dict[str, Any]:
        """Stop the JVM of ``role``'s client ``index`` (SIGSTOP) until
        :meth:`resume_client`, once the kernel shows it stopped, holding no lock of the
        counters; the history fields (``processes``: those it used so far, ``pid``).
        FaultlineError when it is not running or already paused."""
        name = f"{_NAMES[role]} {index}"
        with self._lock:
            program, proc = self._running(role, index)
            if program.paused:
                raise FaultlineError(f"{name} is paused already")
            assert self._counters is not None  # a running JVM follows start()
            with self._counters.held():
                os.kill(proc.pid, signal.SIGSTOP)
                program.paused = True
                wait_stopped(proc.pid, name)
            return {"processes": list(program.processes), "pid": proc.pid}

    def resume_client(self, index: int, role: str = "clients") -> dict[str, Any]:
        """Continue the JVM :meth:`pause_client` stopped (SIGCONT); the history fields
        (``pid``, or a ``result`` saying it was not paused: crashed since, or never)."""
        with self._lock:
            program = self._slots[role][index]
            if not program.paused or program.proc is None:
                return {"result": f"{_NAMES[role]} {index} was not paused"}
            program.paused = False
            os.kill(program.proc.pid, signal.SIGCONT)
            return {"pid": program.proc.pid}

    def stop_client(self, index: int, role: str = "consumers") -> dict[str, Any]:
        """Have member ``index`` leave at once (an ``l`` on its JVM's stdin: it closes its
        consumer, no settling) and wait until its JVM has exited, what it printed
        journaled; the history fields (``processes``: those it used, ``pid``).
        FaultlineError when it is not running, is paused, or does not exit in time."""
        name = f"{_NAMES[role]} {index}"
        if role != "consumers":
            raise FaultlineError(f"{name} cannot leave: only a group member does")
        with self._lock:
            program, proc = self._running(role, index)
            if program.paused:
                raise FaultlineError(f"{name} is paused: it cannot leave")
            program.left = True
            program.tell(b"l")
        self._exited(program, name, "leave")
        return {"processes": list(program.processes), "pid": proc.pid}

    def request_stop(self) -> None:
        """Every JVM stops issuing ops; no crashed or stopped client is restarted after."""
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


#: A role of :class:`faultline.nemeses.clients.ChildClients` -> the role of its client's
#: JVM (the program's ``role`` setting), which names the client in messages too.
_NAMES = {"clients": "producer", "consumers": "consumer"}


class JavaChild:
    """Client ``index`` of ``role`` of a :class:`CrashableJavaQueueWorkload`, as the
    clients nemesis addresses one client (:class:`faultline.nemeses.clients.ClientChild`)."""

    def __init__(self, workload: CrashableJavaQueueWorkload, role: str, index: int) -> None:
        self.workload, self.role, self.index = workload, role, index

    def crash(self) -> dict[str, Any]:
        return self.workload.crash_client(self.index, self.role)

    def restart(self) -> dict[str, Any]:
        return self.workload.restart_client(self.index, self.role)

    def pause(self) -> dict[str, Any]:
        return self.workload.pause_client(self.index, self.role)

    def resume(self) -> dict[str, Any]:
        return self.workload.resume_client(self.index, self.role)

    def stop(self) -> dict[str, Any]:
        return self.workload.stop_client(self.index, self.role)

    def held(self) -> int | None:
        return self.workload.held(self.index, self.role)

    def committed(self) -> int:
        return self.workload.committed(self.index, self.role)
